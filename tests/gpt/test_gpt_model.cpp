// The GPT model: shapes and parameter counts, GPT-2's initialisation, the tied head's summed
// gradient (finite differences in f64), causality at the model level, clones, sampling, and the
// tiny model's loss falling on fortunes.
#include <cmath>
#include <optional>

#include <gtest/gtest.h>

#include "runtime/data/default_dirs.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/data/text_corpus.h"
#include "runtime/error.h"
#include "runtime/ops.h"

using namespace tandem;
using nn::GPT;
using nn::GPTConfig;

namespace {

Tensor ids_of(const std::vector<int64_t>& v, int64_t b, int64_t t) { return Tensor::from_vector(v, {b, t}, DType::i64); }

std::vector<int64_t> some_ids(int64_t n, int64_t vocab, uint64_t salt = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (i * 37 + 11 + static_cast<int64_t>(salt)) % vocab;
  return v;
}

Tensor param(const nn::Module& m, const std::string& name) {
  for (auto& [n, p] : m.named_parameters())
    if (n == name) return p;
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

double stddev(const Tensor& t) {
  auto v = t.to_vector<double>();
  double s = 0, s2 = 0;
  for (double x : v) s += x, s2 += x * x;
  const double n = static_cast<double>(v.size());
  return std::sqrt(s2 / n - (s / n) * (s / n));
}

Tensor lm_loss(GPT& m, const Tensor& x, const Tensor& y) {
  Tensor logits = m(x);
  return ops::cross_entropy(ops::reshape(logits, {-1, logits.size(2)}), ops::reshape(y, {-1}));
}

}  // namespace

TEST(GPT, ShapesAndParameterCounts) {
  GPTConfig c = GPTConfig::preset("tiny");
  Generator gen(1);
  GPT m(c, gen);
  int64_t n = 0;
  for (auto& p : m.parameters()) n += p.numel();
  EXPECT_EQ(n, c.num_parameters());
  // One parameter for the embedding and the head: wte and no separate output weight.
  int wte = 0;
  for (auto& [name, p] : m.named_parameters()) wte += name == "wte.weight";
  EXPECT_EQ(wte, 1);
  EXPECT_EQ(m.named_parameters().size(), 2 + 12 * static_cast<size_t>(c.n_layer) + 2);
  Tensor logits = m(ids_of(some_ids(3 * 16, 256), 3, 16));
  EXPECT_EQ(logits.shape(), (Shape{3, 16, 256}));
  EXPECT_EQ(m(ids_of(some_ids(5, 256), 1, 5)).shape(), (Shape{1, 5, 256}));
  // GPT-2 124M: 124,439,808 parameters at vocab 50257 (nanoGPT's count), + 47 * 768 for the padding.
  GPTConfig g = GPTConfig::preset("gpt2-124m");
  EXPECT_EQ(g.num_parameters(), 124439808 + 47 * 768);
  EXPECT_THROW(m(ids_of(some_ids(17, 256), 1, 17)), ValueError);  // longer than the context
  EXPECT_THROW(m(Tensor::zeros({2, 4})), ValueError);             // not token ids
  GPTConfig bad = c;
  bad.n_head = 3;
  EXPECT_THROW(GPT(bad, gen), ValueError);
  EXPECT_THROW(GPTConfig::preset("huge"), ValueError);
}

TEST(GPT, Gpt2Initialisation) {
  GPTConfig c;
  c.n_layer = 3, c.n_head = 2, c.n_embd = 64, c.context = 32;
  Generator gen(2);
  GPT m(c, gen);
  EXPECT_NEAR(stddev(param(m, "wte.weight")), 0.02, 0.002);
  EXPECT_NEAR(stddev(param(m, "wpe.weight")), 0.02, 0.002);
  EXPECT_NEAR(stddev(param(m, "h.1.attn.c_attn.weight")), 0.02, 0.002);
  EXPECT_NEAR(stddev(param(m, "h.1.mlp.c_fc.weight")), 0.02, 0.002);
  const double residual = 0.02 / std::sqrt(6.0);
  EXPECT_NEAR(stddev(param(m, "h.2.attn.c_proj.weight")), residual, residual * 0.1);
  EXPECT_NEAR(stddev(param(m, "h.0.mlp.c_proj.weight")), residual, residual * 0.1);
  for (const char* zero : {"h.0.attn.c_attn.bias", "h.2.mlp.c_proj.bias", "ln_f.bias", "h.1.ln_1.bias"})
    for (double v : param(m, zero).to_vector<double>()) ASSERT_EQ(v, 0.0) << zero;
  for (double v : param(m, "h.1.ln_2.weight").to_vector<double>()) ASSERT_EQ(v, 1.0);
  // Same seed, same weights; another seed, others.
  Generator g2(2), g3(3);
  GPT same(c, g2), other(c, g3);
  EXPECT_EQ(param(same, "h.1.mlp.c_fc.weight").to_vector<float>(), param(m, "h.1.mlp.c_fc.weight").to_vector<float>());
  EXPECT_NE(param(other, "wte.weight").to_vector<float>(), param(m, "wte.weight").to_vector<float>());
}

TEST(GPT, ChangingAFutureTokenChangesNoEarlierLogits) {
  GPTConfig c = GPTConfig::preset("tiny");
  Generator gen(4);
  GPT m(c, gen);
  NoGradGuard ng;
  auto ids = some_ids(2 * 16, 256);
  auto a = m(ids_of(ids, 2, 16)).to_vector<float>();
  const int64_t k = 9;
  ids[k] = (ids[k] + 100) % 256;            // batch row 0, position 9
  ids[16 + 15] = (ids[16 + 15] + 1) % 256;  // batch row 1, the last position
  auto b = m(ids_of(ids, 2, 16)).to_vector<float>();
  const int64_t v = 256;
  double before = 0, at = 0, row1 = 0;
  for (int64_t t = 0; t < 16; ++t)
    for (int64_t j = 0; j < v; ++j) {
      const size_t i0 = static_cast<size_t>(t * v + j), i1 = static_cast<size_t>((16 + t) * v + j);
      const double d0 = std::abs(a[i0] - b[i0]), d1 = std::abs(a[i1] - b[i1]);
      if (t < k) before = std::max(before, d0);
      if (t == k) at = std::max(at, d0);
      if (t < 15) row1 = std::max(row1, d1);
    }
  EXPECT_EQ(before, 0.0) << "a logit before position " << k << " changed";
  EXPECT_EQ(row1, 0.0) << "row 1 changed before its last position";
  EXPECT_GT(at, 1e-4) << "the changed position's own logits did not change";
}

TEST(GPT, TiedWeightGradientMatchesFiniteDifferences) {
  // f64 so central differences are exact to ~1e-9; the head and the lookup both feed wte's gradient.
  GPTConfig c = GPTConfig::preset("tiny");
  c.n_layer = 1;
  c.context = 6;
  c.vocab_size = 20;
  Generator gen(5);
  GPT m(c, gen);
  m.to(DType::f64);
  auto xs = some_ids(2 * 6, 20), ys = some_ids(2 * 6, 20, 3);
  Tensor x = ids_of(xs, 2, 6), y = ids_of(ys, 2, 6);
  Tensor w = param(m, "wte.weight");
  lm_loss(m, x, y).backward();
  auto grad = w.grad().to_vector<double>();
  // Row xs[0] is looked up and scored; row 19 (absent from x) is only scored.
  for (int64_t row : {xs[0], int64_t{19}}) {
    for (int64_t col : {int64_t{0}, int64_t{17}}) {
      double* p = w.data<double>() + row * c.n_embd + col;
      const double keep = *p, h = 1e-5;
      NoGradGuard ng;
      *p = keep + h;
      const double up = lm_loss(m, x, y).item();
      *p = keep - h;
      const double down = lm_loss(m, x, y).item();
      *p = keep;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(grad[static_cast<size_t>(row * c.n_embd + col)], fd, 1e-7 + 1e-5 * std::abs(fd))
          << "wte[" << row << ", " << col << "]";
    }
  }
}

namespace {

// The loss and then every parameter's gradient, by name, of one backward of a GPT made from
// seed `seed` with config c (in f64, or in f32 and under `autocast` when given).
std::vector<std::pair<std::string, Tensor>> loss_and_grads(const GPTConfig& c, uint64_t seed, bool f64,
                                                           std::optional<DType> autocast = std::nullopt) {
  Generator gen(seed);
  GPT m(c, gen);
  if (f64) m.to(DType::f64);
  Tensor x = ids_of(some_ids(2 * 16, 256), 2, 16), y = ids_of(some_ids(2 * 16, 256, 5), 2, 16);
  Tensor loss;
  {
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace(*autocast);
    loss = lm_loss(m, x, y);
  }
  loss.backward();
  std::vector<std::pair<std::string, Tensor>> out{{"loss", loss}};
  for (auto& [name, p] : m.named_parameters()) out.emplace_back(name, p.grad());
  return out;
}

}  // namespace

// The MLP as one op (the default) and as linear_gelu then linear (fused_mlp = false, A/B runs): the
// same loss and parameter gradients (f64), and the same parameter names.
TEST(GPT, FusedMlpEqualsTheSeparateOps) {
  GPTConfig c = GPTConfig::preset("tiny");
  auto fused = loss_and_grads(c, 8, true);
  c.fused_mlp = false;
  auto separate = loss_and_grads(c, 8, true);
  ASSERT_EQ(fused.size(), separate.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    ASSERT_EQ(fused[i].first, separate[i].first);
    auto a = fused[i].second.to_vector<double>(), b = separate[i].second.to_vector<double>();
    ASSERT_EQ(a.size(), b.size()) << fused[i].first;
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-12 * (1 + std::abs(b[k]))) << fused[i].first;
  }
}

