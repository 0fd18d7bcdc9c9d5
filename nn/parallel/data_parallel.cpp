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
#include "runtime/device_query.h"

namespace tandem::nn::parallel {

namespace {

std::vector<Tensor> grad_params(const Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

// The gathered output's grad_fn. Holds the replicas' outputs (and so their graphs) until released.
class GatherNode final : public Node {
 public:
  GatherNode(TensorMeta out_meta, std::vector<Tensor> outs, std::vector<std::pair<int64_t, int64_t>> ranges,
             std::vector<Device> devices, std::vector<std::shared_ptr<Module>> replicas,
             std::vector<std::shared_ptr<comm::Communicator>> group, std::shared_ptr<DeviceWorkers> workers)
      : Node("DataParallelGather", {}, {}, {std::move(out_meta)}),
        outs_(std::move(outs)),
        ranges_(std::move(ranges)),
        devices_(std::move(devices)),
        replicas_(std::move(replicas)),
        group_(std::move(group)),
        workers_(std::move(workers)) {}

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    TANDEM_CHECK(!outs_.empty(), "DataParallel: backward through the gathered output a second time; pass "
                 "retain_graph=true to the first backward");
    const Tensor& g = grads[0];  // [B, ...] on devices[0]
    // 1. Every replica's backward on its own thread (the graphs are kept: the engine may retain ours).
    workers_->run([&](size_t k) {
      if (!outs_[k].defined() || !outs_[k].requires_grad()) return;
      Tensor gk = g.narrow0(ranges_[k].first, ranges_[k].second).to(devices_[k]);
      run_backward({outs_[k]}, {gk}, /*retain_graph=*/true);
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
  std::vector<Tensor> outs_;
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

Tensor DataParallel::forward(const Tensor& x_in) {
  TANDEM_CHECK(x_in.defined() && x_in.dim() >= 1, "DataParallel: the input must have a batch dimension");
  const size_t n = replicas_.size();
  if (n == 1) return replicas_[0]->forward(x_in.to(devices_[0]));  // x itself when it is on devices[0]
  sync_replicas();
  const int64_t batch = x_in.size(0);
  const auto ranges = split_sizes(batch, n);
  const Tensor x = x_in.detach();
  const bool grad_mode = GradMode::is_enabled();
  const std::optional<DType> autocast = autocast_dtype();

  std::vector<Tensor> outs(n);
  workers_->run([&](size_t k) {
    if (ranges[k].second == 0 && k > 0) return;  // fewer rows than devices
    const bool prev = GradMode::is_enabled();
    GradMode::set_enabled(grad_mode);
    std::optional<AutocastGuard> ac;
    if (autocast) ac.emplace(*autocast);
    try {
      outs[k] = replicas_[k]->forward(x.narrow0(ranges[k].first, ranges[k].second).to(devices_[k]));
    } catch (...) {
      GradMode::set_enabled(prev);
      throw;
    }
    GradMode::set_enabled(prev);
  });

  // Gather on devices[0].
  const Tensor& first = outs[0];
  TANDEM_CHECK(first.dim() >= 1, "DataParallel: the module's output must have a batch dimension, got {}",
               shape_str(first.shape()));
  Shape shape = first.shape();
  shape[0] = batch;
  Tensor out = Tensor::empty(shape, first.dtype(), devices_[0]);
  bool any_grad = false;
  for (size_t k = 0; k < n; ++k) {
    if (!outs[k].defined()) continue;
    TANDEM_CHECK(outs[k].dim() == first.dim() && outs[k].size(0) == ranges[k].second && outs[k].dtype() == first.dtype(),
                 "DataParallel: replica {} returned {} {} for {} rows; replica 0 returned {} {}", k,
                 shape_str(outs[k].shape()), dtype_name(outs[k].dtype()), ranges[k].second, shape_str(first.shape()),
                 dtype_name(first.dtype()));
    if (ranges[k].second > 0) out.narrow0(ranges[k].first, ranges[k].second).copy_(outs[k]);
    any_grad = any_grad || outs[k].requires_grad();
  }
  if (grad_mode && any_grad) {
    auto node = std::make_shared<GatherNode>(TensorMeta{out.shape(), out.dtype(), out.device()}, outs, ranges,
                                             devices_, replicas_, group_, workers_);
    TensorImpl* impl = out.impl();
    impl->requires_grad = true;
    impl->grad_fn = std::move(node);
    impl->output_nr = 0;
  }
  return out;
}

}  // namespace tandem::nn::parallel
