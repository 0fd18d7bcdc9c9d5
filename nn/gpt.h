// GPT (GPT-2's architecture): token + position embedding, n_layer pre-LayerNorm blocks of causal
// self-attention and a 4x GELU (tanh) MLP, a final LayerNorm and an output head tied to the token
// embedding (logits = h wte^T, one parameter). Names follow Hugging Face's GPT-2 (wte, wpe,
// h.N.ln_1, h.N.attn.c_attn, h.N.attn.c_proj, h.N.ln_2, h.N.mlp.c_fc, h.N.mlp.c_proj, ln_f), with
// Linear's [out, in] weights (HF's Conv1D stores [in, out]).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "runtime/random.h"

namespace tandem::nn {

struct SampleOptions {
  int64_t tokens = 256;      // tokens to generate
  double temperature = 1.0;  // logits divided by this before the softmax
  int64_t top_k = 0;         // keep the k largest logits (0: all)
  uint64_t seed = 0;         // Philox stream: draw i is (seed, offset i)
  int64_t vocab_limit = 0;   // draw only ids below this (0: all), e.g. not a padded vocabulary's extra rows
};

struct GPTConfig {
  int64_t vocab_size = 256;  // rows of wte (GPT-2: 50257 padded to 50304, a multiple of 64)
  int64_t context = 128;     // positions (rows of wpe)
  int64_t n_layer = 4, n_head = 4, n_embd = 256;
  // The MLP as one op (ops::mlp_gelu: GELU's backward in a GEMM's epilogue); false: linear_gelu then
  // linear, the same values (A/B runs: tandem-bench-train --no-fuse).
  bool fused_mlp = true;
  // Each residual add but the last with the LayerNorm after it as one op (ops::add_layer_norm: one
  // pass over the residual stream instead of two, both ways); false: the adds and LayerNorms apart,
  // the same values (A/B runs: tandem-bench-train --no-fuse-norm).
  bool fused_add_norm = true;

  // "tiny" (2 layers, 2 heads, width 32, context 16, vocab 256: tests), "small" (4/4/256, context 128,
  // vocab 256: tandem-train's default), "gpt2-124m" (12/12/768, context 1024, vocab 50304).
  static GPTConfig preset(const std::string& name);
  void check() const;  // ValueError for a shape that cannot work (n_head not dividing n_embd, ...)
  int64_t head_dim() const { return n_embd / n_head; }
  // Parameters: all of them, and without the position embedding (what the FLOP count uses).
  int64_t num_parameters() const;
  int64_t num_non_position_parameters() const { return num_parameters() - context * n_embd; }
  // Training FLOPs per token at sequence length t (forward + backward, the PaLM/nanoGPT estimate):
  // 6 * num_non_position_parameters() (every weight in one multiply-add forward, two backward; the
  // tied head counted once as the output projection) + 12 * n_layer * t * n_embd (attention's
  // q.k and p.v products, forward + backward, over all t keys, not halved for the causal mask).
  double flops_per_token(int64_t t) const;
};

class GPT : public Cloneable<GPT> {
 public:
  // GPT-2's initialisation from `gen`: weights N(0, 0.02) (embeddings too), the residual projections
  // (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 * n_layer)), biases 0, LayerNorms 1 and 0.
  explicit GPT(const GPTConfig& config, Generator& gen = default_generator());
  // token ids i64/i32 [B, T], T <= context, each in [0, vocab_size) -> logits f32 [B, T, vocab_size]
  Tensor forward(const Tensor& ids) override;
  // The final hidden states [B, T, n_embd] (after ln_f), before the tied head.
  Tensor hidden(const Tensor& ids);
  // The logits of the last position only, [B, vocab_size] (sampling: one row of the head, not T).
  Tensor last_logits(const Tensor& ids);
  std::string type_name() const override { return "GPT"; }
  const GPTConfig& config() const { return cfg_; }

 private:
  GPTConfig cfg_;
};

// Continues `prompt` (at least one token) by `options.tokens` tokens, feeding back the last `context`
// tokens each time; eval mode and no autograd while it runs. Returns the generated tokens only.
std::vector<int64_t> sample(GPT& model, const std::vector<int64_t>& prompt, const SampleOptions& options);

}  // namespace tandem::nn
