// Reducer: the gradient side of DistributedDataParallel. Parameters are packed into buckets (reverse
// registration order, a small first bucket, then bucket_cap_mb; one dtype/device per bucket, as
// PyTorch's). Each parameter's grad-ready hook copies its gradient into its bucket slot
// (or, with gradient_as_bucket_view, makes the gradient that slot); when a bucket's last gradient
// arrives its all-reduce (average) is launched asynchronously, strictly in bucket order so that
// every rank issues the same collectives in the same order, and communication overlaps the rest of
// backward. When the last bucket is launched the reducer waits for all of them and writes the
// averaged gradients back. ZeRO (zero_stage 1, 2): reduce-scatters instead, keeps this rank's chunk
// (stage 2: buckets reduced in a pool of a few buffers), and carries the parameters' all-gather
// after ZeroOptimizer's step (start_param_gather / wait_params).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/parallel/ddp_options.h"
#include "runtime/tensor.h"

namespace tandem::nn::parallel {


// Groups `tensors` (indices in `order`, e.g. reverse registration order) into buckets: one dtype and
// device per bucket; a bucket closes once it reaches its byte limit (limits[0] for the first bucket
// of a dtype/device, then limits.back()), so it may pass the limit by its last tensor, as PyTorch's
// (a large tensor is not put in a bucket of its own). Buckets come out ordered by their first
// tensor's position in `order`: the same on every rank given the same shapes.
std::vector<std::vector<size_t>> compute_bucket_assignment(const std::vector<Tensor>& tensors,
                                                           const std::vector<size_t>& order,
                                                           const std::vector<size_t>& byte_limits);

// What one iteration of communication cost (seconds), for benchmarks.
struct ReducerStats {
  int64_t iterations = 0;        // reductions finished
  double wait_s = 0;             // last iteration: blocked waiting for all-reduces after the last launch
  double finalize_s = 0;         // last iteration: wait + copying gradients back
  double first_launch_to_done_s = 0;  // last iteration: first bucket launched .. all reduced
  int64_t bytes = 0;             // bytes all-reduced per iteration
  // Last iteration: buckets launched while some gradients were still to come (overlap).
  int64_t launched_early = 0;
};

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  // `params` are the parameters that require grad, `names` their names (for errors).
  static std::shared_ptr<Reducer> create(std::vector<Tensor> params, std::vector<std::string> names,
                                         std::shared_ptr<comm::Communicator> comm, const DDPOptions& options);
  ~Reducer();  // waits for collectives still in flight (their buffers live here)
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // At a forward that will be followed by a synchronised backward: checks that the previous
  // reduction finished, resets the per-iteration state and expects hooks. `outputs` are the
  // forward's outputs (searched for used parameters with find_unused_parameters / static_graph).
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  // A forward under no_sync() or without grad: hooks of the coming backward are ignored.
  void expect_no_hooks();
  // Throws the unused-parameter error if a backward started but did not reduce every bucket.
  void check_finished() const;
  // DistributedDataParallel::complete_failed_step: this rank's backward of the iteration failed or
  // never ran (`prepared`: prepare_for_backward ran for it). Issues what a whole iteration issues and
  // this rank has not yet: the used-parameter count (as zeros: this rank used nothing), then every
  // bucket not yet launched, in order, with whatever gradients are at hand; then finalizes.
  void complete_failed_iteration(bool prepared);

  const std::vector<std::vector<size_t>>& bucket_indices() const { return bucket_params_; }
  // Bytes of each bucket.
  std::vector<int64_t> bucket_bytes() const;
  const ReducerStats& stats() const { return stats_; }
  // Benchmarks only (the cost of the rest of DDP without communication): every copy and wait
  // happens, the all-reduce itself is skipped, so gradients stay local.
  void skip_allreduce_for_benchmarks(bool skip) { skip_allreduce_ = skip; }
  bool finalized() const { return finalized_; }
  // The bucket slot of parameter i (flat), for tests of gradient_as_bucket_view.
  Tensor bucket_view(size_t param_index) const;

  // ZeRO (options.zero_stage > 0; nn/parallel/zero_optimizer.h). A bucket is reduce-scattered:
  // this rank holds its chunk Communicator::owned_chunk of the averaged bucket, bitwise the
  // all-reduce's, and the model's .grad is not the averaged gradient (stage 1: this rank's own, as
  // accumulated; stage 2: freed once copied into its bucket).
  int zero_stage() const { return options_.zero_stage; }
  const std::vector<Tensor>& params() const { return params_; }
  int64_t slot_offset(size_t param_index) const { return offsets_.at(param_index); }
  int64_t bucket_numel(size_t b) const { return numels_.at(b); }
  DType bucket_dtype(size_t b) const { return params_.at(bucket_params_.at(b).front()).dtype(); }
  // This rank's chunk of bucket b: elements [first, second) of the bucket.
  std::pair<int64_t, int64_t> shard_range(size_t b) const;
  // The averaged gradient of bucket b's shard after a backward ([shard_range size]): stage 1 a view
  // of the bucket, stage 2 a buffer of its own (the bucket is freed until the next backward).
  Tensor shard_grad(size_t b) const { return shard_grads_.at(b); }
  // Whether stage 0 would hold a .grad for parameter i after the last backward: it had one before
  // (a parameter's .grad, once made, is zeroed in place, not dropped) or some rank used it. ZeRO
  // steps only these, as stage 0's optimizer skips a parameter without a gradient.
  bool has_grad(size_t i) const { return has_grad_.at(i) != 0; }
  // Every buffer that holds gradient values: the buckets (stage 2: the pool) and the shards'.
  std::vector<Tensor> gradient_buffers() const;
  // Stage 2: buckets of one dtype and device in flight at once, each in a pool buffer of its own
  // (reused by the bucket kPool later), so that a rank never holds every bucket during backward.
  static constexpr size_t kPool = 3;
  int64_t pool_bytes() const;  // stage 2: the pool's buffers (0 otherwise)