// Each residual add with the LayerNorm after it as one op (the default) and apart (fused_add_norm =
// false, A/B runs): the same loss and parameter gradients bit for bit, in f32 and under bf16
// autocast (an f32 residual stream, bf16 branches and LayerNorm outputs), the same parameter names.
TEST(GPT, FusedAddNormEqualsTheSeparateOps) {
  for (std::optional<DType> autocast : {std::optional<DType>(), std::optional<DType>(DType::bf16)}) {
    GPTConfig c = GPTConfig::preset("tiny");
    c.n_layer = 3;
    auto fused = loss_and_grads(c, 9, false, autocast);
    c.fused_add_norm = false;
    auto separate = loss_and_grads(c, 9, false, autocast);
    ASSERT_EQ(fused.size(), separate.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      ASSERT_EQ(fused[i].first, separate[i].first);
      EXPECT_EQ(fused[i].second.to_vector<float>(), separate[i].second.to_vector<float>())
          << fused[i].first << (autocast ? " under bf16 autocast" : " in f32");
    }
  }
}

TEST(GPT, CloneIsIndependentAndEqual) {
  Generator gen(6);
  GPT m(GPTConfig::preset("tiny"), gen);
  auto copy = std::static_pointer_cast<GPT>(m.clone());
  Tensor x = ids_of(some_ids(16, 256), 1, 16);
  NoGradGuard ng;
  EXPECT_EQ((*copy)(x).to_vector<float>(), m(x).to_vector<float>());
  param(*copy, "h.0.attn.c_attn.weight").fill_(0.0);
  EXPECT_NE((*copy)(x).to_vector<float>(), m(x).to_vector<float>());
}

