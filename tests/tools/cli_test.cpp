// The remat program as a user meets it: bad flags, bad values and missing
// data give a message naming what was wrong and a non-zero exit code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "tests/support/errors.h"

namespace {

// A run's streams apart: what a test parses or counts is stdout alone, so
// that a warning on stderr (a library's, or remat's own) changes no count;
// messages are looked for in both.
struct Outcome {
  int exit_code = -1;
  std::string out;     // stdout
  std::string err;     // stderr
  std::string output;  // stdout then stderr, for messages
};

Outcome run_remat(const std::string& args) {
  char err_path[] = "/tmp/remat_cli_stderr_XXXXXX";
  const int err_fd = mkstemp(err_path);
  if (err_fd < 0) return {};
  close(err_fd);
  const std::string command = std::string(REMAT_BINARY) + " " + args + " 2>" + err_path;
  Outcome run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe) {
    std::array<char, 4096> buffer{};
    while (fgets(buffer.data(), buffer.size(), pipe)) run.out += buffer.data();
    const int status = pclose(pipe);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::ifstream err_file(err_path);
  run.err.assign(std::istreambuf_iterator<char>(err_file), std::istreambuf_iterator<char>());
  std::remove(err_path);
  run.output = run.out + run.err;
  return run;
}

using remat::testing::contains;

TEST(Cli, UnknownFlagIsNamed) {
  const Outcome run = run_remat("bench --workload W1 --polcy none");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "--polcy")) << run.output;
}

TEST(Cli, MissingDatasetNamesPathAndPackage) {
  const Outcome run = run_remat("train --task fashion-mnist --data-dir /nonexistent/fashion");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "/nonexistent/fashion/train-images-idx3-ubyte.gz")) << run.output;
  EXPECT_TRUE(contains(run.output, "dataset-fashion-mnist")) << run.output;
}

TEST(Cli, UnknownTaskWorkloadAndPolicyAreNamed) {
  Outcome run = run_remat("train --task imagenet");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "imagenet")) << run.output;
  run = run_remat("bench --workload W9");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "W9")) << run.output;
  run = run_remat("bench --workload W1 --policy magic");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "magic")) << run.output;
}

TEST(Cli, AFlagOfTheOtherTaskIsAnError) {
  Outcome run = run_remat("train --task fashion-mnist --time-limit 5");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--time-limit is a flag of --task kjv-gpt")) << run.output;
  run = run_remat("train --task kjv-gpt --epochs 2");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--epochs is a flag of --task fashion-mnist, not of --task kjv-gpt")) << run.output;
  // Neither the task's nor a Trainer argument (kjv-gpt's --checkpoint FILE
  // became the Trainer's --output-dir DIR).
  run = run_remat("train --task kjv-gpt --checkpoint ck.safetensors");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "unknown flag --checkpoint: not a training argument")) << run.output;
}

TEST(Cli, TheBatchSweepNamesABadLimitOrBatchList) {
  const std::pair<const char*, const char*> cases[] = {
      {"--memory-limit lots --batch-sizes 8,16", "tradeoff --memory-limit: 'lots' is not a positive byte count"},
      {"--memory-limit 0.4B --batch-sizes 8", "'0.4B' is less than one byte"},
      {"--memory-limit 256MiB --batch-sizes 8,x", "'x' in '8,x' is not a whole number"},
      {"--memory-limit 256MiB --batch-sizes 8,,16", "'' in '8,,16' is not a whole number"},
      {"--memory-limit 256MiB --batch-sizes 8,0", "a batch size must be at least 1, got 0"},
      {"--memory-limit 256MiB --batch-sizes 8,16,8", "batch size 8 is given twice"},
      {"--memory-limit 256MiB", "--memory-limit and --batch-sizes go together"},
      {"--batch-sizes 8", "--memory-limit and --batch-sizes go together"},
      {"--memory-limit 256MiB --batch-sizes 8 --budgets 50%", "--budgets is not a flag of the batch sweep"},
      {"--workload W3 --memory-limit 256MiB --batch-sizes 8", "workload 'W3' has no batch to change here"},
  };
  for (const auto& [flags, message] : cases) {
    const Outcome run = run_remat(std::string("tradeoff ") + flags + " --out /tmp/remat_cli_batches");
    EXPECT_EQ(run.exit_code, 1) << flags;
    EXPECT_TRUE(contains(run.output, message)) << flags << ": " << run.output;
  }
  const Outcome run = run_remat("tradeoff --model mlp --dims 8,16,4 --memory-limit 1MiB --batch-sizes 2,4 --policies "
                                "none,cost --steps 1 --out /tmp/remat_cli_batches");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.out, "fastest that fits under none: batch ")) << run.out;  // every run fits 1 MiB
  EXPECT_TRUE(contains(run.out, "fastest that fits under cost: batch ")) << run.out;
  EXPECT_TRUE(contains(run.err, "[4/4] mlp 8-16-4 B4 cost budget")) << run.err;  // progress on stderr
  std::ifstream csv("/tmp/remat_cli_batches/batches.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_TRUE(header.starts_with("model,batch_size,policy,memory_limit_mib")) << header;
}

