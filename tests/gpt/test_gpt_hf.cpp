// Hugging Face GPT-2 weights: a tiny GPT-2 written in HF's layout by tests/reference/make_gpt2_hf.py
// (from bench/train/torch_gpt.py, the PyTorch peer) loads into nn::GPT and gives the peer's logits.
#include <algorithm>
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "nn/gpt_hf.h"
#include "runtime/autograd.h"
#include "runtime/error.h"
#include "runtime/serialization/safetensors.h"
#include "tests/data/temp_dir.h"
#include "tests/reference/gpt2_hf_values.h"
#include "tests/support/error_of.h"

using namespace tandem;

namespace {

const std::string kFile = std::string(TANDEM_REFERENCE_DIR) + "/gpt2_hf_tiny.safetensors";

Tensor ids() {
  return Tensor::from_vector(std::vector<int64_t>(std::begin(gpt2_hf_ref::kIds), std::end(gpt2_hf_ref::kIds)),
                             {gpt2_hf_ref::kBatch, gpt2_hf_ref::kTime});
}

}  // namespace

TEST(Gpt2Hf, ConfigFromTheFile) {
  nn::GPTConfig c = nn::hf_gpt2_config(kFile, gpt2_hf_ref::kHead);
  EXPECT_EQ(c.n_layer, gpt2_hf_ref::kLayer);
  EXPECT_EQ(c.n_embd, gpt2_hf_ref::kEmbd);
  EXPECT_EQ(c.vocab_size, gpt2_hf_ref::kVocab);
  EXPECT_EQ(c.context, gpt2_hf_ref::kPositions);
  EXPECT_THROW(nn::hf_gpt2_config(kFile, 3), ValueError);  // 3 heads do not divide 16
}

TEST(Gpt2Hf, LogitsEqualThePytorchPeers) {
  nn::GPT m(nn::hf_gpt2_config(kFile, gpt2_hf_ref::kHead));
  nn::load_hf_gpt2(m, kFile);
  NoGradGuard ng;
  auto logits = m(ids()).to_vector<float>();
  ASSERT_EQ(logits.size(), std::size(gpt2_hf_ref::kLogits));
  for (size_t i = 0; i < logits.size(); ++i)
    ASSERT_NEAR(logits[i], gpt2_hf_ref::kLogits[i], 1e-5 + 1e-5 * std::abs(gpt2_hf_ref::kLogits[i])) << "logit " << i;
}

TEST(Gpt2Hf, PaddedVocabularyAndShorterContext) {
  // As GPT-2 124M at 50304: extra vocabulary rows are zero (logit 0); a context of 8 of the 12 positions.
  nn::GPTConfig c = nn::hf_gpt2_config(kFile, gpt2_hf_ref::kHead);
  c.vocab_size = 64;
  c.context = 8;
  nn::GPT m(c);
  nn::load_hf_gpt2(m, kFile);
  NoGradGuard ng;
  auto logits = m(ids()).to_vector<float>();
  const int64_t v = gpt2_hf_ref::kVocab;
  for (int64_t row = 0; row < gpt2_hf_ref::kBatch * gpt2_hf_ref::kTime; ++row)
    for (int64_t j = 0; j < 64; ++j) {
      const float got = logits[static_cast<size_t>(row * 64 + j)];
      if (j >= v) {
        ASSERT_EQ(got, 0.0f);
      } else {
        const float want = gpt2_hf_ref::kLogits[row * v + j];
        ASSERT_NEAR(got, want, 1e-5 + 1e-5 * std::abs(want)) << "row " << row << " column " << j;
      }
    }
}

TEST(Gpt2Hf, MismatchesAreClearErrors) {
  nn::GPTConfig c = nn::hf_gpt2_config(kFile, gpt2_hf_ref::kHead);
  c.n_layer = 3;  // h.2 is not in the file
  nn::GPT deeper(c);
  try {
    nn::load_hf_gpt2(deeper, kFile);
    FAIL() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("h.2."), std::string::npos) << e.what();
  }
  c = nn::hf_gpt2_config(kFile, gpt2_hf_ref::kHead);
  c.n_layer = 1;  // h.1 has no place
  nn::GPT shallower(c);
  EXPECT_THROW(nn::load_hf_gpt2(shallower, kFile), IOError);
  c = nn::hf_gpt2_config(kFile, gpt2_hf_ref::kHead);
  c.context = 16;  // more positions than the file has
  nn::GPT longer(c);
  EXPECT_THROW(nn::load_hf_gpt2(longer, kFile), IOError);
  EXPECT_THROW(nn::load_hf_gpt2(shallower, "/nonexistent/model.safetensors"), IOError);
}

// A file whose shape claims a larger model than it holds is refused before the model is made: the
// config is read first and the model allocated and initialised from it (a 300-byte file with a wpe of
// 2^28 rows of no values made tandem-train allocate 12 GB and more).
TEST(Gpt2Hf, AFileMustHoldEveryTensorOfTheShapeItClaims) {
  tandem::testing::TempDir dir;
  const auto edited = [&](const std::function<void(serialization::NamedTensors&)>& edit) {
    serialization::NamedTensors t = serialization::load_safetensors(kFile).tensors;
    edit(t);
    const std::string path = dir.file("edited.safetensors");
    serialization::save_safetensors(path, t);
    return path;
  };
  const auto error = [&](const std::string& path) {
    return tandem::testing::error_of<IOError>([&] { nn::hf_gpt2_config(path, gpt2_hf_ref::kHead); });
  };
  const auto set = [](serialization::NamedTensors& t, const std::string& name, Tensor value) {
    for (auto& [n, v] : t)
      if (n == name) v = value;
  };
  const auto drop = [](serialization::NamedTensors& t, const std::string& name) {
    t.erase(std::remove_if(t.begin(), t.end(), [&](const auto& e) { return e.first == name; }), t.end());
  };
  std::string m = error(edited([&](auto& t) { set(t, "transformer.wpe.weight", Tensor::zeros({1 << 28, 0})); }));
  EXPECT_NE(m.find("wpe.weight [268435456, 0]: both must be 16 wide"), std::string::npos) << m;
  m = error(edited([&](auto& t) { drop(t, "transformer.h.1.mlp.c_fc.weight"); }));
  EXPECT_NE(m.find("h.1.mlp.c_fc.weight is missing; a GPT-2 of width 16 has it as [16, 64]"), std::string::npos)
      << m;
  m = error(edited([&](auto& t) { t.emplace_back("transformer.h.2.ln_1.weight", Tensor::ones({16})); }));
  EXPECT_NE(m.find("h.2.ln_1.bias is missing"), std::string::npos) << m;  // a block of one LayerNorm
  m = error(edited([&](auto& t) { set(t, "transformer.h.0.attn.c_proj.weight", Tensor::zeros({16, 17})); }));
  EXPECT_NE(m.find("h.0.attn.c_proj.weight is of shape [16, 17]"), std::string::npos) << m;
  m = error(edited([&](auto& t) { drop(t, "transformer.ln_f.bias"); }));
  EXPECT_NE(m.find("ln_f.bias is missing"), std::string::npos) << m;
  // The file as written loads (the edits above are what fails).
  EXPECT_EQ(nn::hf_gpt2_config(edited([](auto&) {}), gpt2_hf_ref::kHead).n_layer, 2);
}
