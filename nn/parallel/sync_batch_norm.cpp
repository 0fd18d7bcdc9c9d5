// SyncBatchNorm: the cross-rank statistics merge (forward), the cross-rank gradient sums (backward),
// and convert_sync_batchnorm.
#include "nn/parallel/sync_batch_norm.h"

#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/backend/common/welford.h"
#include "runtime/backend/core.h"
#include "runtime/ops/norm.h"
#include "runtime/ops/shape.h"

namespace tandem::nn::parallel {

namespace {

// Global (mean, m2, count) per channel: every rank's row [count, mean[C], m2[C]] (f64) is
// all-gathered and merged in rank order, so every rank gets bitwise the same statistics.
ops::BatchNormStats global_stats(const Tensor& x, comm::Communicator& comm) {
  const int64_t c = x.size(1);
  const int64_t local_count = c > 0 ? x.numel() / c : 0;
  std::vector<double> row(static_cast<size_t>(2 * c + 1), 0.0);
  row[0] = static_cast<double>(local_count);
  if (local_count > 0) {
    ops::BatchNormStats s = ops::batch_norm_stats(x);
    auto mean = s.mean.to_vector<double>(), m2 = s.m2.to_vector<double>();
    std::copy(mean.begin(), mean.end(), row.begin() + 1);
    std::copy(m2.begin(), m2.end(), row.begin() + 1 + c);
  }
  const int world = comm.size();
  Tensor send = Tensor::from_vector(row, {2 * c + 1}, DType::f64, comm.device());
  Tensor recv = Tensor::empty({world * (2 * c + 1)}, DType::f64, comm.device());
  comm.allgather(send.data_ptr(), recv.data_ptr(), 2 * c + 1, DType::f64)->wait();
  std::vector<double> all = recv.to_vector<double>();

  std::vector<Welford<double>> acc(static_cast<size_t>(c));
  int64_t total = 0;
  for (int r = 0; r < world; ++r) {
    const double* rr = all.data() + static_cast<size_t>(r) * static_cast<size_t>(2 * c + 1);
    const auto n = static_cast<int64_t>(rr[0]);
    total += n;
    for (int64_t k = 0; k < c; ++k) {
      Welford<double> part;
      part.count = n;
      part.mean = rr[1 + k];
      part.m2 = rr[1 + c + k];
      welford_merge(acc[static_cast<size_t>(k)], part);
    }
  }
  std::vector<double> mean(static_cast<size_t>(c)), m2(static_cast<size_t>(c));
  for (size_t k = 0; k < acc.size(); ++k) {
    mean[k] = acc[k].mean;
    m2[k] = acc[k].m2;
  }
  const DType sd = ops::batch_norm_stat_dtype(x.dtype());
  ops::BatchNormStats g;
  g.mean = Tensor::from_vector(mean, {c}, sd, x.device());
  g.m2 = Tensor::from_vector(m2, {c}, sd, x.device());
  g.count = total;
  return g;
}

}  // namespace

Tensor sync_batch_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                       Tensor running_var, comm::Communicator& comm_ref, double momentum, double eps) {
  TANDEM_CHECK(x_in.defined() && x_in.dim() >= 2, "sync_batch_norm: input must be [N, C, ...], got {}",
               x_in.defined() ? shape_str(x_in.shape()) : "undefined");
  // Under autocast a 16-bit x keeps its dtype, as in ops::batch_norm: the f32 op of x cast to f32,
  // cast back (so that SyncBatchNorm gives what BatchNorm gives: 16-bit activations).
  if (autocast_dtype() && is_low_precision(x_in.dtype()))
    return ops::cast(sync_batch_norm(ops::cast(x_in, DType::f32), weight, bias, std::move(running_mean),
                                     std::move(running_var), comm_ref, momentum, eps),
                     x_in.dtype());
  Tensor x = autocast_arg(x_in, AutocastCategory::Float32);
  const int64_t c = x.size(1);
  const bool empty = x.numel() == 0;
  comm::Communicator* comm = &comm_ref;

  Tensor mean, invstd;
  int64_t total = 0;
  {
    NoGradGuard no_grad;
    ops::BatchNormStats g = global_stats(x, *comm);
    total = g.count;
    TANDEM_CHECK(total > 1,
                 "SyncBatchNorm: expected more than 1 value per channel over all ranks when training, got {} "
                 "(this rank's input {})",
                 total, shape_str(x.shape()));
    invstd = ops::batch_norm_invstd(g.mean, g.m2, total, eps, running_mean, running_var, momentum);
    mean = g.mean;
  }
  Tensor y = empty ? Tensor::empty(x.shape(), x.dtype(), x.device())
                   : ops::batch_norm_apply(x, mean, invstd, weight, bias);
  if (!needs_grad({&x, &weight, &bias})) return y;

  const bool gx = x.requires_grad(), gw = weight.defined() && weight.requires_grad(),
             gb = bias.defined() && bias.requires_grad();
  Tensor x_saved = x.detach(), w_saved = weight.defined() ? weight.detach() : Tensor();
  const DType bias_dtype = bias.defined() ? bias.dtype() : x.dtype();
  const DType w_dtype = weight.defined() ? weight.dtype() : x.dtype();
  const DType sd = ops::batch_norm_stat_dtype(x.dtype());
  // The communicator must outlive the graph; SyncBatchNorm holds it for as long as the module lives.
  return record("SyncBatchNormBackward", {x, weight, bias}, y,
                [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
                  const Tensor& dy = grads[0];
                  ops::BatchNormBackwardSums r;
                  if (empty) {
                    r.sum_dy = Tensor::zeros({c}, sd, dy.device());
                    r.sum_dy_xmu = Tensor::zeros({c}, sd, dy.device());
                    if (gw) r.grad_weight = Tensor::zeros({c}, w_dtype, dy.device());
                    if (gb) r.grad_bias = Tensor::zeros({c}, bias_dtype, dy.device());
                  } else {
                    Tensor bias_like = gb ? Tensor::empty({c}, bias_dtype, dy.device()) : Tensor();
                    r = ops::batch_norm_backward_reduce(dy, x_saved, mean, invstd, gw ? w_saved : Tensor(), bias_like);
                  }
                  // Every rank takes part, whatever its batch: sum_dy and sum_dy_xmu over all ranks.
                  Tensor sums = Tensor::empty({2 * c}, sd, comm->device());
                  sums.narrow0(0, c).copy_(r.sum_dy);
                  sums.narrow0(c, c).copy_(r.sum_dy_xmu);
                  comm->allreduce(sums.data_ptr(), 2 * c, sd, comm::ReduceOp::Sum)->wait();
                  Tensor dx;
                  if (gx) {
                    if (empty) {
                      dx = Tensor::zeros(x_saved.shape(), x_saved.dtype(), x_saved.device());
                    } else {
                      Tensor sum_dy = sums.narrow0(0, c).to(dy.device());
                      Tensor sum_dy_xmu = sums.narrow0(c, c).to(dy.device());
                      dx = ops::batch_norm_backward_elemt(dy, x_saved, mean, invstd, w_saved, sum_dy, sum_dy_xmu,
                                                          total);
                    }
                  }
                  return {dx, gw ? r.grad_weight : Tensor(), gb ? r.grad_bias : Tensor()};
                });
}

