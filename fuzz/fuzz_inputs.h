// The parsers under fuzzing, one entry point each, shared by the libFuzzer harnesses (fuzz/) and
// the plain regression test that replays their corpus and every crash found (tests/fuzz/).
// Each takes untrusted bytes; a tandem::Error (caught here) is the expected answer to bad input, anything else
// (another exception, a crash, a sanitizer report, an unbounded allocation) is a bug.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem::fuzz {

// The IDX reader (plain or gzip) over `data` as a file; the magic expected is the labels' when
// byte 3 is 1, else the images'.
void parse_idx_input(const uint8_t* data, size_t size);
void parse_safetensors_input(const uint8_t* data, size_t size);
// A checkpoint's state.json sidecar.
void parse_state_json_input(const uint8_t* data, size_t size);
// A run-config YAML file (nn/config).
void parse_run_config_input(const uint8_t* data, size_t size);
// tandem-serve's request handling (fuzz_serve.cpp): "METHOD PATH\n" then a POST /jobs body. An
// HttpError 400 is the expected answer there; a broken invariant throws std::logic_error.
void parse_serve_request_input(const uint8_t* data, size_t size);
// The GPT-2 BPE tokenizer: vocab.json, NUL, merges.txt, NUL, then a text to encode. A file the
// tokenizer takes must encode the text to ids that decode to its bytes exactly (or refuse the text
// with a tandem::Error); a broken round trip throws std::logic_error.
void parse_bpe_tokenizer_input(const uint8_t* data, size_t size);
// The same from Hugging Face's tokenizer.json: the file, NUL, then a text to encode.
void parse_bpe_tokenizer_json_input(const uint8_t* data, size_t size);
// GPT-2 weights in Hugging Face's safetensors layout (--init-from): the shape read from the file, a
// GPT of that shape (one head) made and the file loaded into it.
void parse_hf_gpt2_input(const uint8_t* data, size_t size);

// An ONNX model file (nn/onnx): read, checked, imported, and run once on zeros of its declared
// input shapes (unknown dims 2) where those are small.
void parse_onnx_input(const uint8_t* data, size_t size);

// The user's array files (runtime/data/array_file.h): byte 0 chooses .npy (0), .npz (1) or HDF5
// (2), the rest is the file; every array it lists has its first rows and its last read.
void parse_arrays_input(const uint8_t* data, size_t size);

// Harness names (the corpus folders tests/fuzz/corpus/<name>/) to entry points.
using Entry = void (*)(const uint8_t*, size_t);
Entry entry_for(const std::string& harness);

}  // namespace tandem::fuzz