TEST(Cli, AModelsFlagsNeedTheirModel) {
  Outcome run = run_remat("bench --n-layer 2");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "bench: --n-layer is a flag of --model gpt")) << run.output;
  run = run_remat("explain --model gpt --dims 4,2");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "explain: --dims is a flag of --model mlp, not of --model gpt")) << run.output;
  run = run_remat("tradeoff --model mlp --hf /tmp --out /tmp/x");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "give --model or --hf, not both")) << run.output;
  run = run_remat("bench --workload W2 --model mlp");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "give --workload or a model of your own (--model, --hf), not both")) << run.output;
  run = run_remat("bench --workload W1 --batch-size 4");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--batch-size is a flag of --model and --hf")) << run.output;
  run = run_remat("bench --model mlp --dims 8,16,4 --batch-size 4 --policy cost --steps 1 --warmup 1 --json");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"workload\":\"mlp 8-16-4 B4\"")) << run.output;
}

TEST(Cli, TrainTakesAModelOfItsOwn) {
  Outcome run;
  if (std::ifstream("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    run = run_remat("train --model mlp --dims 784,32,16,10 --epochs 1 --max-batches 3 --threads 1");
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(contains(run.output, "task fashion-mnist: MLP 784-32-16-10")) << run.output;
  }
  run = run_remat("train --model mlp --dims 100,10");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--dims 100,10 must run from 784 (fashion-mnist's pixels) to 10")) << run.output;
  run = run_remat("train --model gpt --task fashion-mnist");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--model gpt trains task kjv-gpt, not --task fashion-mnist")) << run.output;
  run = run_remat("train --model gpt --hf /tmp");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "give --model or --hf, not both")) << run.output;
  run = run_remat("train --task fashion-mnist --head untied");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--head is a flag of --model gpt or llama (tasks kjv-gpt, kjv-llama), not of task "
                                   "fashion-mnist"))
      << run.output;
  run = run_remat("train --epochs 1");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "give --task fashion-mnist|kjv-gpt|kjv-llama, --model gpt|llama|mlp, or --hf DIR"))
      << run.output;

  // A GPT of the user's sizes; an untied head adds vocabulary x channels.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("remat_cli_train_model_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path text = dir / "text.txt";
  const std::string verse = "in the beginning was the word. ";
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i) out << verse;
  }
  int64_t parameters[2] = {0, 0};
  for (int untied = 0; untied < 2; ++untied) {
    run = run_remat(std::string("train --model gpt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --max-steps 2 "
                                "--batch-size 2 --eval-batches 1 --sample-chars 4 --prompt in --threads 1 --json "
                                "--head ") + (untied ? "untied" : "tied") + " --text " + text.string());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::string field = "\"parameters\":";
    const size_t at = run.output.rfind(field);
    ASSERT_NE(at, std::string::npos) << run.output;
    parameters[untied] = std::stoll(run.output.substr(at + field.size()));
  }
  const auto vocabulary = static_cast<int64_t>(std::set<char>(verse.begin(), verse.end()).size());
  EXPECT_EQ(parameters[1] - parameters[0], vocabulary * 16) << parameters[0] << " " << parameters[1];
  std::filesystem::remove_all(dir);
}

TEST(Cli, OtherFlagsOfTrainAreTrainerArgumentsCheckedBeforeTheData) {
  // Accepted (the missing data is the error), whether CLI11 knows the name
  // for kjv-gpt (--max-steps) or not (--eval-strategy).
  Outcome run = run_remat("train --task fashion-mnist --data-dir /nonexistent/fashion --max-steps 5 "
                          "--eval-strategy epoch --gradient-checkpointing");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "/nonexistent/fashion")) << run.output;
  run = run_remat("train --task fashion-mnist --data-dir /nonexistent/fashion --eval-strategy daily");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "eval_strategy: 'daily' is not one of no, steps, epoch")) << run.output;
  run = run_remat("train --task fashion-mnist --eval-strtegy epoch");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "unknown flag --eval-strtegy")) << run.output;
}

