// The memory timeline: forward, backward and replay events with live bytes,
// written as Chrome trace-event JSON.
#include "engine/trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "ops/ops.h"

namespace remat {
namespace {

TEST(Trace, RecordsForwardBackwardAndReplaysWithLiveBytes) {
  Tensor w = ones({64, 64}).requires_grad_();
  const Tensor x = ones({32, 64});
  TraceRecorder trace;
  Tensor loss;
  {
    RecomputeScope drop_relu([](const Node& node) { return node.name() == "relu" ? Tag::Recompute : Tag::Keep; });
    loss = sum(matmul(relu(matmul(x, w)), w));
  }
  loss.backward();
  auto count = [&](const std::string& category) {
    return std::count_if(trace.events().begin(), trace.events().end(),
                         [&](const TraceRecorder::Event& e) { return e.category == category; });
  };
  EXPECT_EQ(count("forward"), 4);
  EXPECT_GE(count("backward"), 4);
  EXPECT_EQ(count("replay"), 1);  // relu, rebuilt for the second matmul's backward
  const auto replay = std::find_if(trace.events().begin(), trace.events().end(),
                                   [](const TraceRecorder::Event& e) { return e.category == "replay"; });
  EXPECT_EQ(replay->name, "relu");
  // In: the rebuilt relu output; out: its replay input, the first matmul's
  // output, which nothing else reads. Both 32 x 64 floats.
  EXPECT_EQ(replay->bytes_at_end - replay->bytes_at_start, 0);
  EXPECT_GT(replay->end_us, replay->start_us);
  for (const auto& e : trace.events()) EXPECT_LE(e.start_us, e.end_us);
  const std::string json = trace.json();
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("\"ph\": \"C\""), std::string::npos);
  EXPECT_NE(json.find("\"cat\": \"replay\""), std::string::npos);
}

TEST(Trace, NothingIsRecordedWithoutARecorder) {
  Tensor w = ones({2, 2}).requires_grad_();
  sum(relu(w)).backward();  // no recorder: the spans are no-ops
  TraceRecorder trace;
  EXPECT_TRUE(trace.events().empty());
}

// The trace is written whole or not at all (engine/file_write.h).
TEST(Trace, ASaveThatFailsNamesTheFileAndLeavesNone) {
  TraceRecorder trace;
  const std::string path = (std::filesystem::temp_directory_path() / "remat_trace_test_full.json").string();
  std::filesystem::remove(path);
  ::setenv("REMAT_FAULT_WRITE", "ENOSPC:remat_trace_test_full.json:4", 1);
  std::string message = "no error";
  try {
    trace.save(path);
  } catch (const Error& e) {
    message = e.what();
  }
  ::unsetenv("REMAT_FAULT_WRITE");
  EXPECT_NE(message.find("cannot write '" + path + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("(ENOSPC)"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(path));
  trace.save(path);
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace remat
