// DistributedDataParallel: the cross-rank parameter check, the initial and per-forward broadcasts,
// and the forward that arms the Reducer.
#include "nn/parallel/ddp.h"

#include <algorithm>
#include <unordered_set>

#include "nn/parallel/coalesce.h"
#include "nn/parallel/reducer.h"
#include "runtime/autograd.h"

namespace tandem::nn::parallel {

namespace {

// One fixed-size record per parameter, so that every rank's list can be all-gathered and compared.
constexpr int kMaxDims = 6;
constexpr int kRecord = 4 + kMaxDims;  // dtype, requires_grad, ndim, numel, dims...

std::vector<int64_t> describe(const Tensor& t) {
  std::vector<int64_t> r(kRecord, 0);
  r[0] = static_cast<int64_t>(t.dtype());
  r[1] = t.requires_grad() ? 1 : 0;
  r[2] = t.dim();
  r[3] = t.numel();
  for (int64_t d = 0; d < std::min<int64_t>(t.dim(), kMaxDims); ++d) r[static_cast<size_t>(4 + d)] = t.size(d);
  return r;
}

std::string record_str(const int64_t* r) {
  if (r[0] < 0) return "no parameter";
  Shape s;
  for (int64_t d = 0; d < std::min<int64_t>(r[2], kMaxDims); ++d) s.push_back(r[4 + d]);
  std::string out = shape_str(s) + " " + dtype_name(static_cast<DType>(r[0]));
  if (r[2] > kMaxDims) out += fmt::format(" ({} dims, {} elements)", r[2], r[3]);
  if (!r[1]) out += " (requires_grad=false)";
  return out;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 std::shared_ptr<comm::Communicator> comm, DDPOptions options)
    : module_(std::move(module)), comm_(std::move(comm)), options_(options) {
  TANDEM_CHECK(module_ != nullptr, "DistributedDataParallel: no module given");
  TANDEM_CHECK(comm_ != nullptr, "DistributedDataParallel: no communicator given");
  register_module("module", module_);
  training_ = module_->is_training();

  NamedTensors params = module_->named_parameters();
  // The collectives read the parameters and the buckets where they are: a GPU communicator (nccl)
  // its own GPU's memory, a host one (mpi, local) host memory. Say so here, not in a crash inside the
  // construction broadcast.
  const Device cd = comm_->device();
  for (auto& [name, t] : params) {
    const Device pd = t.device();
    const bool reachable = cd.kind == DeviceKind::CUDA ? pd == cd : pd.is_host_addressable();
    TANDEM_CHECK(reachable,
                 "DistributedDataParallel: parameter '{}' is on {}, which the {} communicator (on {}) cannot "
                 "reach; move the module to {} before wrapping it (a GPU model needs the nccl communicator of "
                 "its GPU, a CPU model an mpi or local one)",
                 name, pd.str(), comm_->backend_name(), cd.str(), cd.kind == DeviceKind::CUDA ? cd.str() : "the CPU");
  }
  verify_same_parameters(params);

  // Every replica starts from rank 0's weights and buffers.
  {
    std::vector<Tensor> state;
    for (auto& [n, t] : params) state.push_back(t);
    for (auto& [n, t] : module_->named_buffers())
      if (t.defined()) state.push_back(t);
    broadcast_coalesced(*comm_, state, 0);
  }

  std::vector<Tensor> reduced;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [name, t] : params) {
    // A parameter shared by two modules is reduced once (its first name is used).
    if (!t.requires_grad() || !seen.insert(t.impl()).second) continue;
    if (t.name().empty()) t.set_name(name);
    reduced.push_back(t);
    reduced_names_.push_back(name);
  }
  TANDEM_CHECK(!reduced.empty(),
               "DistributedDataParallel: the module has no parameter that requires a gradient; there is nothing "
               "to synchronise");
  reducer_ = Reducer::create(std::move(reduced), reduced_names_, comm_, options_);
}

void DistributedDataParallel::verify_same_parameters(const NamedTensors& params) {
  const int world = comm_->size();
  // 1. How many parameters each rank has.
  // In the communicator's memory (a device communicator such as nccl reads no host buffers).
  const Device cd = comm_->device();
  Tensor my_count = Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(params.size())}, {1}, DType::i64, cd);
  Tensor counts = Tensor::empty({world}, DType::i64, cd);
  comm_->allgather(my_count.data_ptr(), counts.data_ptr(), 1, DType::i64)->wait();
  std::vector<int64_t> n = counts.to_vector<int64_t>();
  const int64_t max_n = *std::max_element(n.begin(), n.end());
  // 2. Every rank's records, padded to the longest list (a missing parameter reads "no parameter").
  std::vector<int64_t> mine(static_cast<size_t>(max_n * kRecord), -1);
  for (size_t i = 0; i < params.size(); ++i) {
    auto r = describe(params[i].second);
    std::copy(r.begin(), r.end(), mine.begin() + static_cast<std::ptrdiff_t>(i * kRecord));
  }
  Tensor local = Tensor::from_vector(mine, {max_n * kRecord}, DType::i64, cd);
  Tensor all = Tensor::empty({world * max_n * kRecord}, DType::i64, cd);
  if (max_n > 0) comm_->allgather(local.data_ptr(), all.data_ptr(), max_n * kRecord, DType::i64)->wait();
  std::vector<int64_t> recs = all.to_vector<int64_t>();
  auto rec = [&](int r, int64_t i) { return recs.data() + (static_cast<int64_t>(r) * max_n + i) * kRecord; };
  // Every rank sees the same records, so every rank throws the same error (none is left waiting).
  for (int64_t i = 0; i < max_n; ++i)
    for (int r = 1; r < world; ++r) {
      if (std::equal(rec(0, i), rec(0, i) + kRecord, rec(r, i))) continue;
      std::string name = i < static_cast<int64_t>(params.size()) ? params[static_cast<size_t>(i)].first : "?";
      TANDEM_FAIL(Value,
                  "DistributedDataParallel: parameter {} ('{}' on rank {}) is {} on rank 0 but {} on rank {}; "
                  "rank 0 has {} parameters, rank {} has {}. Every rank must construct the same model with the "
                  "same parameters in the same order.",
                  i, name, comm_->rank(), record_str(rec(0, i)), record_str(rec(r, i)), r, n[0], r,
                  n[static_cast<size_t>(r)]);
    }
}