// The version and the GEMM in use (Note [GEMM library]), for bug reports
// and for tests/package, which hold other programs to this line.
TEST(Cli, VersionNamesTheGemmInUse) {
  const Outcome run = run_remat("--version");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(run.out.starts_with("remat ")) << run.output;
  // float32's library: BLIS or oneDNN, by the CPU (kernels/cpu/gemm_library.h).
  EXPECT_TRUE(contains(run.out, "\ngemm: BLIS ") || contains(run.out, "\ngemm: oneDNN ")) << run.output;
  EXPECT_TRUE(contains(run.out, "by CPUID")) << run.output;
}

TEST(Cli, ExplainPrintsOneRowPerNode) {
  const Outcome run = run_remat("explain --workload W1 --format csv");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // W1: 16 linear, 15 relu, 1 cross-entropy: 32 nodes, after a header line.
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1 + 32) << run.output;
  // flops, then replay_flops: a linear layer's replay is its forward.
  EXPECT_TRUE(contains(run.output, "0,layers.0/linear,linear,,\"(256, 1024)\",1048576,536870912,536870912,")) << run.output;
  EXPECT_TRUE(contains(run.output, "31,/cross_entropy,cross_entropy,")) << run.output;
}

// --solver-time-limit reaches milp's solver (its plan says the limit), and a
// limit that is not a positive number of seconds is refused before any run.
TEST(Cli, TheSolversTimeLimitIsCheckedAndReachesMilp) {
  const std::string explain = "explain --model mlp --dims 64,256,256,256,256,10 --batch-size 256 --policy milp --budget 90%";
  const Outcome zero = run_remat(explain + " --solver-time-limit 0");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_TRUE(contains(zero.output, "--solver-time-limit")) << zero.output;
  const Outcome run = run_remat(explain + " --solver-time-limit 7.5");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "(limit 7.5 s)")) << run.output;
}

TEST(Cli, BadNumberIsNamed) {
  const Outcome run = run_remat("bench --workload W1 --threads zero");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "zero")) << run.output;
}

TEST(Cli, BenchPrintsTheWorkloadFieldsAsJson) {
  const Outcome run = run_remat("bench --workload W1 --policy none --threads 1 --steps 1 --warmup 0 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* field : {"\"workload\":\"W1\"", "\"step_ms_median\"", "\"saved_bytes_after_forward\"",
                            "\"peak_activation_bytes\"", "\"predicted_peak_activation_bytes\"", "\"peak_total_bytes\"",
                            "\"recompute_ms\"", "\"recompute_flops\"", "\"loss_first\"", "\"loss_last\""}) {
    EXPECT_TRUE(contains(run.output, field)) << field << " missing in " << run.output;
  }
}

// The "weights_digest" field of a bench --json run (the weights after its
// steps), or "" when there is none.
std::string weights_digest(const Outcome& run) {
  const std::string key = "\"weights_digest\":\"";
  const size_t at = run.out.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return run.out.substr(begin, run.out.find('"', begin) - begin);
}

// W2's weights after one step at 1 and 2 threads, which differed while
// layer_norm's backward summed dweight and dbias per thread (Note [Row
// blocks fixed by the shape]). Every library and W1 too: CliSlow below.
TEST(Cli, W2sWeightsDoNotDependOnTheThreadCount) {
  std::string first;
  for (const int threads : {1, 2}) {
    const Outcome run =
        run_remat("bench --workload W2 --steps 1 --warmup 0 --json --threads " + std::to_string(threads));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::string digest = weights_digest(run);
    ASSERT_FALSE(digest.empty()) << run.output;
    if (threads == 1) first = digest;
    EXPECT_EQ(digest, first) << threads << " threads against 1";
  }
}

