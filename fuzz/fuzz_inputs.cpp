// The fuzzed entry points: untrusted bytes into the IDX, safetensors, state.json and run-config parsers.
#include "fuzz/fuzz_inputs.h"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "nn/config/run_config.h"
#include "runtime/data/idx.h"
#include "runtime/error.h"
#include "runtime/serialization/safetensors.h"
#include "runtime/serialization/training_checkpoint.h"

namespace tandem::fuzz {

namespace {
// read_idx takes a path: the input goes into one in-memory file, reopened through /proc each time.
std::string memory_file(const uint8_t* data, size_t size) {
  static int fd = ::memfd_create("tandem-fuzz-idx", 0);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) TANDEM_FAIL(Internal, "memfd_create/ftruncate failed");
  size_t done = 0;
  while (done < size) {
    ssize_t w = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (w <= 0) TANDEM_FAIL(Internal, "pwrite to the memory file failed");
    done += static_cast<size_t>(w);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}
}  // namespace

void parse_idx_input(const uint8_t* data, size_t size) {
  uint32_t magic = size >= 4 && data[3] == 1 ? data::kIdxLabelsMagic : data::kIdxImagesMagic;
  try {
    data::read_idx(memory_file(data, size), magic);
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

Entry entry_for(const std::string& harness) {
  if (harness == "idx") return parse_idx_input;
  if (harness == "safetensors") return parse_safetensors_input;
  if (harness == "state_json") return parse_state_json_input;
  if (harness == "run_config") return parse_run_config_input;
  if (harness == "serve_request") return parse_serve_request_input;
  return nullptr;
}

}  // namespace tandem::fuzz
