// Embedding over ops::embedding.
#include "nn/layers/embedding.h"

#include "nn/init.h"
#include "runtime/ops/embedding.h"
#include "runtime/ops/norm.h"

namespace tandem::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen)
    : num_(num_embeddings), dim_(embedding_dim) {
  TANDEM_CHECK(num_ > 0 && dim_ > 0, "Embedding: num_embeddings ({}) and embedding_dim ({}) must be > 0", num_, dim_);
  init::normal_(register_parameter("weight", Tensor::empty({num_, dim_})), 0.0, 1.0, gen);
}

Tensor Embedding::forward(const Tensor& indices) {
  TANDEM_CHECK(indices.dtype() == DType::i64 || indices.dtype() == DType::i32,
               "Embedding: indices have dtype {}; expected i64 or i32", dtype_name(indices.dtype()));
  return ops::embedding(indices, param("weight"));
}

}  // namespace tandem::nn