// REMAT_GEMM set for a scope (the float32 GEMM library of the runs in it),
// then as it was.
class GemmLibraryEnv {
 public:
  explicit GemmLibraryEnv(const char* library) {
    if (const char* before = std::getenv("REMAT_GEMM")) before_ = before;
    ::setenv("REMAT_GEMM", library, 1);
  }
  ~GemmLibraryEnv() {
    if (before_.empty()) ::unsetenv("REMAT_GEMM");
    else ::setenv("REMAT_GEMM", before_.c_str(), 1);
  }
  GemmLibraryEnv(const GemmLibraryEnv&) = delete;
  GemmLibraryEnv& operator=(const GemmLibraryEnv&) = delete;

 private:
  std::string before_;
};

// W1's and W2's weights after two steps (the optimizer's state read once)
// at 1, 2 and 3 threads, on each float32 GEMM library.
TEST(CliSlow, WeightsDoNotDependOnTheThreadCountOnEitherGemmLibrary) {
  for (const char* library : {"blis", "onednn"}) {
    const GemmLibraryEnv gemm(library);
    for (const char* workload : {"W1", "W2"}) {
      std::string first;
      for (const int threads : {1, 2, 3}) {
        const Outcome run = run_remat(std::string("bench --workload ") + workload +
                                      " --steps 2 --warmup 0 --json --threads " + std::to_string(threads));
        ASSERT_EQ(run.exit_code, 0) << run.output;
        const std::string digest = weights_digest(run);
        ASSERT_FALSE(digest.empty()) << run.output;
        if (threads == 1) first = digest;
        EXPECT_EQ(digest, first) << workload << " on " << library << ", " << threads << " threads against 1";
      }
    }
  }
}

// A tiny kjv-gpt run on a file of this test, so that a flag accepted by
// mistake costs a second, not the default run.
std::string tiny_kjv(const std::string& flags) {
  const std::string text = "/tmp/remat_cli_test_text.txt";
  std::ofstream out(text);
  for (int i = 0; i < 100; ++i) out << "abcd efg\n";
  return "train --task kjv-gpt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --max-steps 1 "
         "--eval-batches 1 --prompt a --threads 1 --text " + text + " " + flags;
}

// train --model llama is task kjv-llama, sized by the kjv flags and its own;
// a Llama's flag on kjv-gpt, or the task named against the model, is an error.
TEST(Cli, TrainTakesALlama) {
  std::string llama = tiny_kjv("--n-kv-head 1 --intermediate-size 24");
  llama.replace(llama.find("--task kjv-gpt"), 14, "--model llama");
  Outcome run = run_remat(llama);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.out, "task kjv-llama: Llama 1 layers x 16 channels, 2 heads, 1 kv heads, MLP 24, "
                                "context 16, tied head")) << run.out;
  run = run_remat(tiny_kjv("--n-kv-head 1"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "train: --n-kv-head is a flag of --task kjv-llama, not of --task kjv-gpt"))
      << run.output;
  run = run_remat(tiny_kjv("--model llama"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "train: --model llama trains task kjv-llama, not --task kjv-gpt")) << run.output;
}

// CLI11 said "A subcommand is required" for `remat foo` and for `remat`.
TEST(Cli, AnUnknownOrMissingCommandListsTheCommands) {
  Outcome run = run_remat("foo");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "unknown command 'foo'; commands: train, bench, explain, tradeoff")) << run.output;
  run = run_remat("");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "no command given; commands: train, bench, explain, tradeoff")) << run.output;
  run = run_remat("--help");
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

