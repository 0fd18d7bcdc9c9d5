// safetensors (huggingface/safetensors format): an 8-byte little-endian header length N, N bytes of
// JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the tensors' little-endian bytes, contiguous, offsets relative to the end of the header.
// Python's safetensors and PyTorch read what we write; we refuse anything malformed.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace tandem::serialization {

// Same type as nn::NamedTensors (a list keeps the caller's order).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

// "F32", "F16", "BF16", "F64", "I32", "I64", "U8".
const char* safetensors_dtype_name(DType t);
// The inverse; IOError naming `context` for a dtype we do not support.
DType safetensors_dtype_from_name(const std::string& name, const std::string& context);

// The file's bytes (tensors in the given order, header padded with spaces to a multiple of 8).
// Tensors on any device are copied to the host. Names must be unique and non-empty.
std::string safetensors_bytes(const NamedTensors& tensors, const Metadata& metadata = {});
// Writes atomically (temp file, fsync, rename, directory fsync).
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

struct SafetensorsContents {
  NamedTensors tensors;  // in file order (by data offset), on the CPU
  Metadata metadata;
  const Tensor* find(const std::string& name) const;
};

// Parses and validates: length prefix, JSON, every entry's dtype/shape/offsets (in range, sized as
// dtype x shape, no overlap, no holes). `source` names the file in errors. IOError on any problem.
SafetensorsContents parse_safetensors(std::string_view bytes, const std::string& source);
SafetensorsContents load_safetensors(const std::string& path);

}  // namespace tandem::serialization
