// DataParallel: one process driving several devices (cpu:0..k, sim:0..k, or cuda:0..k on GPU machines).
// Keeps one replica of the module per device (replica 0 is the module itself), and per forward:
// brings the replicas up to date with replica 0 (broadcast over the group), splits the batch along
// dim 0, runs each replica on its device's own thread, and gathers the outputs on the first device.
// In backward, the replicas' backward passes run concurrently on their threads, then their
// gradients are summed over the group, so that the module's .grad holds the gradient of the whole
// batch, as single-device training would. The group is comm::make_local_group (the in-process ring
// over host memory) for cpu/sim devices and comm::make_nccl_local_group (one NCCL clique, ordered
// after each device's compute stream) for cuda devices; each member is driven by its device's thread.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"

namespace tandem::nn::parallel {

class DeviceWorkers;

class DataParallel final : public Module {
 public:
  // `module` must live on devices[0]; devices must be distinct and either all cuda or all host
  // (cpu/sim); a cuda device must exist (NotSupportedError naming it and the GPU count otherwise).
  DataParallel(std::shared_ptr<Module> module, std::vector<Device> devices);
  ~DataParallel() override;

  // x [B, ...] anywhere; returns [B, ...] on devices[0]. Gradients flow to the parameters, not to x.
  Tensor forward(const Tensor& x) override;
  // Every input [B, ...] anywhere, split into the same rows per device; returns each output
  // [B, ...] on devices[0] (every output of the module must have the batch as its dim 0).
  std::vector<Tensor> forward_many(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "DataParallel"; }
  std::shared_ptr<Module> clone() const override;

  Module& module() { return *replicas_[0]; }
  const std::vector<Device>& devices() const { return devices_; }
  const std::shared_ptr<Module>& replica(size_t k) const { return replicas_.at(k); }
  size_t num_replicas() const { return replicas_.size(); }

  // Row ranges [start, start+len) of a batch of B rows given to each replica (torch.chunk's split:
  // ceil(B / n) rows each, the last ones shorter or empty).
  static std::vector<std::pair<int64_t, int64_t>> split_sizes(int64_t batch, size_t n);

  // Copies replica 0's parameters and buffers into the others (forward does it first; call it to
  // have identical replicas right after optimizer.step()).
  void sync_replicas();

 private:

  std::vector<Device> devices_;
  std::vector<std::shared_ptr<Module>> replicas_;
  std::vector<std::shared_ptr<comm::Communicator>> group_;
  std::shared_ptr<DeviceWorkers> workers_;  // shared with the gather nodes of live graphs
};

// Parses "cpu:0,cpu:1" (or "cuda:0,cuda:1") into devices.
std::vector<Device> parse_devices(const std::string& list);

}  // namespace tandem::nn::parallel