// "Value 0 not in range 0.000000 to 1797693..." said neither what was wrong
// nor the bound that matters.
// --model llama: its sizes by the shared flags and its own, W4's defaults
// where none is given, and errors that name the flag and the values.
TEST(Cli, ALlamaIsSizedByItsFlags) {
  Outcome run = run_remat("bench --model llama --n-layer 1 --n-embd 16 --n-head 2 --n-kv-head 1 --intermediate-size 32 "
                          "--block-size 8 --vocab-size 11 --head tied --rope-theta 500000 --rms-norm-eps 1e-6 "
                          "--batch-size 2 --steps 1 --warmup 0 --threads 1 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.out, "\"workload\":\"llama 1x16 h2 kv1 ff32 T8 V11 theta 500000 tied B2\"")) << run.out;
  run = run_remat("explain --model llama --device meta --format json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.out, "model.layers.5.mlp.down_proj/swiglu_linear")) << "W4's 6 layers by default";
  const std::pair<std::string, std::string> errors[] = {
      {"bench --model llama --n-head 6 --n-kv-head 4", "bench: --n-kv-head 4 must divide --n-head 6"},
      {"bench --model llama --n-embd 384 --n-head 5", "bench: --n-embd 384 must be a multiple of --n-head 5"},
      {"bench --model llama --n-embd 18 --n-head 6 --n-kv-head 1", "--n-embd / --n-head = 18 / 6 = 3 must be even"},
      {"explain --model llama --n-kv-head 0", "must be at least 1, got 6, 6, 0, 384"},
      {"bench --model llama --rope-theta 0", "--rope-theta must be finite and above 0, got 0"},
      {"bench --model llama --rms-norm-eps -1", "--rms-norm-eps must be finite and above 0, got -1"},
      {"bench --model gpt --n-kv-head 2", "bench: --n-kv-head is a flag of --model llama, not of --model gpt"},
      {"bench --model llama --dropout 0.1", "bench: --dropout is a flag of --model gpt, not of --model llama"},
      {"tradeoff --model mlp --n-head 2 --out /tmp/x", "--n-head is a flag of --model gpt or llama, not of --model "
       "mlp"},
      {"explain --model llama --attention explicit", "explain: --attention is a GPT's"},
      {"explain --workload W4 --attention explicit", "W4 is a Llama, which runs the fused attention only"},
      {"bench --workload W5", "bench: W5 (Llama at 1B shape) is a GPU workload"},
      {"bench --workload W6", "available: W1, W2, W3, W4, W5, or --model gpt|llama|mlp"},
  };
  for (const auto& [command, message] : errors) {
    run = run_remat(command);
    EXPECT_EQ(run.exit_code, 1) << command;
    EXPECT_TRUE(contains(run.output, message)) << command << ": " << run.output;
  }
}

// W4 under a couple of policies, one short step each, from the command
// line. Slow: 14 s in the Release build, 42 s under the sanitizers, whose
// unit tests run W4 itself and the policies on a small Llama
// (tests/workloads/llama_workload_test.cpp).
TEST(CliSlow, W4RunsUnderPolicies) {
  for (const char* policy : {"blocks", "chain --budget 50%"}) {
    const Outcome run = run_remat(std::string("bench --workload W4 --threads 1 --steps 1 --warmup 0 --json --policy ") +
                                  policy);
    ASSERT_EQ(run.exit_code, 0) << policy << ": " << run.output;
    EXPECT_TRUE(contains(run.out, "\"workload\":\"W4\"")) << run.out;
    EXPECT_TRUE(contains(run.out, "\"parameters\":9492096")) << run.out;
    EXPECT_FALSE(contains(run.out, "\"dropped_bytes\":0,")) << policy << " drops something: " << run.out;
  }
}

