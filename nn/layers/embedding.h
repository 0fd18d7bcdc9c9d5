// Embedding: a lookup table weight [num_embeddings, embedding_dim], initialised N(0, 1) as PyTorch.
#pragma once
#include "nn/module.h"
#include "runtime/random.h"

namespace tandem::nn {

class Embedding : public Cloneable<Embedding> {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen = default_generator());
  Tensor forward(const Tensor& indices) override;  // i32/i64 [...] -> [..., embedding_dim]
  std::string type_name() const override { return "Embedding"; }
  int64_t num_embeddings() const { return num_; }
  int64_t embedding_dim() const { return dim_; }

 private:
  int64_t num_, dim_;
};

}  // namespace tandem::nn