TEST(GPT, SamplingIsSeededAndTopOneIsGreedy) {
  Generator gen(7);
  GPT m(GPTConfig::preset("tiny"), gen);
  nn::SampleOptions o;
  o.tokens = 20;  // past the context of 16: the window slides
  o.temperature = 0.9;
  o.top_k = 5;
  o.seed = 3;
  auto a = nn::sample(m, {10, 20}, o), b = nn::sample(m, {10, 20}, o);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 20u);
  for (int64_t t : a) EXPECT_TRUE(t >= 0 && t < 256);
  o.top_k = 1;
  auto greedy = nn::sample(m, {10, 20}, o);
  std::vector<int64_t> seq{10, 20};
  NoGradGuard ng;
  for (int i = 0; i < 3; ++i) {
    auto logits = m(ids_of(seq, 1, static_cast<int64_t>(seq.size()))).to_vector<float>();
    auto last = logits.end() - 256;
    seq.push_back(std::max_element(last, logits.end()) - last);
    EXPECT_EQ(greedy[static_cast<size_t>(i)], seq.back()) << "step " << i;
  }
  EXPECT_THROW(nn::sample(m, {}, o), ValueError);
  EXPECT_THROW(nn::sample(m, {300}, o), ValueError);
}

TEST(GPT, TinyModelLearnsFortunes) {
  // 150 AdamW steps of 8 windows x 32 bytes: from ln(256) = 5.55 to below the byte-unigram
  // entropy (3.32 nats): the model uses the context, not only byte frequencies.
  data::TextCorpus corpus = data::load_text_corpus(data::kFortunesDir);
  GPTConfig c = GPTConfig::preset("tiny");
  c.context = 32;
  Generator gen(8);
  GPT m(c, gen);
  nn::AdamOptions ao;
  ao.lr = 1e-2;
  nn::AdamW opt(m.parameters(), ao);
  data::TextWindowsOptions wo;
  wo.batch_size = 8;
  wo.context = 32;
  data::TextWindows windows(corpus.train, wo);
  double first = 0, last = 0;
  const int steps = 150;
  for (int s = 0; s < steps; ++s) {
    data::Batch b = windows.batch(s);
    opt.zero_grad();
    Tensor loss = lm_loss(m, b.x, b.y);
    loss.backward();
    opt.step();
    if (s == 0) first = loss.item();
    if (s >= steps - 10) last += loss.item() / 10;
  }
  std::printf("tiny GPT on fortunes: loss %.3f -> %.3f (mean of the last 10 steps)\n", first, last);
  EXPECT_NEAR(first, std::log(256.0), 0.2);
  EXPECT_LT(last, 3.25);  // 3.155 here
}