TEST(Cli, ARangeErrorNamesTheFlagTheBoundAndTheValue) {
  Outcome run = run_remat(tiny_kjv("--gradient-accumulation-steps 0"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--gradient-accumulation-steps must be at least 1, got 0")) << run.output;
  EXPECT_FALSE(contains(run.output, "1797693")) << run.output;
  EXPECT_FALSE(contains(run.output, "step ")) << "the header came before the error: " << run.output;
  run = run_remat("train --task fashion-mnist --local-sgd-steps -1 --data-dir /nonexistent");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--local-sgd-steps must be >= 0, got -1")) << run.output;
  run = run_remat(tiny_kjv("--lr 0"));
  EXPECT_TRUE(contains(run.output, "--lr must be > 0, got 0")) << run.output;
}

// 100000 threads segfaulted inside libgomp; 40000 failed to create them.
TEST(Cli, TheThreadCountIsBounded) {
  for (const char* command : {"bench --workload W1 --steps 1 --warmup 0", "explain --workload W1",
                              "train --task kjv-gpt", "train --task fashion-mnist --data-dir /nonexistent"}) {
    const Outcome run = run_remat(std::string(command) + " --threads 100000");
    EXPECT_EQ(run.exit_code, 1) << command;
    EXPECT_TRUE(contains(run.output, "--threads must be between 1 and")) << command << ": " << run.output;
  }
}

TEST(Cli, NegativeAndOutOfRangeNumbersAreRejected) {
  const std::pair<std::string, std::string> cases[] = {
      {tiny_kjv("--time-limit -1"), "--time-limit must be 0 (none) or more seconds, got -1"},
      {tiny_kjv("--sample-chars -5"), "--sample-chars must be >= 0, got -5"},
      {tiny_kjv("--seed -1"), "--seed must be an integer from 0 to 18446744073709551615, got '-1'"},
      {tiny_kjv("--seed 18446744073709551616"), "got '18446744073709551616'"},
      {tiny_kjv("--checkpointing-budget 1MiB"), "--checkpointing-budget needs --checkpointing with a policy that takes one, cost, chain"},
      {tiny_kjv("--temperature 0"), "--temperature must be > 0"},
      {"train --task fashion-mnist --max-batches -1 --data-dir /nonexistent", "--max-batches must be >= 0"},
      {"bench --workload W1 --steps 1 --warmup 0 --seed -1", "bench --seed must be an integer"},
  };
  for (const auto& [args, expected] : cases) {
    const Outcome run = run_remat(args);
    EXPECT_EQ(run.exit_code, 1) << args << ": " << run.output;
    EXPECT_TRUE(contains(run.output, expected)) << args << ": " << run.output;
  }
}

// Note [One value per setting]: two spellings of one setting with two
// values (a task's flag and a trainer flag, or two trainer flags) are an
// error naming both; they trained at one value under a header showing the
// other. The same value twice runs, and the header shows the value the
// run trains with, a trainer flag's where it alone gave it.
TEST(Cli, TwoSpellingsOfOneSettingMustAgree) {
  const std::string mnist = "train --task fashion-mnist --data-dir /nonexistent ";
  std::string batch = tiny_kjv("--per-device-train-batch-size 8");
  const std::pair<std::string, std::string> cases[] = {
      {tiny_kjv("--lr 3e-3 --learning-rate 1e-3"), "--lr 0.003 and --learning-rate 1e-3 give training argument "
                                                   "learning_rate two values (0.003 and 0.001)"},
      {tiny_kjv("--max_steps 6"), "--max-steps 1 and --max_steps 6 give training argument max_steps"},
      {batch, "--batch-size 4 and --per-device-train-batch-size 8 give training argument per_device_train_batch_size"},
      {tiny_kjv("--weight-decay 0.1 --weight_decay 0.2"), "--weight-decay 0.1 and --weight_decay 0.2"},
      {tiny_kjv("--eval-interval 2 --eval-steps 3"), "--eval-interval 2 and --eval-steps 3"},
      {tiny_kjv("--time-limit 5 --max-time 9"), "--time-limit 5.0 and --max-time 9"},
      {tiny_kjv("--learning_rate 1 --learning-rate 2"), "--learning_rate 1 and --learning-rate 2"},
      {mnist + "--max-steps 4 --max_steps 6", "--max-steps 4 and --max_steps 6 give training argument max_steps"},
      {mnist + "--batch-size 4 --per-device-train-batch-size 8", "--batch-size 4 and --per-device-train-batch-size 8"},
      {mnist + "--epochs 2 --num-train-epochs 3", "--epochs 2.0 and --num-train-epochs 3"},
      {mnist + "--lr 1e-3 --learning_rate 2e-3", "--lr 0.001 and --learning_rate 2e-3"},
  };
  for (const auto& [args, expected] : cases) {
    const Outcome run = run_remat(args);
    EXPECT_EQ(run.exit_code, 1) << args << ": " << run.output;
    EXPECT_TRUE(contains(run.output, expected)) << args << ": " << run.output;
  }
  Outcome run = run_remat(tiny_kjv("--lr 0.002 --learning-rate 2e-3"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.out, "batch 4 per rank, AdamW lr 0.002, 1 steps")) << run.out;
  batch.replace(batch.find("--batch-size 4"), 14, "");  // batch and steps by trainer flags alone
  batch.replace(batch.find("--max-steps 1"), 13, "");
  run = run_remat(batch + " --learning-rate 2e-3 --max_steps 2");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.out, "batch 8 per rank, AdamW lr 0.002, 2 steps")) << run.out;
  run = run_remat(batch + " --max_steps 2 --json");
  EXPECT_TRUE(contains(run.out, "{\"step\": 2, ")) << run.out;  // trained 2 steps
}

