// Replays the fuzzers' seed corpus and every crash they found (tests/fuzz/regressions/<harness>/)
// through the plain build's parsers: each input must end in a tandem::Error or a result, never in
// another exception or (under the ASan stage) a memory error, and without a hang (the ctest TIMEOUT)
// or an allocation a file's header asks for but its data does not back (peak RSS below 1 GiB).
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_inputs.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs(const std::string& harness) {
  std::vector<fs::path> out;
  for (const char* kind : {"corpus", "regressions"}) {
    fs::path dir = fs::path(TANDEM_FUZZ_DIR) / kind / harness;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  }
  return out;
}

class FuzzCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzCorpus, EveryInputEndsInAResultOrATypedError) {
  auto entry = tandem::fuzz::entry_for(GetParam());
  ASSERT_NE(entry, nullptr);
  auto files = inputs(GetParam());
  ASSERT_FALSE(files.empty()) << "no seed corpus for " << GetParam();
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(f.string());
    EXPECT_NO_THROW(entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss / 1024, 1024) << "peak RSS in MiB after the " << GetParam() << " inputs";
}

INSTANTIATE_TEST_SUITE_P(Harnesses, FuzzCorpus,
                         ::testing::Values("idx", "safetensors", "state_json", "run_config", "serve_request",
                                           "bpe_tokenizer", "bpe_tokenizer_json", "hf_gpt2", "onnx", "arrays"));

}  // namespace