std::shared_ptr<Module> DistributedDataParallel::clone() const {
  TANDEM_FAIL(NotSupported,
              "DistributedDataParallel cannot be cloned: construct one on every rank around module()->clone()");
}

void DistributedDataParallel::sync_buffers() {
  std::vector<Tensor> buffers;
  for (auto& [n, t] : module_->named_buffers())
    if (t.defined()) buffers.push_back(t);
  if (!buffers.empty()) broadcast_coalesced(*comm_, buffers, 0);
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  std::vector<Tensor> out = forward_many({x});
  TANDEM_CHECK(out.size() == 1,
               "DistributedDataParallel: forward(x) returns one tensor, but the module's forward_many returned {}; "
               "call forward_many",
               out.size());
  return out[0];
}

void DistributedDataParallel::sync_params() { reducer_->wait_params(); }

std::vector<Tensor> DistributedDataParallel::forward_many(const std::vector<Tensor>& inputs) {
  // ZeRO: the last step's parameters, all of them before the module runs. (Waiting bucket by bucket
  // where the forward first reads each would need a hook before every module's forward; the
  // modules call their children's forward directly, so there is no such place.)
  sync_params();
  reducer_->check_finished();  // the previous backward must have reduced every bucket
  // Only a forward whose backward will be reduced is collective (as PyTorch's): evaluation under
  // NoGradGuard, or accumulation under no_sync(), may run a different number of forwards per rank.
  const bool sync = GradMode::is_enabled() && require_backward_grad_sync_;
  if (sync) phase_ = SyncPhase::none;
  if (sync && options_.broadcast_buffers && comm_->size() > 1) sync_buffers();
  if (sync) phase_ = SyncPhase::buffers_synced;
  if (!sync) reducer_->expect_no_hooks();
  std::vector<Tensor> out = module_->forward_many(inputs);
  if (sync) reducer_->prepare_for_backward(out);
  if (sync) phase_ = SyncPhase::prepared;
  return out;
}

void DistributedDataParallel::complete_failed_step() {
  // A step fails before its backward completes (nothing allocates after it), so a prepared and
  // finalized reducer belongs to the previous step: this one issued nothing yet. (A failure in the
  // module's forward after this step's buffer broadcast leaves buffers_synced.)
  if (phase_ == SyncPhase::prepared && reducer_->finalized()) phase_ = SyncPhase::none;
  if (phase_ == SyncPhase::none && options_.broadcast_buffers && comm_->size() > 1) sync_buffers();
  reducer_->complete_failed_iteration(/*prepared=*/phase_ == SyncPhase::prepared);
  phase_ = SyncPhase::prepared;
}

void DistributedDataParallel::finalize() const { reducer_->check_finished(); }

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : reducer_->bucket_indices()) {
    out.emplace_back();
    for (size_t i : b) out.back().push_back(reduced_names_[i]);
  }
  return out;
}

}  // namespace tandem::nn::parallel
