// The rank-ordered gradient norm: per-rank partial sums over the buckets' chunks, added in rank order.
#include "nn/parallel/ranked_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/optim/clip_grad.h"
#include "nn/parallel/reducer.h"
#include "runtime/backend/optim.h"

namespace tandem::nn::parallel {

namespace {

// The gradient slices of chunk `c` of every bucket, in bucket order: from the parameters' .grad
// (stage 0) or, for this rank's own chunk under ZeRO, from the shard gradients.
std::vector<Tensor> chunk_slices(const Reducer& reducer, int c, int n, bool from_shards) {
  std::vector<Tensor> out;
  const auto& buckets = reducer.bucket_indices();
  const std::vector<Tensor>& params = reducer.params();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t count = reducer.bucket_numel(b);
    const int64_t lo = comm::Communicator::chunk_begin(count, n, c), hi = comm::Communicator::chunk_begin(count, n, c + 1);
    // Cut at the parameters in both cases: the f64 sums of the slices are added one by one, so the
    // slices must be the same ones (one sum over a whole chunk would round differently).
    for (size_t i : buckets[b]) {
      const int64_t begin = reducer.slot_offset(i);
      const int64_t a = std::max(lo, begin), z = std::min(hi, begin + params[i].numel());
      if (a >= z) continue;
      if (from_shards) {
        out.push_back(reducer.shard_grad(b).narrow0(a - lo, z - a));
      } else if (Tensor g = params[i].grad(); g.defined()) {
        out.push_back(g.view({-1}).narrow0(a - begin, z - a));
      }
    }
  }
  return out;
}

// One rank's partial: the f64 sums of squares of its slices, added in order.
double partial(const std::vector<Tensor>& slices) {
  double s = 0.0;
  for (const Tensor& t : slices) s += kernels::optim_sum_squares(t.device())(t);
  return s;
}

}  // namespace

double ranked_grad_norm(DistributedDataParallel& ddp) {
  const Reducer& reducer = ddp.reducer();
  comm::Communicator& comm = ddp.communicator();
  const int n = comm.size();
  std::vector<double> partials(static_cast<size_t>(n), 0.0);
  if (reducer.zero_stage() == 0) {
    for (int r = 0; r < n; ++r) partials[size_t(r)] = partial(chunk_slices(reducer, comm::Communicator::owned_chunk(r, n), n, false));
  } else {
    const int c = comm::Communicator::owned_chunk(comm.rank(), n);
    Tensor mine = Tensor::from_vector(std::vector<double>{partial(chunk_slices(reducer, c, n, true))}, {1}, DType::f64,
                                      comm.device());
    Tensor all = Tensor::empty({n}, DType::f64, comm.device());
    comm.allgather(mine, all)->wait();
    partials = all.to_vector<double>();
  }
  double total = 0.0;
  for (double p : partials) total += p;  // rank order
  return std::sqrt(total);
}

double clip_grad_norm_ranked(DistributedDataParallel& ddp, double max_norm) {
  TANDEM_CHECK(max_norm > 0.0, "clip_grad_norm: max_norm {} must be > 0", max_norm);
  const double total = ranked_grad_norm(ddp);
  // What holds the gradients: the parameters' .grad at stage 0, this rank's shard under ZeRO.
  const Reducer& reducer = ddp.reducer();
  std::vector<Tensor> grads;
  if (reducer.zero_stage() == 0) {
    for (const Tensor& p : reducer.params()) grads.push_back(p.grad());
  } else {
    for (size_t b = 0; b < reducer.bucket_indices().size(); ++b) grads.push_back(reducer.shard_grad(b));
  }
  return clip_to_norm(grads, total, max_norm);
}

}  // namespace tandem::nn::parallel
