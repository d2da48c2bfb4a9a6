// The progress line (train/progress.h).
#include "train/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace remat::train {
namespace {

TEST(Progress, TheLineShowsStepsPercentTimesLossAndRate) {
  // 120 of 480 steps in 30 s: 90 s to go; 64 samples a step: 256 per second.
  EXPECT_EQ(progress_line(120, 480, 30.0, 0.51234, 64, 8),
            "[##......] 120/480  25% 00:30<01:30 loss 0.5123 256 samples/s");
  EXPECT_EQ(progress_line(0, 5, 0.0, 2.0, 8, 4), "[....] 0/5   0% 00:00<00:00 loss 2.0000 0 samples/s");
  EXPECT_EQ(progress_line(5, 5, 4000.0, 0.1, 1, 4), "[####] 5/5 100% 1:06:40<00:00 loss 0.1000 0 samples/s");
}

TEST(Progress, OffATerminalItWritesPlainLinesAndTheLast) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  Progress progress(16, file);
  for (int64_t step = 1; step <= 50; ++step) progress.update(step, 50, 1.0);  // quicker than one line per 5 s
  progress.finish();
  std::rewind(file);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), file));
  std::fclose(file);
  EXPECT_EQ(text.find('\r'), std::string::npos);  // no redrawing in a file
  EXPECT_NE(text.find("50/50 100%"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;  // the last step only
}

}  // namespace
}  // namespace remat::train
