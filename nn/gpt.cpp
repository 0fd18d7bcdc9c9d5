// GPT's blocks and forward pass.
#include "nn/gpt.h"

#include <cmath>

#include <fmt/format.h>

#include "nn/init.h"
#include "nn/layers/embedding.h"
#include "nn/layers/layer_norm.h"
#include "nn/layers/linear.h"
#include "runtime/autocast.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/norm.h"

namespace tandem::nn {

namespace {

// Module children are reached through the registry (children_), never through members, so that a
// clone (which replaces the registry's entries) runs its own copies.
template <class M>
M& child(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children, size_t i) {
  return static_cast<M&>(*children[i].second);
}

// x [B, T, C] -> c_attn -> q, k, v [B, H, T, D] -> attention -> [B, T, C] -> c_proj.
class CausalSelfAttention final : public Cloneable<CausalSelfAttention> {
 public:
  CausalSelfAttention(const GPTConfig& c, Generator& scratch) : n_head_(c.n_head) {
    register_module("c_attn", std::make_shared<Linear>(c.n_embd, 3 * c.n_embd, true, scratch));
    register_module("c_proj", std::make_shared<Linear>(c.n_embd, c.n_embd, true, scratch));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = ops::causal_self_attention(child<Linear>(children_, 0)(x), n_head_);  // [B, T, 3C] -> [B, T, C]
    return child<Linear>(children_, 1)(y);
  }
  std::string type_name() const override { return "CausalSelfAttention"; }

 private:
  int64_t n_head_;
};

class MLP final : public Cloneable<MLP> {
 public:
  MLP(const GPTConfig& c, Generator& scratch) : fused_(c.fused_mlp) {
    register_module("c_fc", std::make_shared<Linear>(c.n_embd, 4 * c.n_embd, true, scratch));
    register_module("c_proj", std::make_shared<Linear>(4 * c.n_embd, c.n_embd, true, scratch));
  }
  // c_fc, GELU (tanh form) and c_proj as one op: the GEMMs' epilogues add the biases and apply GELU,
  // and in backward GELU's derivative and c_fc's bias gradient.
  Tensor forward(const Tensor& x) override {
    Linear& fc = child<Linear>(children_, 0);
    Linear& proj = child<Linear>(children_, 1);
    if (!fused_) return proj(ops::linear_gelu(x, fc.param("weight"), fc.param("bias")));
    return ops::mlp_gelu(x, fc.param("weight"), fc.param("bias"), proj.param("weight"), proj.param("bias"));
  }
  std::string type_name() const override { return "MLP"; }

 private:
  bool fused_;
};

// x + attn(ln_1(x)), then + mlp(ln_2(.)).
class Block final : public Cloneable<Block> {
 public:
  Block(const GPTConfig& c, Generator& scratch) {
    // The LayerNorms feed linears only: under autocast they write the low-precision dtype.
    register_module("ln_1", std::make_shared<LayerNorm>(Shape{c.n_embd}, 1e-5, true, true));
    register_module("attn", std::make_shared<CausalSelfAttention>(c, scratch));
    register_module("ln_2", std::make_shared<LayerNorm>(Shape{c.n_embd}, 1e-5, true, true));
    register_module("mlp", std::make_shared<MLP>(c, scratch));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x + attn(ln_1(x));
    return h + mlp(child<LayerNorm>(children_, 2)(h));
  }
  std::string type_name() const override { return "Block"; }