  // ZeRO, after the shard's update (ZeroOptimizer::step): each bucket's chunk of the updated
  // parameters copied into a bucket-sized buffer (stage 1: the bucket, its gradients spent; stage 2:
  // its pool buffer) and all-gathered asynchronously, the last bucket first (the forward uses the
  // first parameters first). wait_params waits for each in turn and copies it into the parameters;
  // DistributedDataParallel::sync_params (its forward, and whatever reads the parameters before the
  // next forward) calls it. At stage 2 a gather waits for the one kPool before it (the pool).
  void start_param_gather();
  void wait_params();
  bool params_pending() const { return !gathers_.empty(); }
  // Zeroes the shards' gradients (ZeroOptimizer::zero_grad); at stage 1, where they are views of
  // buckets that an all-gather still fills, each once its gather is waited for.
  void zero_shard_grads();

 private:
  struct Bucket {
    Tensor buffer;  // flat [numel], dtype and device of its parameters
    std::vector<size_t> params;
    int64_t pending = 0;  // gradients still to arrive this iteration
    comm::WorkPtr work;
    double launched_us = -1, done_us = -1;  // --trace: launch, first seen complete (runtime/trace.h)
  };
  struct Gather {  // a parameter all-gather in flight
    size_t bucket;
    Tensor buffer;
    comm::WorkPtr work;
  };
  Reducer(std::vector<Tensor> params, std::vector<std::string> names, std::shared_ptr<comm::Communicator> comm,
          const DDPOptions& options);
  void install_hooks();
  // The bucket buffers and the slots over them (stages 0 and 1: for the reducer's life).
  void allocate_buckets();
  // Stage 2: the pool, kPool buffers per dtype and device, each as large as the largest bucket it serves.
  void allocate_pool();
  // Stage 2: bucket b takes its pool buffer, after the bucket that had it is finished.
  void take_pool_buffer(size_t b);
  // Stage 2: waits for bucket b's reduce-scatter, copies its shard out and gives its buffer back.
  void finish_reduce_scatter(size_t b);
  void release_pool();  // stage 2: every bucket without a buffer (no copy), before a new backward
  void finish_gather();  // the oldest parameter all-gather: waits, copies into the parameters
  void set_slots(size_t b);
  // A zeroed buffer for a bucket like `like`: make_buffer memory where the communicator can reach it.
  Tensor bucket_memory(int64_t numel, const Tensor& like) const;
  void on_grad_ready(size_t index);
  // Puts parameter `index`'s gradient (or zeros, when it has none) into its slot; counts it ready.
  void mark_ready(size_t index);
  void launch_ready_buckets();
  void finalize_backward();
  void drain() noexcept;  // waits for any launched work, ignoring errors
  void poll_completed_for_trace();  // notes buckets whose all-reduce has finished (tracing only)
  std::vector<bool> find_used(const std::vector<Tensor>& outputs) const;
  std::string names_of(const std::vector<size_t>& indices) const;

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::shared_ptr<comm::Communicator> comm_;
  const DDPOptions& options_;

  std::vector<Bucket> buckets_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<size_t> bucket_of_;   // param -> bucket
  std::vector<Tensor> slots_;       // param -> flat view into its bucket
  std::vector<Tensor> grad_views_;  // param -> slot viewed with the param's shape
  std::vector<int64_t> offsets_;    // param -> first element of its slot in its bucket
  std::vector<int64_t> numels_;     // bucket -> elements
  std::vector<Tensor> shard_grads_;  // ZeRO: bucket -> this rank's averaged chunk
  std::vector<Tensor> pool_;          // stage 2: the buffers buckets are reduced and gathered in
  std::vector<size_t> pool_slot_;     // stage 2: bucket -> its buffer in pool_
  std::vector<int64_t> pool_user_;    // stage 2: pool buffer -> the bucket in it (-1: free)
  std::deque<Gather> gathers_;        // ZeRO: parameter all-gathers in flight, in issue order
  bool zero_shards_after_gather_ = false;

  // Per iteration.
  bool expect_hooks_ = false;
  bool backward_started_ = false;  // some hook fired since prepare
  bool finalized_ = false;
  size_t next_bucket_ = 0;
  size_t ready_count_ = 0;
  std::vector<char> ready_;
  std::vector<char> has_grad_;          // has_grad()
  std::vector<char> locally_used_;      // find_unused / static_graph: in this iteration's graph
  std::vector<char> used_unsynced_;     // got a gradient under no_sync() since the last synced step
  Tensor used_counts_;                  // i32 [P], all-reduced: how many ranks used each param
  comm::WorkPtr used_work_;
  bool usage_known_ = false;            // static_graph: the first iteration recorded the used set
  std::vector<char> static_used_;
  double first_launch_time_ = 0;

  ReducerStats stats_;
  bool skip_allreduce_ = false;
};

}  // namespace tandem::nn::parallel
