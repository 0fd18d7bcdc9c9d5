// GPT-2 weights in Hugging Face's safetensors layout (model.safetensors of GPT2Model or
// GPT2LMHeadModel) into an nn::GPT: names with or without the "transformer." prefix, Conv1D
// matrices ([in, out]) transposed to Linear's [out, in], the attn.bias/masked_bias mask buffers and
// the tied lm_head.weight skipped.
#pragma once
#include <string>

#include "nn/gpt.h"

namespace tandem::nn {

// The file's shape: n_layer (from h.N), n_embd and vocabulary (wte), positions (wpe); n_head is not
// in the weights and comes from the caller (GPT-2 124M: 12). IOError for a file without them, and
// naming the tensor for one of that shape's tensors missing or of another shape (so a model made from
// the result is never larger than the file).
GPTConfig hf_gpt2_config(const std::string& path, int64_t n_head);

// Copies every tensor of `path` into `model` (f16/bf16/f64 files converted to the model's dtype).
// wte may have fewer rows than the model's padded vocabulary (the rest is zero), wpe at least the
// model's context (the first rows are used); every other shape must match. IOError naming the
// tensor for an unknown name, a wrong shape or a parameter the file lacks.
void load_hf_gpt2(GPT& model, const std::string& path);

}  // namespace tandem::nn
