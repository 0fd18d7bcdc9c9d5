// DataParallel: replica upkeep, scatter, per-device forward, gather, and the gather node whose
// backward runs the replicas' backward passes concurrently and sums their gradients over the group
// (the in-process ring for host devices, an NCCL clique for cuda devices).
#include "nn/parallel/data_parallel.h"

#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "nn/parallel/coalesce.h"
#include "nn/parallel/device_workers.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/device_query.h"
#include "runtime/tensor_impl.h"

namespace tandem::nn::parallel {

namespace {

std::vector<Tensor> grad_params(const Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

// The gathered outputs' grad_fn (one node for all of them: each replica runs one backward over
// all its outputs). Holds the replicas' outputs (and so their graphs) until released.
class GatherNode final : public Node {
 public:
  // outs[k][i]: replica k's output i (undefined for a replica that got no rows).
  GatherNode(std::vector<TensorMeta> out_meta, std::vector<std::vector<Tensor>> outs,
             std::vector<std::pair<int64_t, int64_t>> ranges, std::vector<Device> devices,
             std::vector<std::shared_ptr<Module>> replicas, std::vector<std::shared_ptr<comm::Communicator>> group,
             std::shared_ptr<DeviceWorkers> workers)
      : Node("DataParallelGather", {}, {}, std::move(out_meta)),
        outs_(std::move(outs)),
        ranges_(std::move(ranges)),
        devices_(std::move(devices)),
        replicas_(std::move(replicas)),
        group_(std::move(group)),
        workers_(std::move(workers)) {}

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    TANDEM_CHECK(!outs_.empty(), "DataParallel: backward through the gathered output a second time; pass "
                 "retain_graph=true to the first backward");
    // 1. Every replica's backward on its own thread, from its rows of each output's gradient
    // ([B, ...] on devices[0]); the graphs are kept: the engine may retain ours.
    workers_->run([&](size_t k) {
      std::vector<Tensor> roots, root_grads;
      for (size_t i = 0; i < outs_[k].size(); ++i) {
        const Tensor& o = outs_[k][i];
        if (!o.defined() || !o.requires_grad() || !grads[i].defined()) continue;
        roots.push_back(o);
        root_grads.push_back(grads[i].narrow0(ranges_[k].first, ranges_[k].second).to(devices_[k]));
      }
      if (!roots.empty()) run_backward(roots, root_grads, /*retain_graph=*/true);
    });
    // 2. Sum the gradients over the replicas; a replica without data contributes zeros.
    workers_->run([&](size_t k) {
      NoGradGuard no_grad;
      std::vector<Tensor> grads_k;
      for (Tensor& p : grad_params(*replicas_[k])) {
        if (!p.grad().defined()) p.set_grad(Tensor::zeros(p.shape(), p.dtype(), p.device()));
        grads_k.push_back(p.grad());
      }
      allreduce_coalesced(*group_[k], grads_k, comm::ReduceOp::Sum);
    });
    return {};
  }
  void release() override { outs_.clear(); }

 private:
  std::vector<std::vector<Tensor>> outs_;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
  std::vector<Device> devices_;
  std::vector<std::shared_ptr<Module>> replicas_;
  std::vector<std::shared_ptr<comm::Communicator>> group_;
  std::shared_ptr<DeviceWorkers> workers_;
};

}  // namespace

std::vector<Device> parse_devices(const std::string& list) {
  std::vector<Device> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(Device::parse(item));
  TANDEM_CHECK(!out.empty(), "parse_devices: no device in '{}' (expected e.g. cpu:0,cpu:1)", list);
  return out;
}

std::vector<std::pair<int64_t, int64_t>> DataParallel::split_sizes(int64_t batch, size_t n) {
  std::vector<std::pair<int64_t, int64_t>> r(n, {batch, 0});
  const int64_t chunk = (batch + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
  for (size_t k = 0; k < n; ++k) {
    const int64_t start = std::min<int64_t>(batch, static_cast<int64_t>(k) * chunk);
    r[k] = {start, std::min<int64_t>(chunk, batch - start)};
  }
  return r;
}

DataParallel::DataParallel(std::shared_ptr<Module> module, std::vector<Device> devices)
    : devices_(std::move(devices)) {
  TANDEM_CHECK(module != nullptr, "DataParallel: no module given");
  TANDEM_CHECK(!devices_.empty(), "DataParallel: no devices given");
  const bool on_host = devices_[0].is_host_addressable();
  for (const Device& d : devices_)
    TANDEM_CHECK(d.is_host_addressable() == on_host,
                 "DataParallel: devices {} and {} are of different kinds; list only cuda devices (reduced over "
                 "NCCL) or only host devices, cpu:k / sim:k (reduced over the in-process ring)",
                 devices_[0].str(), d.str());
  for (size_t i = 0; i < devices_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      TANDEM_CHECK(devices_[i] != devices_[j], "DataParallel: device {} is listed twice", devices_[i].str());
  if (!on_host) {
    // Before anything touches a device: a clear error for a GPU that is not there (or a build without CUDA).
    const int count = cuda::device_count();
    for (const Device& d : devices_)
      TANDEM_CHECK_KIND(NotSupported, d.index >= 0 && d.index < count,
                        "DataParallel: device {} does not exist: this process sees {} CUDA device{}{}", d.str(), count,
                        count == 1 ? "" : "s",
                        count > 0 ? fmt::format(" (cuda:0..cuda:{})", count - 1) : " (" + cuda::describe() + ")");
    group_ = comm::make_nccl_local_group(devices_);
  }
  for (auto& [name, t] : module->state_dict())
    TANDEM_CHECK(!t.defined() || t.device() == devices_[0],
                 "DataParallel: the module must live on devices[0] ({}), but '{}' is on {}; call "
                 "module->to({}) first",
                 devices_[0].str(), name, t.device().str(), devices_[0].str());
  register_module("module", module);
  training_ = module->is_training();
  replicas_.push_back(module);
  for (size_t k = 1; k < devices_.size(); ++k) {
    auto r = module->clone();
    r->to(devices_[k]);
    replicas_.push_back(std::move(r));
  }
  if (on_host) group_ = comm::make_local_group(static_cast<int>(devices_.size()));
  workers_ = std::make_shared<DeviceWorkers>(devices_.size());
}

DataParallel::~DataParallel() = default;

std::shared_ptr<Module> DataParallel::clone() const {
  TANDEM_FAIL(NotSupported, "DataParallel cannot be cloned: wrap module()->clone() in a new DataParallel");
}

void DataParallel::sync_replicas() {
  const bool training = replicas_[0]->is_training();
  workers_->run([&](size_t k) {
    std::vector<Tensor> state;
    for (auto& [n, t] : replicas_[k]->state_dict())
      if (t.defined()) state.push_back(t);
    broadcast_coalesced(*group_[k], state, 0);
    if (k == 0) return;
    replicas_[k]->train(training);
    // A replica's gradients hold only the coming backward's contribution.
    for (Tensor& p : replicas_[k]->parameters()) p.set_grad(Tensor());
  });
}

Tensor DataParallel::forward(const Tensor& x) {
  std::vector<Tensor> out = forward_many({x});
  TANDEM_CHECK(out.size() == 1,
               "DataParallel: forward(x) returns one tensor, but the module's forward_many returned {}; call "
               "forward_many", out.size());
  return out[0];
}

std::vector<Tensor> DataParallel::forward_many(const std::vector<Tensor>& inputs_in) {
  TANDEM_CHECK(!inputs_in.empty(), "DataParallel: forward_many got no inputs");
  for (size_t i = 0; i < inputs_in.size(); ++i) {
    const Tensor& x = inputs_in[i];
    TANDEM_CHECK(x.defined() && x.dim() >= 1, "DataParallel: input {} must have a batch dimension{}", i,
                 x.defined() ? ", got shape " + shape_str(x.shape()) : std::string(" (it is undefined)"));
    TANDEM_CHECK(x.size(0) == inputs_in[0].size(0),
                 "DataParallel: input {} has {} rows but input 0 has {}; every input is split along dim 0 into the "
                 "same rows per device", i, x.size(0), inputs_in[0].size(0));
  }
  const size_t n = replicas_.size();
  if (n == 1) {  // the inputs themselves when they are on devices[0]
    std::vector<Tensor> moved;
    for (const Tensor& x : inputs_in) moved.push_back(x.to(devices_[0]));
    return replicas_[0]->forward_many(moved);
  }
  sync_replicas();
  const int64_t batch = inputs_in[0].size(0);
  const auto ranges = split_sizes(batch, n);
  std::vector<Tensor> inputs;
  for (const Tensor& x : inputs_in) inputs.push_back(x.detach());
  const bool grad_mode = GradMode::is_enabled();
  const std::optional<DType> autocast = autocast_dtype();

  std::vector<std::vector<Tensor>> outs(n);  // [replica][output]
  workers_->run([&](size_t k) {
    if (ranges[k].second == 0 && k > 0) return;  // fewer rows than devices
    const bool prev = GradMode::is_enabled();
    GradMode::set_enabled(grad_mode);
    std::optional<AutocastGuard> ac;
    if (autocast) ac.emplace(*autocast);
    try {
      std::vector<Tensor> shard;
      for (const Tensor& x : inputs) shard.push_back(x.narrow0(ranges[k].first, ranges[k].second).to(devices_[k]));
      outs[k] = replicas_[k]->forward_many(shard);
    } catch (...) {
      GradMode::set_enabled(prev);
      throw;
    }
    GradMode::set_enabled(prev);
  });

  // Gather each output on devices[0].
  const std::vector<Tensor>& first = outs[0];
  std::vector<Tensor> gathered;
  std::vector<TensorMeta> metas;
  bool any_grad = false;
  for (size_t i = 0; i < first.size(); ++i) {
    const Tensor& f = first[i];
    TANDEM_CHECK(f.defined() && f.dim() >= 1,
                 "DataParallel: the module's output {} must have a batch dimension, got {}", i,
                 f.defined() ? shape_str(f.shape()) : std::string("an undefined tensor"));
    Shape shape = f.shape();
    shape[0] = batch;
    Tensor out = Tensor::empty(shape, f.dtype(), devices_[0]);
    for (size_t k = 0; k < n; ++k) {
      if (outs[k].empty()) continue;
      TANDEM_CHECK(outs[k].size() == first.size(), "DataParallel: replica {} returned {} outputs, replica 0 {}", k,
                   outs[k].size(), first.size());
      const Tensor& o = outs[k][i];
      TANDEM_CHECK(o.defined() && o.dim() == f.dim() && o.size(0) == ranges[k].second && o.dtype() == f.dtype(),
                   "DataParallel: replica {} returned {} {} as output {} for {} rows; replica 0 returned {} {}", k,
                   o.defined() ? shape_str(o.shape()) : "undefined", o.defined() ? dtype_name(o.dtype()) : "", i,
                   ranges[k].second, shape_str(f.shape()), dtype_name(f.dtype()));
      if (ranges[k].second > 0) out.narrow0(ranges[k].first, ranges[k].second).copy_(o);
      any_grad = any_grad || o.requires_grad();
    }
    metas.push_back(TensorMeta{out.shape(), out.dtype(), out.device()});
    gathered.push_back(std::move(out));
  }
  if (grad_mode && any_grad) {
    auto node = std::make_shared<GatherNode>(metas, outs, ranges, devices_, replicas_, group_, workers_);
    for (size_t i = 0; i < gathered.size(); ++i) {
      TensorImpl* impl = gathered[i].impl();
      impl->requires_grad = true;
      impl->grad_fn = node;
      impl->output_nr = static_cast<int>(i);
    }
  }
  return gathered;
}

}  // namespace tandem::nn::parallel