// Nothing accepted silently: an empty policy name, a dtr budget below what
// one node needs at once, a batch larger than the training set (it was
// capped, and its throughput counted rows that never ran).
TEST(Cli, AnEmptyPolicyATooSmallDtrBudgetAndATooLargeBatchAreErrors) {
  std::string huge = tiny_kjv("");
  huge.replace(huge.find("--batch-size 4"), 14, "--batch-size 99999999999");
  const std::pair<std::string, std::string> cases[] = {
      {tiny_kjv("--checkpointing ''"), "--checkpointing '' names no policy; give one of"},
      {tiny_kjv("--checkpointing dtr --checkpointing-budget 1B"), "policy dtr's budget of 1 bytes (0.00 MiB) cannot "
                                                                   "hold this step"},
      {huge, "per_device_train_batch_size (--batch-size) 99999999999 is more than the "},
  };
  for (const auto& [args, expected] : cases) {
    const Outcome run = run_remat(args);
    EXPECT_EQ(run.exit_code, 1) << args << ": " << run.output;
    EXPECT_TRUE(contains(run.output, expected)) << args << ": " << run.output;
  }
  if (std::ifstream("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    const Outcome run = run_remat("train --task fashion-mnist --batch-size 1000000 --epochs 1 --threads 1");
    EXPECT_EQ(run.exit_code, 1) << run.output;
    EXPECT_TRUE(contains(run.output, "1000000 is more than the 60000 rows of the training set")) << run.output;
  }
}

// The second run into one --output-dir, and an --output-dir that is a file.
TEST(Cli, AnOutputFolderWithCheckpointsOrThatIsAFileIsRefused) {
  const std::string dir = "/tmp/remat_cli_test_output";
  std::filesystem::remove_all(dir);
  Outcome run = run_remat(tiny_kjv("--output-dir " + dir));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint-1/checkpoint.safetensors")) << run.output;
  run = run_remat(tiny_kjv("--output-dir " + dir));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "already holds checkpoints; give resume_from_checkpoint")) << run.output;
  run = run_remat(tiny_kjv("--output-dir " + dir + " --overwrite-output-dir"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::string resume = tiny_kjv("--output-dir " + dir + " --resume-from-checkpoint latest");
  resume.replace(resume.find("--max-steps 1"), 13, "--max-steps 2");
  run = run_remat(resume);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "(resumed at step 1)")) << run.output;
  run = run_remat(tiny_kjv("--output-dir /tmp/remat_cli_test_text.txt"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "output_dir '/tmp/remat_cli_test_text.txt' cannot be made")) << run.output;
  std::filesystem::remove_all(dir);
}

// The main job as the README runs it: 3 epochs reach 85% test accuracy.
TEST(CliSlow, FashionMnistReaches85PercentIn3Epochs) {
  if (!std::ifstream("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const Outcome run = run_remat("train --task fashion-mnist --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  double accuracy = -1;
  int epochs = 0;
  std::istringstream lines(run.out);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("\"test_accuracy\": ");
    if (at == std::string::npos) continue;
    accuracy = std::stod(line.substr(at + 17));
    ++epochs;
  }
  EXPECT_EQ(epochs, 3) << run.output;
  EXPECT_GE(accuracy, 0.85) << run.output;
}


// ---- Files written whole or not at all (issue 43, item 1) ----

// REMAT_FAULT_WRITE (engine/file_write.h) for the runs of one scope.
struct FaultWrites {
  explicit FaultWrites(const std::string& spec) { ::setenv("REMAT_FAULT_WRITE", spec.c_str(), 1); }
  ~FaultWrites() { ::unsetenv("REMAT_FAULT_WRITE"); }
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A profile saved again on a full disk truncated the good one in place
// (36,864 bytes of JSON cut short where 35,905 stood); now the run fails
// naming the file and ENOSPC, and the first profile stands byte for byte.
TEST(Cli, AProfileSaveThatFailsLeavesTheOldProfile) {
  const std::string dir = "/tmp/remat_cli_test_profile_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string good = dir + "/good.json";
  std::string command = tiny_kjv("--checkpointing cost --save-checkpointing-profile " + good);
  command.replace(command.find("--max-steps 1"), 13, "--max-steps 2");  // one step only profiles
  Outcome run = run_remat(command);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string first = file_bytes(good);
  ASSERT_GT(first.size(), 1000u);
  {
    const FaultWrites fault("ENOSPC:good.json:" + std::to_string(first.size() / 2));  // half written, then full
    run = run_remat(command);
  }
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "--save-checkpointing-profile '" + good + "'")) << run.output;
  EXPECT_TRUE(contains(run.output, "No space left on device (ENOSPC)")) << run.output;
  EXPECT_TRUE(file_bytes(good) == first) << "the profile was changed: " << file_bytes(good).size() << " bytes";
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1)
      << "a temporary file was left behind";
  std::filesystem::remove_all(dir);
}

}  // namespace
