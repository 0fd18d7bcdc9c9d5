// tandem-train as a user runs it: a bad flag gives one line, a pointer to --help and exit code 2, a
// missing dataset a message naming the file and exit code 1, and a tiny run on the real data (when
// installed) a metrics file ending with the done record.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/data/default_dirs.h"
#include "runtime/data/dataset.h"
#include "tests/data/temp_dir.h"

using tandem::testing::TempDir;

namespace {

struct ProcessResult {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tandem-train with `args`, under the environment assignments `env` ("NAME=value ..." or empty).
ProcessResult run_train(const std::string& args, const TempDir& dir, const std::string& env = "") {
  std::string out = dir.file("stdout"), err = dir.file("stderr");
  std::string cmd = env + " " + std::string(TANDEM_TRAIN_EXE) + " " + args + " >" + out + " 2>" + err;
  int status = std::system(cmd.c_str());
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  return records;
}

bool have_fashion_mnist() {
  return std::filesystem::exists(std::string(tandem::data::kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
}

}  // namespace

// A bad flag is its error on one line and a pointer to --help on the next, not a page of usage.
TEST(TandemTrain, BadFlagsGiveOneLineAndExitCode2) {
  TempDir dir;
  for (const char* args : {"--bogus", "--model resnet", "--epochs 0", "--optimizer rmsprop", "--lr abc",
                           "--batch-size 0"}) {
    ProcessResult r = run_train(args, dir);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err.find("Usage:"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("tandem-train: ", 0), 0u) << args << ": " << r.err;
    EXPECT_NE(r.err.find("\nRun with --help for more information.\n"), std::string::npos) << args << ": " << r.err;
  }
  ProcessResult r = run_train("--max-step 5", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did you mean --max-steps?"), std::string::npos) << r.err;
  r = run_train("--bach-size=5", dir);
  EXPECT_NE(r.err.find("did you mean --batch-size?"), std::string::npos) << r.err;
  r = run_train("--bogus", dir);
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;  // nothing close: no guess
  ProcessResult help = run_train("--help", dir);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--batch-size"), std::string::npos);
}

TEST(TandemTrain, MissingDatasetNamesTheFile) {
  TempDir dir;
  ProcessResult r = run_train("--data-dir " + dir.file("nowhere") + " --threads 1", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(dir.file("nowhere") + "/train-images-idx3-ubyte.gz"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(".cpp:"), std::string::npos) << "a source location in a user's message: " << r.err;
  r = run_train("--data-dir " + dir.file("nowhere") + " --threads 1 --log-level debug", dir);
  EXPECT_NE(r.err.find("(thrown at runtime/data/idx.cpp:"), std::string::npos) << r.err;  // for us, when asked
}

TEST(TandemTrain, TinyRunWritesMetricsWithDoneRecord) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  std::string metrics = dir.file("metrics.jsonl");
  ProcessResult r = run_train("--model mlp --max-steps 30 --threads 1 --metrics " + metrics, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  auto records = read_jsonl(metrics);
  ASSERT_EQ(records.size(), 2u);  // one (partial) epoch, then done
  EXPECT_EQ(records[0]["event"], "epoch");
  EXPECT_EQ(records[0]["steps"], 30);
  EXPECT_EQ(records[0]["samples"], 30 * 128);
  const auto& done = records.back();
  EXPECT_EQ(done["event"], "done");
  EXPECT_EQ(done["model"], "mlp");
  EXPECT_EQ(done["world_size"], 1);
  EXPECT_EQ(done["epochs"], 1);
  EXPECT_EQ(done["steps"], 30);
  // 30 steps of SGD already beat chance (0.1) by far.
  EXPECT_GT(done["test_acc"].get<double>(), 0.5);
  EXPECT_LE(done["test_acc"].get<double>(), 1.0);
  EXPECT_GT(done["train_samples_per_s"].get<double>(), 0.0);
  EXPECT_GT(done["peak_rss_mb"].get<double>(), 10.0);
  // On the CPU the mlp's budget is 150 MB for a whole epoch (the data, the model, the allocator's
  // cache); a library load that costs ~140 MB up front (libcublasLt, linked in once) shows here
  // already. (On a GPU machine --device auto picks cuda, whose context alone takes more; under
  // AddressSanitizer its shadow memory and quarantine take more still, so the budget is not checked.)
#if !defined(__SANITIZE_ADDRESS__)
  const bool check_rss = done["device"].get<std::string>().rfind("cpu", 0) == 0;
#else
  const bool check_rss = false;
#endif
  if (check_rss) {
    EXPECT_LT(done["peak_rss_mb"].get<double>(), 150.0);
  }
}

// TANDEM_* settings in the run: a typo warned about with a suggestion, the settings not at their
// defaults in the debug log and in the done record's "env", a bad value the run's error.
TEST(TandemTrain, DoneRecordListsTheNonDefaultSettings) {
  TempDir dir;
  ProcessResult bad = run_train("--threads 1", dir, "TANDEM_COMM_SHM=maybe");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("TANDEM_COMM_SHM=maybe: expected on or off"), std::string::npos) << bad.err;
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string metrics = dir.file("metrics.jsonl");
  ProcessResult r = run_train("--model mlp --max-steps 2 --no-eval --threads 1 --log-level debug --metrics " + metrics,
                              dir, "TANDEM_COLUMN_SUMS=two-pass TANDEM_COMM_SHM=1 TANDEM_COMM_SHMM=0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("TANDEM_COMM_SHMM is not a variable tandem reads (did you mean TANDEM_COMM_SHM?)"),
            std::string::npos) << r.err;
  // TANDEM_COMM_SHM=1 is its default (on): not listed.
  const size_t line = r.out.find("environment: ");
  ASSERT_NE(line, std::string::npos) << r.out;
  const std::string listed = r.out.substr(line, r.out.find('\n', line) - line);
  EXPECT_NE(listed.find("TANDEM_COLUMN_SUMS=two-pass"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("TANDEM_COMM_SHM"), std::string::npos) << listed;
  auto records = read_jsonl(metrics);
  ASSERT_FALSE(records.empty());
  const auto& done = records.back();
  EXPECT_EQ(done["event"], "done");
  EXPECT_EQ(done["env"].value("TANDEM_COLUMN_SUMS", ""), "two-pass") << done.dump();
  EXPECT_FALSE(done["env"].contains("TANDEM_COMM_SHM")) << done.dump();
}

TEST(TandemTrain, NoEvalLeavesTestAccNull) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  std::string metrics = dir.file("metrics.jsonl");
  ProcessResult r = run_train("--model cnn --batch-size 16 --max-steps 3 --no-eval --threads 1 --metrics " + metrics, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto records = read_jsonl(metrics);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back()["event"], "done");
  EXPECT_EQ(records.back()["model"], "cnn");
  EXPECT_EQ(records.back()["steps"], 3);
  EXPECT_TRUE(records.back()["test_acc"].is_null());
  EXPECT_FALSE(records.front().contains("test_acc"));
}

// --config: the file sets the run (here adam, a step schedule, accumulation), a flag given on the
// command line wins over it.
TEST(TandemTrain, ConfigFileSetsTheRunAndFlagsOverrideIt) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDir dir;
  const std::string config = dir.file("run.yaml"), metrics = dir.file("metrics.jsonl");
  std::ofstream(config) << "model:\n  type: mlp\n  parameters:\n    layer_sizes: [784, 512, 512, 10]\n"
                           "loss: {type: cross_entropy}\n"
                           "optimizer:\n  type: adam\n  parameters: {learning_rate: 0.002}\n"
                           "lr_scheduler: {type: step, parameters: {step_size: 2, gamma: 0.5}}\n"
                           "training: {accumulation_steps: 2}\n";
  ProcessResult r = run_train("--config " + config + " --max-steps 5 --no-eval --threads 1 --metrics " + metrics, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("optimizer adam (lr 0.002,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x 2 accumulation"), std::string::npos) << r.out;
  auto records = read_jsonl(metrics);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["steps"], 5);
  EXPECT_NEAR(records[0]["lr"].get<double>(), 0.002 * 0.25, 1e-12);  // StepLR after 5 steps: gamma^(5/2)
  EXPECT_EQ(records.back()["accumulation_steps"], 2);

  r = run_train("--config " + config + " --lr 0.01 --accumulation-steps 1 --max-steps 1 --no-eval --threads 1", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("optimizer adam (lr 0.01,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x 1 accumulation"), std::string::npos) << r.out;
}

// A bad file stops the run before any data is read: exit code 1 and "<file>:<line>: <key>: ..." on stderr.
TEST(TandemTrain, BadConfigFileNamesFileLineAndKey) {
  TempDir dir;
  const std::string typo = dir.file("typo.yaml");
  std::ofstream(typo) << "model:\n  type: cnn\noptimizer:\n  type: sgd\n  parameters:\n    learning_rat: 0.1\n";
  ProcessResult r = run_train("--config " + typo + " --max-steps 5 --no-eval", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(typo + ":6: optimizer.parameters.learning_rat: unknown key"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'learning_rate'?"), std::string::npos) << r.err;

  const std::string other = dir.file("other.yaml");
  std::ofstream(other) << "model:\n  type: mlp\n  parameters: {layer_sizes: [2, 4, 1]}\n";
  r = run_train("--config " + other + " --max-steps 5 --no-eval", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(other + ":1: model: tandem-train trains only its Fashion-MNIST models"), std::string::npos)
      << r.err;

  const std::string loss = dir.file("loss.yaml");
  std::ofstream(loss) << "model: {type: cnn}\nloss:\n  type: mse\n";
  r = run_train("--config " + loss + " --max-steps 5 --no-eval", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(loss + ":3: loss.type: tandem-train trains its classifiers with cross_entropy"),
            std::string::npos) << r.err;

  // --model and the file's model are one setting: two different values are an error, not a silent pick.
  const std::string mlp = dir.file("mlp.yaml");
  std::ofstream(mlp) << "model:\n  type: mlp\n  parameters: {layer_sizes: [784, 512, 512, 10]}\n";
  r = run_train("--model cnn --config " + mlp + " --max-steps 5 --no-eval", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(mlp + ":2: model.type: the file's model is mlp and --model says cnn"), std::string::npos)
      << r.err;

  r = run_train("--config " + dir.file("missing.yaml"), dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(dir.file("missing.yaml") + ": cannot open the config file"), std::string::npos) << r.err;
}