  // The parts, for GPT's chain of residual adds each fused with the LayerNorm after it.
  Tensor ln_1(const Tensor& x) { return child<LayerNorm>(children_, 0)(x); }
  Tensor attn(const Tensor& ln_1_out) { return (*children_[1].second)(ln_1_out); }
  Tensor mlp(const Tensor& ln_2_out) { return (*children_[3].second)(ln_2_out); }
  // {x + attn(ln_1_out), ln_2 of it}.
  ops::AddLayerNorm attn_then_ln_2(const Tensor& x, const Tensor& ln_1_out) {
    return child<LayerNorm>(children_, 2).forward_after_add(x, attn(ln_1_out));
  }
  // {h + branch, ln_1 of it}: the previous block's last residual add and this block's first LayerNorm.
  ops::AddLayerNorm add_then_ln_1(const Tensor& h, const Tensor& branch) {
    return child<LayerNorm>(children_, 0).forward_after_add(h, branch);
  }
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

GPTConfig GPTConfig::preset(const std::string& name) {
  GPTConfig c;
  if (name == "tiny") {
    c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.context = 16;
  } else if (name == "small") {
    // the defaults
  } else if (name == "gpt2-124m") {
    c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.context = 1024, c.vocab_size = 50304;
  } else {
    TANDEM_FAIL(Value, "GPT: unknown size '{}'; expected tiny, small or gpt2-124m", name);
  }
  return c;
}

void GPTConfig::check() const {
  TANDEM_CHECK(vocab_size > 0 && context > 0 && n_layer > 0 && n_head > 0 && n_embd > 0,
               "GPT: vocab_size {}, context {}, n_layer {}, n_head {} and n_embd {} must all be > 0", vocab_size,
               context, n_layer, n_head, n_embd);
  TANDEM_CHECK(n_embd % n_head == 0, "GPT: n_head {} does not divide n_embd {}", n_head, n_embd);
}

int64_t GPTConfig::num_parameters() const {
  const int64_t c = n_embd;
  const int64_t block = 2 * 2 * c                // ln_1, ln_2
                        + c * 3 * c + 3 * c      // c_attn
                        + c * c + c              // attn.c_proj
                        + c * 4 * c + 4 * c      // c_fc
                        + 4 * c * c + c;         // mlp.c_proj
  return vocab_size * c + context * c + n_layer * block + 2 * c;
}

double GPTConfig::flops_per_token(int64_t t) const {
  return 6.0 * static_cast<double>(num_non_position_parameters()) +
         12.0 * static_cast<double>(n_layer) * static_cast<double>(t) * static_cast<double>(n_embd);
}

GPT::GPT(const GPTConfig& config, Generator& gen) : cfg_(config) {
  cfg_.check();
  // Linear's own (PyTorch default) draws go to a scratch generator; GPT-2's follow from `gen`.
  Generator scratch(gen.seed() ^ 0x9E3779B97F4A7C15ull);
  register_module("wte", std::make_shared<Embedding>(cfg_.vocab_size, cfg_.n_embd, scratch));
  register_module("wpe", std::make_shared<Embedding>(cfg_.context, cfg_.n_embd, scratch));
  for (int64_t i = 0; i < cfg_.n_layer; ++i)
    register_module(fmt::format("h.{}", i), std::make_shared<Block>(cfg_, scratch));
  register_module("ln_f", std::make_shared<LayerNorm>(Shape{cfg_.n_embd}, 1e-5, true, true));

  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layer));
  for (auto& [name, p] : named_parameters()) {
    if (name.find("ln_") != std::string::npos) continue;  // LayerNorm: 1 and 0 from construction
    if (ends_with(name, ".bias"))
      init::zeros_(p);
    else if (ends_with(name, "c_proj.weight"))
      init::normal_(p, 0.0, residual_std, gen);
    else
      init::normal_(p, 0.0, 0.02, gen);
  }
}

Tensor GPT::hidden(const Tensor& ids) {
  TANDEM_CHECK(ids.dim() == 2, "GPT: token ids have shape {}; expected [batch, time]", shape_str(ids.shape()));
  TANDEM_CHECK(ids.dtype() == DType::i64 || ids.dtype() == DType::i32,
               "GPT: token ids have dtype {}; expected i64 or i32", dtype_name(ids.dtype()));
  const int64_t t = ids.size(1);
  TANDEM_CHECK(t >= 1 && t <= cfg_.context, "GPT: sequence of {} tokens; the context holds 1 to {}", t, cfg_.context);
  // Under autocast, the weights the linears (and the tied head) cast, in one launch: every linear's
  // weight and bias and wte; not the LayerNorms' (f32 ops) nor wpe (an embedding lookup).
  if (autocast_dtype()) {
    std::vector<Tensor> low;
    for (auto& [name, p] : named_parameters())
      if (name.find("ln_") == std::string::npos && name.rfind("wpe.", 0) != 0) low.push_back(p);
    autocast_prefetch(low);
  }
  // Positions 0..t-1 look up the position table's first t rows: a slice of it, no lookup (no index
  // upload, no gather, no waits for the device to check them; its backward adds into those rows).
  Tensor pos = ops::slice0(children_[1].second->param("weight"), 0, t);
  Tensor h = (*children_[0].second)(ids) + pos;  // [B, T, C] + [T, C]
  auto block = [&](int64_t i) -> Block& { return child<Block>(children_, static_cast<size_t>(2 + i)); };
  if (!cfg_.fused_add_norm) {
    for (int64_t i = 0; i < cfg_.n_layer; ++i) h = block(i)(h);
    return (*children_.back().second)(h);
  }
  // The same ops, each residual add but the last made with the LayerNorm after it (ln_2, or the next
  // block's ln_1) in one pass. The last stays an add then ln_f: a fused op's sum would have no
  // consumer, and backward would fill its gradient with zeros to read.
  Tensor a = block(0).ln_1(h);
  for (int64_t i = 0; i < cfg_.n_layer; ++i) {
    ops::AddLayerNorm mid = block(i).attn_then_ln_2(h, a);
    Tensor m = block(i).mlp(mid.y);
    if (i + 1 == cfg_.n_layer) return (*children_.back().second)(mid.sum + m);
    ops::AddLayerNorm next = block(i + 1).add_then_ln_1(mid.sum, m);
    h = next.sum;
    a = next.y;
  }
  return Tensor();  // not reached: n_layer >= 1
}

Tensor GPT::forward(const Tensor& ids) {
  // The tied head: linear(h, wte) = h wte^T, so wte's gradient sums the lookup's and the head's.
  return ops::linear(hidden(ids), children_[0].second->param("weight"));
}

Tensor GPT::last_logits(const Tensor& ids) {
  Tensor h = hidden(ids);
  const int64_t b = h.size(0), t = h.size(1);
  Tensor last = ops::reshape(ops::slice0(ops::reshape(ops::transpose(h, 0, 1), {t, b * cfg_.n_embd}), t - 1, t),
                             {b, cfg_.n_embd});
  return ops::linear(last, children_[0].second->param("weight"));
}

}  // namespace tandem::nn
