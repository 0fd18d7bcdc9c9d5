// The Reducer's ZeRO side (DDPOptions::zero_stage 1, 2; docs/zero.md): this rank's chunk of each
// bucket, stage 2's pool of buckets in flight, and the parameters' asynchronous all-gather after
// ZeroOptimizer's step.
#include <algorithm>
#include <map>
#include <tuple>

#include "nn/parallel/reducer.h"
#include "runtime/autograd.h"
#include "runtime/trace.h"

namespace tandem::nn::parallel {

void Reducer::allocate_pool() {
  // The k-th bucket of a dtype and device takes buffer k % kPool of its kind: the same on every
  // rank (make_buffer is collective), and bucket k waits only for bucket k - kPool of its kind.
  std::map<std::tuple<int, int, int>, std::vector<size_t>> kinds;  // -> its pool buffers
  std::map<std::tuple<int, int, int>, size_t> seen;
  std::vector<int64_t> numel;
  std::vector<size_t> like;  // a bucket served by each pool buffer
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Tensor& first = params_[buckets_[b].params.front()];
    const std::tuple<int, int, int> key{static_cast<int>(first.dtype()), static_cast<int>(first.device().kind),
                                        first.device().index};
    std::vector<size_t>& mine = kinds[key];
    const size_t k = seen[key]++;
    if (k < kPool) {
      mine.push_back(numel.size());
      numel.push_back(0);
      like.push_back(b);
    }
    pool_slot_.push_back(mine[k % kPool]);
    numel[pool_slot_.back()] = std::max(numel[pool_slot_.back()], numels_[b]);
  }
  for (size_t s = 0; s < numel.size(); ++s)
    pool_.push_back(bucket_memory(numel[s], params_[buckets_[like[s]].params.front()]));
  pool_user_.assign(pool_.size(), -1);
}

void Reducer::take_pool_buffer(size_t b) {
  const size_t s = pool_slot_[b];
  if (pool_user_[s] >= 0) finish_reduce_scatter(static_cast<size_t>(pool_user_[s]));
  buckets_[b].buffer = pool_[s].narrow0(0, numels_[b]);
  set_slots(b);
  pool_user_[s] = static_cast<int64_t>(b);
}

void Reducer::finish_reduce_scatter(size_t b) {
  NoGradGuard no_grad;
  Bucket& bucket = buckets_[b];
  if (bucket.work) bucket.work->wait();
  bucket.work.reset();
  if (trace::enabled() && bucket.done_us < 0) bucket.done_us = trace::now_us();
  auto [lo, hi] = shard_range(b);
  shard_grads_[b].copy_(bucket.buffer.narrow0(lo, hi - lo));
  bucket.buffer = Tensor();
  for (size_t i : bucket.params) slots_[i] = grad_views_[i] = Tensor();
  pool_user_[pool_slot_[b]] = -1;
}

void Reducer::release_pool() {
  for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].buffer = Tensor();
  slots_.assign(params_.size(), Tensor());
  grad_views_.assign(params_.size(), Tensor());
  pool_user_.assign(pool_.size(), -1);
}

int64_t Reducer::pool_bytes() const {
  int64_t total = 0;
  for (const Tensor& t : pool_) total += static_cast<int64_t>(t.nbytes());
  return total;
}

std::vector<Tensor> Reducer::gradient_buffers() const {
  std::vector<Tensor> out = pool_;
  for (const Bucket& b : buckets_) out.push_back(b.buffer);
  out.insert(out.end(), shard_grads_.begin(), shard_grads_.end());
  return out;
}

void Reducer::start_param_gather() {
  TANDEM_CHECK(options_.zero_stage > 0, "Reducer: the parameters' all-gather is ZeRO's (zero_stage 1 or 2)");
  wait_params();  // a previous step's, if no forward came between
  NoGradGuard no_grad;
  for (size_t b = buckets_.size(); b-- > 0;) {
    Tensor buffer = buckets_[b].buffer;  // stage 1: the bucket
    if (options_.zero_stage == 2) {
      const size_t s = pool_slot_[b];
      while (pool_user_[s] >= 0) finish_gather();  // the gather kPool before this one
      buffer = pool_[s].narrow0(0, numels_[b]);
      pool_user_[s] = static_cast<int64_t>(b);
    }
    // This rank's chunk, whole: every parameter in it, whether or not the optimizer holds it.
    const auto [lo, hi] = shard_range(b);
    for (size_t i : buckets_[b].params) {
      const int64_t begin = offsets_[i];
      const int64_t a = std::max(lo, begin), z = std::min(hi, begin + params_[i].numel());
      if (a < z) buffer.narrow0(a, z - a).copy_(params_[i].detach().view({-1}).narrow0(a - begin, z - a));
    }
    gathers_.push_back({b, buffer, comm_->allgather_chunks(buffer.data_ptr(), buffer.numel(), buffer.dtype())});
  }
}

void Reducer::finish_gather() {
  NoGradGuard no_grad;
  Gather g = std::move(gathers_.front());
  gathers_.pop_front();
  g.work->wait();
  for (size_t i : buckets_[g.bucket].params)
    params_[i].detach().view({-1}).copy_(g.buffer.narrow0(offsets_[i], params_[i].numel()));
  if (options_.zero_stage == 2) pool_user_[pool_slot_[g.bucket]] = -1;
  if (options_.zero_stage == 1 && zero_shards_after_gather_) shard_grads_[g.bucket].zero_();
}

void Reducer::wait_params() {
  while (!gathers_.empty()) finish_gather();
  zero_shards_after_gather_ = false;
}

void Reducer::zero_shard_grads() {
  if (options_.zero_stage == 1 && !gathers_.empty()) {
    zero_shards_after_gather_ = true;  // what is already gathered is zeroed now, the rest on arrival
    for (size_t b = 0; b < buckets_.size(); ++b) {
      bool pending = false;
      for (const Gather& g : gathers_) pending = pending || g.bucket == b;
      if (!pending) shard_grads_[b].zero_();
    }
    return;
  }
  for (Tensor& g : shard_grads_) g.zero_();
}

std::pair<int64_t, int64_t> Reducer::shard_range(size_t b) const {
  const int n = comm_->size(), c = comm::Communicator::owned_chunk(comm_->rank(), n);
  const int64_t count = numels_.at(b);
  return {comm::Communicator::chunk_begin(count, n, c), comm::Communicator::chunk_begin(count, n, c + 1)};
}

}  // namespace tandem::nn::parallel
