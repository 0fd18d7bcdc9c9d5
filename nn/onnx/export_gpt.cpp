// GPT as an ONNX graph: ids [batch, sequence] -> logits [batch, sequence, vocab], the sequence any
// length 1..context. tandem's fused ops are written as what they compute: causal attention as
// MatMul, scale, an additive causal mask and Softmax; the MLP as linear, tanh GELU, linear; the fused
// residual-add LayerNorms as Add then LayerNormalization; the tied head as a MatMul by wte^T.
//
// The sequence length is read from the ids at run time without Slice (which tandem's importer does
// not run): Shape and Gather give T, and Split into [T, context - T] takes the first T rows of the
// position table and of a constant context x context mask (a part of size 0 where T = context).
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "nn/onnx/export_parts.h"

namespace tandem::nn::onnx::detail {

namespace {

// The model's tensor `name` ("h.0.ln_1.weight") as an initializer of that name.
std::string weight(GraphBuilder& b, const NamedTensors& state, const std::string& name) {
  for (const auto& [n, t] : state)
    if (n == name) return b.initializer(name, t);
  TANDEM_FAIL(Internal, "{}: the GPT has no tensor '{}'", b.source(), name);
}

// The first T rows (and, for the mask, columns) of a table: Split's first part.
std::string first_rows(GraphBuilder& b, const std::string& table, const std::string& sizes, int64_t axis) {
  return b.node("Split", {table, sizes}, 2, {Attr::integer("axis", axis)})[0];
}

// x [B, T, C] -> [B, H, T, D] (or, transposed_last, [B, H, D, T] for the keys).
std::string heads(GraphBuilder& b, const std::string& x, const GPTConfig& c, bool transposed_last) {
  const std::string split = b.op("Reshape", {x, b.constant_ints({0, 0, c.n_head, c.head_dim()})});  // [B, T, H, D]
  std::vector<int64_t> perm{0, 2, 1, 3};
  if (transposed_last) perm = {0, 2, 3, 1};
  return b.op("Transpose", {split}, {Attr::integers("perm", perm)});
}

// x [B, T, C] -> x + c_proj(attention(c_attn(ln_1(x)))) for block `p` ("h.3.").
std::string attention(GraphBuilder& b, const NamedTensors& state, const GPTConfig& c, const std::string& p,
                      const std::string& x, const std::string& mask) {
  const int64_t embd = c.n_embd;
  b.set_scope(p + "attn");
  const std::string qkv = linear(b, x, 3, weight(b, state, p + "attn.c_attn.weight"),
                                 weight(b, state, p + "attn.c_attn.bias"));  // [B, T, 3C]
  const std::vector<std::string> parts =
      b.node("Split", {qkv, b.constant_ints({embd, embd, embd})}, 3, {Attr::integer("axis", 2)});
  const std::string q = heads(b, parts[0], c, false), kt = heads(b, parts[1], c, true);
  const std::string v = heads(b, parts[2], c, false);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim())));
  const std::string scores = b.op("Mul", {b.op("MatMul", {q, kt}), b.constant_scalar(scale)});  // [B, H, T, T]
  const std::string probs = b.op("Softmax", {b.op("Add", {scores, mask})}, {Attr::integer("axis", -1)});
  const std::string o = b.op("Transpose", {b.op("MatMul", {probs, v})}, {Attr::integers("perm", {0, 2, 1, 3})});
  const std::string merged = b.op("Reshape", {o, b.constant_ints({0, 0, embd})});  // [B, T, C]
  return linear(b, merged, 3, weight(b, state, p + "attn.c_proj.weight"), weight(b, state, p + "attn.c_proj.bias"));
}

std::string mlp(GraphBuilder& b, const NamedTensors& state, const std::string& p, const std::string& x) {
  b.set_scope(p + "mlp");
  const std::string h = linear(b, x, 3, weight(b, state, p + "mlp.c_fc.weight"), weight(b, state, p + "mlp.c_fc.bias"));
  return linear(b, gelu(b, h, true), 3, weight(b, state, p + "mlp.c_proj.weight"),
                weight(b, state, p + "mlp.c_proj.bias"));
}

std::string norm(GraphBuilder& b, const NamedTensors& state, const std::string& name, const std::string& x) {
  b.set_scope(name);
  return layer_norm(b, x, weight(b, state, name + ".weight"), weight(b, state, name + ".bias"), 1, 1e-5);
}

}  // namespace

void export_gpt(const GPT& model, GraphBuilder& b) {
  const GPTConfig& c = model.config();
  const NamedTensors state = model.state_dict();
  b.input("ids", DType::i64, {Dim::named("batch"), Dim::named("sequence")});

  // T, and the split sizes [T, context - T] that cut the tables to it.
  b.set_scope("positions");
  const std::string t = b.op("Gather", {b.op("Shape", {"ids"}), b.constant_ints({1})});
  const std::string rest = b.op("Sub", {b.constant_ints({c.context}), t});
  const std::string sizes = b.op("Concat", {t, rest}, {Attr::integer("axis", 0)});
  // 0 on and below the diagonal, -inf above: a position attends to itself and those before it.
  std::vector<float> mask_values(static_cast<size_t>(c.context * c.context), 0.0f);
  for (int64_t i = 0; i < c.context; ++i)
    for (int64_t j = i + 1; j < c.context; ++j)
      mask_values[static_cast<size_t>(i * c.context + j)] = -std::numeric_limits<float>::infinity();
  const std::string full_mask = b.constant(Tensor::from_vector(mask_values, {c.context, c.context}));
  const std::string mask = first_rows(b, first_rows(b, full_mask, sizes, 0), sizes, 1);  // [T, T]

  b.set_scope("wte");
  const std::string wte = weight(b, state, "wte.weight");
  std::string h = b.op("Gather", {wte, "ids"});  // [B, T, C]
  b.set_scope("wpe");
  h = b.op("Add", {h, first_rows(b, weight(b, state, "wpe.weight"), sizes, 0)});  // + [T, C]
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = fmt::format("h.{}.", i);
    h = b.op("Add", {h, attention(b, state, c, p, norm(b, state, p + "ln_1", h), mask)});
    h = b.op("Add", {h, mlp(b, state, p, norm(b, state, p + "ln_2", h))});
  }
  const std::string out = norm(b, state, "ln_f", h);
  // The head tied to the token embedding: logits = h wte^T.
  b.set_scope("lm_head");
  const std::string wte_t = b.op("Transpose", {wte}, {Attr::integers("perm", {1, 0})});
  b.op_into("logits", "MatMul", {out, wte_t});
  b.output("logits", DType::f32, {Dim::named("batch"), Dim::named("sequence"), Dim::of(c.vocab_size)});
}

}  // namespace tandem::nn::onnx::detail
