// ZeroOptimizer's checkpoint state: the shards' optimizer state gathered into stage 0's layout
// through the buckets (the parameters' own all-gather, run once per state name), and a stage 0
// layout cut back to this rank's shard at load.
#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_map>

#include "nn/optim/fused_optimizer.h"
#include "nn/parallel/reducer.h"
#include "nn/parallel/zero_optimizer.h"
#include "runtime/autograd.h"

namespace tandem::nn::parallel {

DType ZeroOptimizer::state_dtype(size_t bucket) const {
  const DType d = ddp_.reducer().bucket_dtype(bucket);
  auto* fused = dynamic_cast<const FusedOptimizer*>(inner_.get());
  return fused && fused->fused_options().master_weights && is_low_precision(d) ? DType::f32 : d;
}

void ZeroOptimizer::consolidate_state(int root) {
  NoGradGuard no_grad;
  Reducer& reducer = ddp_.reducer();
  comm::Communicator& comm = ddp_.communicator();
  const std::vector<Tensor>& params = reducer.params();
  const auto& buckets = reducer.bucket_indices();
  const std::vector<std::string> names = state_names();
  const size_t full = model_params_.size(), k = names.size();

  // Which (parameter, state) pairs exist anywhere, and each parameter's step count: one max over
  // the ranks (a rank knows only the parameters it holds a piece of).
  std::vector<int64_t> known(full * k, 0);
  std::vector<NamedTensors> piece_state(pieces_.size());
  for (size_t q = 0; q < pieces_.size(); ++q) {
    piece_state[q] = inner_->param_state(q);
    const size_t j = full_index_[pieces_[q].param];
    for (const auto& [name, t] : piece_state[q]) {
      const size_t s = static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
      TANDEM_CHECK(s < k, "ZeroOptimizer: state '{}' of {} is not among its state names", name, inner_->type_name());
      known[j * k + s] = name == "step" ? t.to_vector<int64_t>()[0] + 1 : 1;  // +1: a step count of 0 exists too
    }
  }
  Tensor flags = Tensor::from_vector(known, {static_cast<int64_t>(known.size())}, DType::i64, comm.device());
  if (!known.empty()) comm.allreduce(flags, comm::ReduceOp::Max)->wait();
  known = flags.to_vector<int64_t>();

  // Each tensor state through the buckets: this rank's pieces into its chunk, all-gathered.
  std::vector<std::unordered_map<std::string, Tensor>> whole(full);
  for (size_t s = 0; s < k; ++s) {
    if (names[s] == "step") continue;
    bool any = false;
    for (size_t j = 0; j < full; ++j) any = any || known[j * k + s] != 0;
    if (!any) continue;
    for (size_t b = 0; b < buckets.size(); ++b) {
      Tensor buf = Tensor::zeros({reducer.bucket_numel(b)}, state_dtype(b), comm.device());
      for (size_t q = 0; q < pieces_.size(); ++q) {
        if (pieces_[q].bucket != b) continue;
        for (const auto& [name, t] : piece_state[q])
          if (name == names[s])
            buf.narrow0(reducer.slot_offset(pieces_[q].param) + pieces_[q].offset, pieces_[q].length).copy_(t);
      }
      comm.allgather_chunks(buf.data_ptr(), buf.numel(), buf.dtype())->wait();
      for (size_t i : buckets[b]) {
        const size_t j = full_index_[i];
        if (j == SIZE_MAX || known[j * k + s] == 0) continue;
        whole[j][names[s]] = buf.narrow0(reducer.slot_offset(i), params[i].numel()).view(params[i].shape()).clone();
      }
    }
  }
  full_state_.clear();
  consolidated_step_ = -1;
  if (comm.rank() != root) return;
  full_state_.emplace_back("step", Tensor::scalar(static_cast<double>(step_count_), DType::i64));
  for (size_t g = 0; g < groups_.size(); ++g)
    full_state_.emplace_back("param_groups." + std::to_string(g) + ".lr", Tensor::scalar(groups_[g].lr, DType::f64));
  for (size_t j = 0; j < full; ++j)
    for (size_t s = 0; s < k; ++s) {
      if (known[j * k + s] == 0) continue;
      const std::string key = "state." + std::to_string(j) + "." + names[s];
      if (names[s] == "step")
        full_state_.emplace_back(key, Tensor::scalar(static_cast<double>(known[j * k + s] - 1), DType::i64));
      else
        full_state_.emplace_back(key, whole[j].at(names[s]));
    }
  consolidated_step_ = step_count_;
}

NamedTensors ZeroOptimizer::state_tensors() const {
  TANDEM_CHECK(consolidated_step_ == step_count_,
               "ZeroOptimizer::state_tensors: the state is sharded over the ranks; call consolidate_state(root) on "
               "every rank at this step first, then read it on the root");
  return full_state_;
}

void ZeroOptimizer::load_state_tensors(const NamedTensors& state) {
  // Stage 0's layout: "state.<j>.<name>" of full parameter j, shaped like it. Cut this rank's pieces.
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [n, t] : state) given.emplace(n, &t);
  for (const auto& [n, t] : state) {
    if (n.rfind("state.", 0) != 0) continue;
    const size_t dot = n.find('.', 6);
    const std::string index = n.substr(6, dot == std::string::npos ? std::string::npos : dot - 6);
    const bool numeric = !index.empty() && std::all_of(index.begin(), index.end(), ::isdigit);
    TANDEM_CHECK(numeric && std::stoull(index) < model_params_.size() && dot != std::string::npos,
                 "ZeroOptimizer::load_state_tensors: unexpected entry '{}' (not state of this optimizer with {} "
                 "parameters)",
                 n, model_params_.size());
    const Tensor& p = model_params_[std::stoull(index)];
    const std::string name = n.substr(dot + 1);
    TANDEM_CHECK(name == "step" || t.numel() == p.numel(),
                 "ZeroOptimizer::load_state_tensors: '{}' has shape {} but parameter {} has {}", n,
                 shape_str(t.shape()), index, shape_str(p.shape()));
  }
  NamedTensors mine;
  for (const auto& [n, t] : state)
    if (n.rfind("state.", 0) != 0) mine.emplace_back(n, t);  // step and the groups' lr, as they are
  const std::vector<std::string> names = state_names();
  for (size_t q = 0; q < pieces_.size(); ++q) {
    const size_t j = full_index_[pieces_[q].param];
    for (const std::string& sn : names) {
      auto it = given.find("state." + std::to_string(j) + "." + sn);
      if (it == given.end()) continue;
      const Tensor& t = *it->second;
      mine.emplace_back("state." + std::to_string(q) + "." + sn,
                        sn == "step" ? t : t.view({-1}).narrow0(pieces_[q].offset, pieces_[q].length).clone());
    }
  }
  inner_->load_state_tensors(mine);
  // This optimizer's own step count and learning rates (the schedule reads them here); the inner
  // one has checked them.
  for (const auto& [n, t] : state) {
    if (n == "step") step_count_ = t.to_vector<int64_t>()[0];
    for (size_t g = 0; g < groups_.size(); ++g)
      if (n == "param_groups." + std::to_string(g) + ".lr") groups_[g].lr = t.to_vector<double>()[0];
  }
  consolidated_step_ = -1;
}

}  // namespace tandem::nn::parallel
