// The GPT-2 BPE tokenizer's speed on a text file: encode with a fresh tokenizer (every piece merged)
// and again with the pieces it has seen remembered, then decode, which must give the file back. One
// JSON line; --ids-out writes the ids, one a line, for comparing with another tokenizer
// (tests/reference/bpe_against_hf.py compares them with Hugging Face's).
//   tandem-bench-tokenizer --tokenizer DIR --text FILE [--ids-out FILE]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/data/bpe_tokenizer.h"
#include "runtime/error.h"

using namespace tandem;

namespace {

template <class F>
double seconds_of(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, text_path, ids_out;
  CLI::App app{"GPT-2 BPE tokenizer: encode and decode speed on a text"};
  app.add_option("--tokenizer", dir, "folder with vocab.json and merges.txt")->required();
  app.add_option("--text", text_path, "the text to encode")->required();
  app.add_option("--ids-out", ids_out, "write the ids here, one a line");
  CLI11_PARSE(app, argc, argv);
  try {
    std::ifstream in(text_path, std::ios::binary);
    TANDEM_CHECK_KIND(IO, in.good(), "cannot read '{}'", text_path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    data::BpeTokenizer bpe = data::BpeTokenizer::from_dir(dir);
    std::vector<int32_t> ids, again;
    std::string back;
    const double cold = seconds_of([&] { ids = bpe.encode(text); });
    const double warm = seconds_of([&] { again = bpe.encode(text); });
    const double decode = seconds_of([&] { back = bpe.decode(ids); });
    if (!ids_out.empty()) {
      std::ofstream out(ids_out);
      for (int32_t id : ids) out << id << '\n';
      TANDEM_CHECK_KIND(IO, out.good(), "cannot write '{}'", ids_out);
    }
    const double mb = static_cast<double>(text.size()) / 1e6;
    std::printf("{\"bench\":\"tokenizer\",\"bytes\":%zu,\"ids\":%zu,\"vocab\":%lld,\"merges\":%zu,"
                "\"encode_s\":%.6f,\"encode_mb_per_s\":%.3f,\"encode_cached_mb_per_s\":%.3f,"
                "\"decode_mb_per_s\":%.3f,\"roundtrip\":%s}\n",
                text.size(), ids.size(), static_cast<long long>(bpe.vocab_size()), bpe.num_merges(), cold,
                mb / cold, mb / warm, mb / decode, back == text && again == ids ? "true" : "false");
    return back == text && again == ids ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "tandem-bench-tokenizer: %s\n", e.what());
    return 2;
  }
}
