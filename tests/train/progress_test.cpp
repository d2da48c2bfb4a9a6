// The progress line (train/progress.h).
#include "train/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace remat::train {
namespace {

TEST(Progress, TheLineShowsStepsPercentTimesLossAndRate) {
  // 120 of 480 steps in 30 s: 90 s to go; 64 samples a step: 256 per second.
  EXPECT_EQ(progress_line(120, 480, 120, 30.0, 0.51234, 120 * 64, 8),
            "[##......] 120/480  25% 00:30<01:30 loss 0.5123 256 samples/s");
  EXPECT_EQ(progress_line(0, 5, 0, 0.0, 2.0, 0, 4), "[....] 0/5   0% 00:00<00:00 loss 2.0000 0 samples/s");
  EXPECT_EQ(progress_line(5, 5, 5, 4000.0, 0.1, 5, 4), "[####] 5/5 100% 1:06:40<00:00 loss 0.1000 0 samples/s");
}

// Issue 43, item 6: the rate is the examples this run trained over its
// time, not its step count times the latest step's rows (an epoch's short
// last batch halved fashion-mnist's rate), nor steps a resumed run did not
// take (a run resumed at step 1000 ran 10 steps in 5 s: 45 s to go).
TEST(Progress, TheRateAndTimeLeftCountOnlyWhatThisRunDid) {
  EXPECT_EQ(progress_line(1010, 1100, 10, 5.0, 0.5, 9 * 64 + 32, 4),
            "[###.] 1010/1100  92% 00:05<00:45 loss 0.5000 122 samples/s");
}

TEST(Progress, OffATerminalItWritesPlainLinesAndTheLast) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  Progress progress(file);
  for (int64_t step = 1; step <= 50; ++step) progress.update(step, 50, 1.0, 16);  // quicker than one line per 5 s
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
