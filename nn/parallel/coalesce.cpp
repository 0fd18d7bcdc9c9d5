// Coalesced broadcast and all-reduce: pack per (dtype, device) group, one collective, unpack.
#include "nn/parallel/coalesce.h"

#include "runtime/autograd.h"

namespace tandem::nn::parallel {

std::vector<TensorGroup> group_by_dtype_device(const std::vector<Tensor>& tensors) {
  std::vector<TensorGroup> groups;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TensorGroup* g = nullptr;
    for (auto& cand : groups)
      if (cand.dtype == t.dtype() && cand.device == t.device()) g = &cand;
    if (!g) {
      groups.push_back({t.dtype(), t.device(), {}, 0});
      g = &groups.back();
    }
    g->members.push_back(i);
    g->numel += t.numel();
  }
  return groups;
}

namespace {

// Runs `collective` on a flat buffer holding the group's tensors, copying in before (when pack)
// and out after (when unpack).
template <class F>
void through_flat(const std::vector<Tensor>& tensors, const TensorGroup& g, bool pack, bool unpack, F&& collective) {
  NoGradGuard no_grad;
  Tensor flat = Tensor::empty({g.numel}, g.dtype, g.device);
  int64_t off = 0;
  for (size_t i : g.members) {
    const Tensor& t = tensors[i];
    if (pack && t.numel() > 0) flat.narrow0(off, t.numel()).copy_(t);
    off += t.numel();
  }
  collective(flat);
  if (!unpack) return;
  off = 0;
  for (size_t i : g.members) {
    Tensor t = tensors[i];
    if (t.numel() > 0) t.copy_(flat.narrow0(off, t.numel()));
    off += t.numel();
  }
}

}  // namespace

void broadcast_coalesced(comm::Communicator& comm, const std::vector<Tensor>& tensors, int root) {
  const bool is_root = comm.rank() == root;
  for (const TensorGroup& g : group_by_dtype_device(tensors)) {
    if (g.numel == 0) continue;
    through_flat(tensors, g, /*pack=*/is_root, /*unpack=*/!is_root, [&](Tensor& flat) {
      comm.broadcast(flat.data_ptr(), flat.numel(), flat.dtype(), root)->wait();
    });
  }
}

void allreduce_coalesced(comm::Communicator& comm, const std::vector<Tensor>& tensors, comm::ReduceOp op) {
  for (const TensorGroup& g : group_by_dtype_device(tensors)) {
    if (g.numel == 0) continue;
    through_flat(tensors, g, true, true, [&](Tensor& flat) {
      comm.allreduce(flat.data_ptr(), flat.numel(), flat.dtype(), op)->wait();
    });
  }
}

}  // namespace tandem::nn::parallel
