// Tiny language models whose output projection is the token embedding (weight tying), for the
// tying tests: TiedLM holds the table once and uses it twice; SharedTableLM registers one tensor in
// two modules (an Embedding and a bias-free Linear), as a model assembled from layers does.
#pragma once
#include <memory>
#include <vector>

#include "nn/layers.h"
#include "runtime/ops.h"
#include "runtime/random.h"

namespace tandem::testing {

class TiedLM : public nn::Cloneable<TiedLM> {
 public:
  TiedLM(int64_t vocab, int64_t dim, uint64_t seed, DType dtype = DType::f32) {
    Generator gen(seed);
    register_parameter("wte", rand_normal({vocab, dim}, 0.0, 0.5, gen, dtype));
    register_parameter("w", rand_normal({dim, dim}, 0.0, 0.3, gen, dtype));
  }
  // ids [N] -> logits [N, vocab] = tanh(wte[ids] w^T) wte^T (the head is linear's x W^T: no transpose copy).
  Tensor forward(const Tensor& ids) override {
    return ops::linear(ops::tanh(ops::linear(ops::embedding(ids, param("wte")), param("w"))), param("wte"));
  }
  std::string type_name() const override { return "TiedLM"; }
};

class SharedTableLM : public nn::Cloneable<SharedTableLM> {
 public:
  SharedTableLM(int64_t vocab, int64_t dim, uint64_t seed) {
    Generator gen(seed);
    register_module("emb", std::make_shared<nn::Embedding>(vocab, dim, gen));
    register_module("mid", std::make_shared<nn::Linear>(dim, dim, false, gen));
    register_module("head", std::make_shared<nn::Linear>(dim, vocab, false, gen));
    tie();
  }
  Tensor forward(const Tensor& ids) override {
    return child(2).forward(ops::tanh(child(1).forward(child(0).forward(ids))));
  }
  std::string type_name() const override { return "SharedTableLM"; }
  // A deep copy copies each registration on its own; the copy is tied again.
  std::shared_ptr<nn::Module> clone() const override {
    auto c = nn::Cloneable<SharedTableLM>::clone();
    static_cast<SharedTableLM&>(*c).tie();
    return c;
  }

 private:
  nn::Module& child(size_t i) const { return *children()[i].second; }
  void tie() { child(2).param("weight") = child(0).param("weight"); }  // both modules hold one tensor
};

// Token ids [n] in [0, vocab), the same for the same seed.
inline Tensor token_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> u = rand_uniform({n}, 0.0, static_cast<double>(vocab), gen, DType::f64).to_vector<double>();
  std::vector<int64_t> ids(u.size());
  for (size_t i = 0; i < u.size(); ++i) ids[i] = std::min<int64_t>(vocab - 1, static_cast<int64_t>(u[i]));
  return Tensor::from_vector(ids, {n});
}

}  // namespace tandem::testing
