// The fuzzed entry points: untrusted bytes into the IDX, safetensors, state.json and run-config parsers
// and the GPT-2 BPE tokenizer (both forms of its files) and weights.
#include "fuzz/fuzz_inputs.h"

#include <sys/mman.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "nn/config/run_config.h"
#include "nn/gpt_hf.h"
#include "nn/onnx/onnx_model.h"
#include "runtime/data/array_file_readers.h"
#include "runtime/data/bpe_tokenizer.h"
#include "runtime/data/gpt2_pretokenize.h"
#include "runtime/data/idx.h"
#include "runtime/error.h"
#include "runtime/host_cache.h"
#include "runtime/memory_budget.h"
#include "runtime/serialization/safetensors.h"
#include "runtime/serialization/training_checkpoint.h"

namespace tandem::fuzz {

namespace {
// A model's own numbers size its intermediate tensors (a broadcast of [16384, 1] and [1, 16384], a
// ConstantOfShape): under a budget they fail with OutOfMemoryError as on a full GPU instead of
// tripping libFuzzer's memory limit. The host cache would keep up to 1 GiB of freed blocks, which
// that limit counts too: off.
[[maybe_unused]] const bool memory_bounded = [] {
  memory::set_limit(DeviceKind::CPU, size_t{256} << 20);
  memory::set_host_cache_limit(0);
  return true;
}();

// The readers take paths: each input goes into an in-memory file (one per slot, the tokenizer
// reads two), reopened through /proc each time.
std::string memory_file(int slot, const uint8_t* data, size_t size) {
  static int fds[2] = {::memfd_create("tandem-fuzz-0", 0), ::memfd_create("tandem-fuzz-1", 0)};
  const int fd = fds[slot];
  if (fd < 0 || ::ftruncate(fd, 0) != 0) TANDEM_FAIL(Internal, "memfd_create/ftruncate failed");
  size_t done = 0;
  while (done < size) {
    ssize_t w = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (w <= 0) TANDEM_FAIL(Internal, "pwrite to the memory file failed");
    done += static_cast<size_t>(w);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

// The next part of `rest` up to a NUL byte (all of it without one), removed from `rest`.
std::string_view next_part(std::string_view& rest) {
  const size_t end = rest.find('\0');
  const std::string_view part = rest.substr(0, end);
  rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
  return part;
}
}  // namespace

void parse_idx_input(const uint8_t* data, size_t size) {
  uint32_t magic = size >= 4 && data[3] == 1 ? data::kIdxLabelsMagic : data::kIdxImagesMagic;
  try {
    data::read_idx(memory_file(0, data, size), magic);
  } catch (const Error&) {
  }
}

void parse_safetensors_input(const uint8_t* data, size_t size) {
  try {
    serialization::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "<fuzz>");
  } catch (const Error&) {
  }
}

void parse_state_json_input(const uint8_t* data, size_t size) {
  try {
    serialization::parse_state_json(std::string(reinterpret_cast<const char*>(data), size), "<fuzz>/state.json");
  } catch (const Error&) {
  }
}

void parse_run_config_input(const uint8_t* data, size_t size) {
  try {
    nn::config::parse_run_config(std::string(reinterpret_cast<const char*>(data), size), "<fuzz>.yaml");
  } catch (const Error&) {
  }
}

void parse_onnx_input(const uint8_t* data, size_t size) {
  try {
    auto model = nn::onnx::OnnxModel::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "<fuzz>.onnx");
    std::vector<Tensor> inputs;
    for (const auto& spec : model->inputs()) {
      Shape shape;
      int64_t n = 1;
      for (int64_t d : spec.dims) {
        if (d > (1 << 16)) return;
        shape.push_back(d < 0 ? 2 : d);
        n *= shape.back();
        if (n > (1 << 16)) return;  // a big input: the point is the graph, not the arithmetic
      }
      inputs.push_back(Tensor::zeros(shape, spec.dtype));
    }
    model->forward_many(inputs);
  } catch (const Error&) {
  }
}

// Any bytes split into pieces that cover them in order, whatever the tokenizer's files say.
void check_pretokenize(std::string_view text) {
  size_t covered = 0;
  for (const data::TextPiece& p : data::gpt2_pretokenize(text)) {
    if (p.begin != covered || p.size == 0) throw std::logic_error("pre-tokenisation: a gap, overlap or empty piece");
    covered += p.size;
  }
  if (covered != text.size()) throw std::logic_error("pre-tokenisation: the pieces do not cover the text");
}

// A tokenizer that took its files encodes `text` to tokens that decode to it, the same twice.
void check_round_trip(data::BpeTokenizer& bpe, std::string_view text) {
  const std::vector<int32_t> ids = bpe.encode(text);
  for (int32_t id : ids)
    if (!bpe.has_token(id)) throw std::logic_error("encode gave an id that is not a token");
  if (bpe.decode(ids) != text) throw std::logic_error("decode(encode(text)) is not the text");
  if (bpe.encode(text) != ids) throw std::logic_error("a second encode (from the cache) differs");
}

void parse_bpe_tokenizer_input(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view vocab = next_part(rest), merges = next_part(rest), text = rest;
  check_pretokenize(text);
  try {
    data::BpeTokenizer bpe(memory_file(0, reinterpret_cast<const uint8_t*>(vocab.data()), vocab.size()),
                           memory_file(1, reinterpret_cast<const uint8_t*>(merges.data()), merges.size()));
    check_round_trip(bpe, text);
  } catch (const Error&) {
  }
}

void parse_bpe_tokenizer_json_input(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view file = next_part(rest), text = rest;
  try {
    data::BpeTokenizer bpe = data::BpeTokenizer::from_tokenizer_json(
        memory_file(0, reinterpret_cast<const uint8_t*>(file.data()), file.size()));
    check_round_trip(bpe, text);
  } catch (const Error&) {
  }
}

void parse_hf_gpt2_input(const uint8_t* data, size_t size) {
  try {
    const std::string path = memory_file(0, data, size);
    nn::GPT model(nn::hf_gpt2_config(path, 1));
    nn::load_hf_gpt2(model, path);
  } catch (const Error&) {
  }
}

void parse_arrays_input(const uint8_t* data, size_t size) {
  if (size < 1) return;
  try {
    const std::string path = memory_file(0, data + 1, size - 1);
    std::shared_ptr<data::ArrayFile> file = data[0] % 3 == 0   ? data::open_npy_file(path)
                                            : data[0] % 3 == 1 ? data::open_npz_file(path)
                                                               : data::open_hdf5_file(path);
    for (const data::ArrayInfo& a : file->arrays()) {
      if (!a.unsupported.empty()) continue;
      std::vector<int64_t> rows;
      for (int64_t r = 0; r < std::min<int64_t>(a.rows(), 4); ++r) rows.push_back(r);
      if (a.rows() > 4) rows.push_back(a.rows() - 1);
      file->read_rows(a.name, rows);
    }
  } catch (const Error&) {
  }
}

Entry entry_for(const std::string& harness) {
  if (harness == "arrays") return parse_arrays_input;
  if (harness == "idx") return parse_idx_input;
  if (harness == "safetensors") return parse_safetensors_input;
  if (harness == "state_json") return parse_state_json_input;
  if (harness == "run_config") return parse_run_config_input;
  if (harness == "serve_request") return parse_serve_request_input;
  if (harness == "bpe_tokenizer") return parse_bpe_tokenizer_input;
  if (harness == "bpe_tokenizer_json") return parse_bpe_tokenizer_json_input;
  if (harness == "hf_gpt2") return parse_hf_gpt2_input;
  if (harness == "onnx") return parse_onnx_input;
  return nullptr;
}

}  // namespace tandem::fuzz
