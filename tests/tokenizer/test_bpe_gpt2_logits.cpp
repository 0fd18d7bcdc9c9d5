// Fine-tuning's first step end to end: text encoded by the BPE tokenizer, fed to a GPT-2 loaded from
// Hugging Face's layout with the vocabulary padded as tandem-train pads it, gives the PyTorch
// peer's logits (tests/reference/make_gpt2_hf_bpe.py).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "nn/gpt_hf.h"
#include "runtime/autograd.h"
#include "runtime/data/bpe_tokenizer.h"
#include "tests/reference/gpt2_hf_bpe_values.h"

using namespace tandem;
namespace ref = gpt2_hf_bpe_ref;

TEST(BpeGpt2, EncodedTextGivesThePeersLogits) {
  const std::string dir = TANDEM_REFERENCE_DIR;
  data::BpeTokenizer bpe = data::BpeTokenizer::from_dir(dir + "/bpe_tiny");
  const std::vector<int32_t> ids = bpe.encode(ref::kText);
  ASSERT_EQ(ids, std::vector<int32_t>(std::begin(ref::kIds), std::end(ref::kIds)));

  nn::GPTConfig c = nn::hf_gpt2_config(dir + "/gpt2_hf_bpe.safetensors", ref::kHead);
  ASSERT_EQ(c.vocab_size, bpe.vocab_size());
  c.vocab_size = 448;  // 421 padded to a multiple of 64
  nn::GPT m(c);
  nn::load_hf_gpt2(m, dir + "/gpt2_hf_bpe.safetensors");
  NoGradGuard ng;
  const auto t = static_cast<int64_t>(ids.size());
  const std::vector<float> logits =
      m(Tensor::from_vector(std::vector<int64_t>(ids.begin(), ids.end()), {1, t})).to_vector<float>();
  for (int64_t row : {int64_t{0}, t - 1}) {
    const float* want = row == 0 ? ref::kFirstLogits : ref::kLastLogits;
    for (int64_t j = 0; j < 448; ++j) {
      const float got = logits[static_cast<size_t>(row * 448 + j)];
      if (j >= ref::kVocab)
        ASSERT_EQ(got, 0.0f) << "padding column " << j;
      else
        ASSERT_NEAR(got, want[j], 1e-5 + 1e-5 * std::abs(want[j])) << "position " << row << " token " << j;
    }
  }
}