SyncBatchNorm::SyncBatchNorm(int64_t num_features, std::shared_ptr<comm::Communicator> comm, double eps,
                             double momentum, bool affine)
    : BatchNormBase(num_features, eps, momentum, affine), comm_(std::move(comm)) {
  TANDEM_CHECK(comm_ != nullptr, "SyncBatchNorm: no communicator given");
}

Tensor SyncBatchNorm::forward(const Tensor& x) {
  if (!is_training()) return BatchNormBase::forward(x);  // running statistics: nothing to synchronise
  TANDEM_CHECK(accepts_dim(x.dim()) && x.size(1) == c_, "SyncBatchNorm({}): input has shape {}; expected {} with C = {}",
               c_, shape_str(x.shape()), expected_shape(), c_);
  {
    NoGradGuard no_grad;
    Tensor& count = buffer("num_batches_tracked");
    kernels::axpy(count.device())(count, Tensor::ones({}, DType::i64, count.device()), 1.0);
  }
  Tensor w = affine_ ? param("weight") : Tensor(), b = affine_ ? param("bias") : Tensor();
  Tensor y = sync_batch_norm(x, w, b, buffer("running_mean"), buffer("running_var"), *comm_, momentum_, eps_);
  // The statistics cross ranks between the stages: a fused epilogue runs as its own ops.
  return ops::batch_norm_epilogue(y, epilogue_);
}

std::shared_ptr<Module> SyncBatchNorm::clone() const {
  auto copy = std::make_shared<SyncBatchNorm>(*this);
  copy->deep_copy_state();
  return copy;
}

std::shared_ptr<SyncBatchNorm> SyncBatchNorm::from_batch_norm(BatchNormBase& bn,
                                                              std::shared_ptr<comm::Communicator> comm) {
  auto s = std::make_shared<SyncBatchNorm>(bn.num_features(), std::move(comm), bn.eps(), bn.momentum(), bn.affine());
  if (bn.affine()) {
    s->param("weight") = bn.param("weight");
    s->param("bias") = bn.param("bias");
  }
  for (const char* name : {"running_mean", "running_var", "num_batches_tracked"}) s->buffer(name) = bn.buffer(name);
  s->train(bn.is_training());
  s->set_epilogue(bn.epilogue());
  return s;
}

namespace {
// Module::replace_module is protected; a pointer to it taken through a derived class may be used on
// any Module (the standard's access rule for member pointers), which keeps this edit local.
struct ModuleAccess : Module {
  static void replace(Module& parent, const std::string& name, std::shared_ptr<Module> m) {
    (parent.*(&ModuleAccess::replace_module))(name, std::move(m));
  }
};
}  // namespace

std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module,
                                               std::shared_ptr<comm::Communicator> comm) {
  TANDEM_CHECK(module != nullptr, "convert_sync_batchnorm: no module given");
  if (auto* bn = dynamic_cast<BatchNormBase*>(module.get()); bn && !dynamic_cast<SyncBatchNorm*>(bn))
    return SyncBatchNorm::from_batch_norm(*bn, comm);
  // Children first collected, then replaced: the list is not modified while it is walked.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> kids = module->children();
  for (auto& [name, child] : kids) {
    std::shared_ptr<Module> converted = convert_sync_batchnorm(child, comm);
    if (converted != child) ModuleAccess::replace(*module, name, converted);
  }
  return module;
}

}  // namespace tandem::nn::parallel
