// Sampling text from a GPT: temperature, top-k, a counter-based generator.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "nn/gpt.h"
#include "runtime/autograd.h"
#include "runtime/backend/common/philox.h"
#include "runtime/error.h"

namespace tandem::nn {

std::vector<int64_t> sample(GPT& model, const std::vector<int64_t>& prompt, const SampleOptions& options) {
  TANDEM_CHECK(!prompt.empty(), "sample: the prompt needs at least one token");
  TANDEM_CHECK(options.temperature > 0, "sample: temperature {} must be > 0", options.temperature);
  const GPTConfig& cfg = model.config();
  for (int64_t id : prompt)
    TANDEM_CHECK(id >= 0 && id < cfg.vocab_size, "sample: prompt token {} outside the vocabulary [0, {})", id,
                 cfg.vocab_size);
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Device device = model.parameters().front().device();
  std::vector<int64_t> seq = prompt, out;
  for (int64_t i = 0; i < options.tokens; ++i) {
    const int64_t t = std::min<int64_t>(static_cast<int64_t>(seq.size()), cfg.context);
    std::vector<int64_t> window(seq.end() - t, seq.end());
    Tensor ids = Tensor::from_vector(window, {1, t}, DType::i64, device);
    std::vector<double> logits = model.last_logits(ids).to_vector<double>();
    if (options.vocab_limit > 0 && options.vocab_limit < static_cast<int64_t>(logits.size()))
      logits.resize(static_cast<size_t>(options.vocab_limit));
    // Top-k: logits below the k-th largest drop out; the rest form a softmax at the temperature.
    const auto v = static_cast<int64_t>(logits.size());
    double cut = -INFINITY;
    if (options.top_k > 0 && options.top_k < v) {
      std::vector<double> sorted = logits;
      std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<double>());
      cut = sorted[static_cast<size_t>(options.top_k - 1)];
    }
    const double mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size(), 0.0);
    for (size_t j = 0; j < p.size(); ++j)
      if (logits[j] >= cut) p[j] = std::exp((logits[j] - mx) / options.temperature);
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    const double u = philox_uniform(options.seed, static_cast<uint64_t>(i), 0) * total;
    int64_t next = std::max_element(logits.begin(), logits.end()) - logits.begin();  // if rounding leaves u past the end
    double acc = 0;
    for (int64_t j = 0; j < v; ++j) {
      acc += p[static_cast<size_t>(j)];
      if (p[static_cast<size_t>(j)] > 0 && u < acc) {
        next = j;
        break;
      }
    }
    seq.push_back(next);
    out.push_back(next);
  }
  model.train(was_training);
  return out;
}

}  // namespace tandem::nn
