// Shared helpers of the tests/parallel executables: the world communicator, small deterministic
// models and batches, row shards, and parameter comparison to a relative tolerance.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "nn/layers.h"
#include "runtime/ops.h"
#include "runtime/random.h"

namespace tandem::testing {

// The MPI world (created on first use; released by the MPI-aware main before MPI_Finalize).
std::shared_ptr<comm::Communicator>& world_slot();
inline std::shared_ptr<comm::Communicator> world() {
  auto& w = world_slot();
  if (!w) {
    comm::Options o;
    o.timeout_s = 120;  // a hang in a test becomes an error naming the collective
    w = comm::make_mpi_communicator(o);
  }
  return w;
}
inline void release_world() { world_slot().reset(); }

// Passes every call through to `inner`: tests derive from it to watch or change one call.
class ForwardingComm : public comm::Communicator {
 public:
  explicit ForwardingComm(std::shared_ptr<comm::Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Device device() const override { return inner_->device(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  comm::WorkPtr allreduce(void* buf, int64_t count, DType dtype, comm::ReduceOp op) override {
    return inner_->allreduce(buf, count, dtype, op);
  }
  comm::WorkPtr reduce_scatter(const void* send, void* recv, int64_t n, DType dtype, comm::ReduceOp op) override {
    return inner_->reduce_scatter(send, recv, n, dtype, op);
  }
  comm::WorkPtr allgather(const void* send, void* recv, int64_t n, DType dtype) override {
    return inner_->allgather(send, recv, n, dtype);
  }
  comm::WorkPtr broadcast(void* buf, int64_t n, DType dtype, int root) override {
    return inner_->broadcast(buf, n, dtype, root);
  }
  comm::WorkPtr send(const void* buf, int64_t n, DType dtype, int peer) override {
    return inner_->send(buf, n, dtype, peer);
  }
  comm::WorkPtr recv(void* buf, int64_t n, DType dtype, int peer) override { return inner_->recv(buf, n, dtype, peer); }
  comm::WorkPtr barrier() override { return inner_->barrier(); }
  Tensor make_buffer(int64_t numel, DType dtype) override { return inner_->make_buffer(numel, dtype); }

 protected:
  std::shared_ptr<comm::Communicator> inner_;
};

// Linear(in, hidden)-ReLU-Linear(hidden, hidden)-ReLU-Linear(hidden, out) from a seed.
inline std::shared_ptr<nn::Sequential> small_mlp(uint64_t seed, int64_t in = 12, int64_t hidden = 16,
                                                 int64_t out = 5) {
  Generator gen(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(in, hidden, true, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(hidden, hidden, true, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(hidden, out, true, gen));
  return m;
}

// Conv(1,4,3,p1)-BN(4)-ReLU-MaxPool(2)-Flatten-Linear(4*4*4, 3) for [N, 1, 8, 8] inputs.
inline std::shared_ptr<nn::Sequential> small_cnn(uint64_t seed) {
  Generator gen(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Conv2d>(1, 4, 3, 1, 1, true, gen));
  m->push_back(std::make_shared<nn::BatchNorm2d>(4));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(2));
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(4 * 4 * 4, 3, true, gen));
  return m;
}

// y = a(x) (+ b(x) when use_b): a parameter set whose use can change per iteration and per rank.
class TwoBranch : public nn::Cloneable<TwoBranch> {
 public:
  explicit TwoBranch(uint64_t seed, int64_t in = 12, int64_t out = 5) {
    Generator gen(seed);
    register_module("a", std::make_shared<nn::Linear>(in, out, true, gen));
    register_module("b", std::make_shared<nn::Linear>(in, out, true, gen));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = children()[0].second->forward(x);
    if (use_b) y = y + children()[1].second->forward(x);
    return y;
  }
  std::string type_name() const override { return "TwoBranch"; }
  bool use_b = true;
};

struct Batch {
  Tensor x, y;
};
// A batch of `rows` samples, the same on every rank for the same seed.
inline Batch make_batch(uint64_t seed, const Shape& x_shape, int64_t classes) {
  Generator gen(seed);
  Batch b;
  b.x = rand_normal(x_shape, 0.0, 1.0, gen);
  std::vector<int64_t> y(static_cast<size_t>(x_shape[0]));
  auto u = rand_uniform({x_shape[0]}, 0.0, static_cast<double>(classes), gen, DType::f64).to_vector<double>();
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::min<int64_t>(classes - 1, static_cast<int64_t>(u[i]));
  b.y = Tensor::from_vector(y, {x_shape[0]});
  return b;
}

// Rows [r*B/n, (r+1)*B/n) of a batch (B divisible by n).
inline Batch shard(const Batch& b, int rank, int n) {
  const int64_t rows = b.x.size(0) / n;
  return {b.x.narrow0(rank * rows, rows).clone(), b.y.narrow0(rank * rows, rows).clone()};
}

inline void expect_close(const Tensor& actual, const Tensor& expected, double rtol, const std::string& what,
                         double atol = 1e-7) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double err = std::abs(a[i] - e[i]) / (atol + rtol * std::abs(e[i]));
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  EXPECT_LE(worst, 1.0) << what << ": element " << at << " is " << a[at] << ", expected " << e[at]
                        << " (rtol " << rtol << ")";
}

inline void expect_same_parameters(const nn::Module& actual, const nn::Module& expected, double rtol,
                                   const std::string& what) {
  auto a = actual.named_parameters(), e = expected.named_parameters();
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) expect_close(a[i].second, e[i].second, rtol, what + " " + a[i].first);
}

}  // namespace tandem::testing
