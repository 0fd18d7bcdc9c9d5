// RingCommunicator: argument checks, queueing, sequence numbers, deadlines and the desync check.
#include "comm/ring_comm.h"

#include <map>
#include <vector>

#include <fmt/format.h>

namespace tandem::comm {

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::Allreduce: return "allreduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::Allgather: return "allgather";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Barrier: return "barrier";
    case CollectiveKind::ReduceScatterChunks: return "reduce_scatter_chunks";
    case CollectiveKind::AllgatherChunks: return "allgather_chunks";
  }
  return "?";
}

std::string CallDesc::str() const {
  std::string s = fmt::format("#{} {}(count={}, dtype={}", seq, collective_name(CollectiveKind(kind)),
                              count, dtype_name(DType(dtype)));
  if (kind == int32_t(CollectiveKind::Allreduce) || kind == int32_t(CollectiveKind::ReduceScatter) ||
      kind == int32_t(CollectiveKind::ReduceScatterChunks))
    s += fmt::format(", op={}", reduce_op_name(ReduceOp(op)));
  if (kind == int32_t(CollectiveKind::Broadcast)) s += fmt::format(", root={}", root);
  return s + ")";
}

RingCommunicator::RingCommunicator(Options opts, Device device, std::string backend)
    : opts_(opts.with_env()), device_(device), backend_(std::move(backend)) {}

RingCommunicator::~RingCommunicator() { stop(); }

void RingCommunicator::start(std::unique_ptr<Transport> transport, bool use_thread) {
  transport_ = std::move(transport);
  rank_ = transport_->rank();
  size_ = transport_->size();
  ring_ = std::make_unique<Ring>(*transport_, opts_.segment_bytes);
  flight_.identify(rank_, size_);  // SIGUSR1 dumps it from now on
  executor_ = std::make_shared<Executor>(use_thread);
  // Only while started: the derived destructors stop() the executor before their transports go.
  executor_->set_wait_hook([this](bool waiting) { caller_waiting(waiting); });
}

void RingCommunicator::stop() {
  if (executor_) executor_->shutdown();
  desync_buf_.reset();
  ring_.reset();  // its scratch buffers belong to the transport
  transport_.reset();
}

void RingCommunicator::check_args(const char* what, int64_t count, DType dtype) const {
  TANDEM_CHECK(count >= 0, "{}: count must be >= 0, got {}", what, count);
  TANDEM_CHECK(dtype != DType::u8, "{}: dtype u8 is not supported by collectives", what);
  TANDEM_CHECK(executor_, "{}: communicator is not started", what);
}

WorkPtr RingCommunicator::launch(CallDesc desc, std::function<void(const OpInfo&)> body) {
  const uint64_t call = flight_.enqueued(collective_name(CollectiveKind(desc.kind)), desc.count, DType(desc.dtype));
  return executor_->submit([this, call, desc, body = std::move(body), fence = order_after_caller()]() mutable {
    if (fence) fence();
    OpInfo info;
    info.name = collective_name(CollectiveKind(desc.kind));
    info.seq = ++seq_;
    info.timeout_s = opts_.timeout_s;
    info.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(opts_.timeout_s));
    flight_.started(call, info.seq);
    try {
      transport_->announce(info.seq);
      if (opts_.debug_desync) {
        desc.seq = info.seq;
        check_desync(desc, info);
      }
      body(info);
      transport_->complete(info);
    } catch (const CommError& e) {
      flight_.finished(call, false);
      // The first failure (a deadline, a desync) writes this rank's recent collectives, once.
      if (flight_dumped_.exchange(true)) throw;
      std::string path = flight_.dump(rank_, size_);
      if (path.empty()) throw;
      throw CommError(fmt::format("{} Flight record of this rank's last collectives: {} (scripts/flight-report "
                                  "lines up the ranks' records).", e.what(), path));
    }
    flight_.finished(call, true);
  });
}

void RingCommunicator::check_desync(const CallDesc& mine, const OpInfo& info) {
  // Every rank contributes what it is about to call; all ranks see all and fail together.
  std::vector<CallDesc> all(static_cast<size_t>(size_));
  OpInfo check = info;
  check.name = "desync check";
  // Transport memory (device memory for NCCL): upload ours, gather, download all.
  const size_t bytes = sizeof(CallDesc);
  char* dev = static_cast<char*>(desync_buf_.get(*transport_, bytes * (size_ + 1)));
  transport_->upload(dev, &mine, bytes);
  ring_->allgather(dev, dev + bytes, sizeof(CallDesc), DType::u8, check);
  transport_->complete(check);
  transport_->download(all.data(), dev + bytes, bytes * size_);
  std::map<std::vector<char>, int> votes;
  auto key = [](const CallDesc& d) {
    const char* p = reinterpret_cast<const char*>(&d);
    return std::vector<char>(p, p + sizeof d);
  };
  for (auto& d : all) votes[key(d)]++;
  if (votes.size() == 1) return;
  // The majority call (ties: rank 0's) is taken as right; name every rank that differs.
  const CallDesc* major = &all[0];
  for (auto& d : all)
    if (votes[key(d)] > votes[key(*major)]) major = &d;
  std::vector<int> bad;
  std::string calls;
  for (int r = 0; r < size_; ++r) {
    calls += fmt::format("\n  rank {}: {}", r, all[r].str());
    if (!(all[r] == *major)) bad.push_back(r);
  }
  TANDEM_FAIL(Comm,
              "collective desync detected by rank {} at collective #{}: ranks {} differ from the "
              "majority call {}. Calls:{}\nEvery rank must issue the same collectives in the same "
              "order with the same count, dtype and op.",
              rank_, info.seq, ranks_str(bad), major->str(), calls);
}

void RingCommunicator::run_in_order(std::function<void()> fn) {
  TANDEM_CHECK(executor_, "communicator is not started");
  executor_->submit(std::move(fn))->wait();
}

WorkPtr RingCommunicator::allreduce(void* buf, int64_t count, DType dtype, ReduceOp op) {
  check_args("allreduce", count, dtype);
  CallDesc d{int32_t(CollectiveKind::Allreduce), int32_t(dtype), count, int32_t(op), -1, 0};
  return launch(d, [=](const OpInfo& info) {
    if (!whole_allreduce(buf, count, dtype, op, info)) ring_->allreduce(buf, count, dtype, op, info);
  });
}

bool RingCommunicator::whole_allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const OpInfo& info) {
  if (opts_.algo == Options::Algo::Native) return native_allreduce(buf, count, dtype, op, info);
  if (size_ == 1 || count == 0) return false;
  // The hierarchy, where the backend chose it, takes every buffer (make_buffer then gives plain
  // memory); else make_buffer memory is summed directly.
  return hierarchical_allreduce(buf, count, dtype, op, info) || direct_allreduce(buf, count, dtype, op, info);
}

WorkPtr RingCommunicator::reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype,
                                         ReduceOp op) {
  check_args("reduce_scatter", recv_count, dtype);
  CallDesc d{int32_t(CollectiveKind::ReduceScatter), int32_t(dtype), recv_count, int32_t(op), -1, 0};
  return launch(d, [=](const OpInfo& info) {
    if (opts_.algo == Options::Algo::Native && native_reduce_scatter(send, recv, recv_count, dtype, op, info))
      return;
    ring_->reduce_scatter(send, recv, recv_count, dtype, op, info);
  });
}

WorkPtr RingCommunicator::allgather(const void* send, void* recv, int64_t send_count, DType dtype) {
  check_args("allgather", send_count, dtype);
  CallDesc d{int32_t(CollectiveKind::Allgather), int32_t(dtype), send_count, 0, -1, 0};
  return launch(d, [=](const OpInfo& info) {
    if (opts_.algo == Options::Algo::Native && native_allgather(send, recv, send_count, dtype, info)) return;
    ring_->allgather(send, recv, send_count, dtype, info);
  });
}

WorkPtr RingCommunicator::reduce_scatter_chunks(void* buf, int64_t count, DType dtype, ReduceOp op) {
  check_args("reduce_scatter_chunks", count, dtype);
  CallDesc d{int32_t(CollectiveKind::ReduceScatterChunks), int32_t(dtype), count, int32_t(op), -1, 0};
  return launch(d, [=](const OpInfo& info) {
    // allreduce's choice for this buffer, so that the owned chunk is bitwise allreduce's: the
    // backend's collective (Native), the hierarchy or the direct shared-memory sum (make_buffer
    // memory) reduce the whole buffer; the ring stops after its reduce-scatter phase.
    if (!whole_allreduce(buf, count, dtype, op, info)) ring_->reduce_scatter_in_place(buf, count, dtype, op, info);
  });
}

WorkPtr RingCommunicator::allgather_chunks(void* buf, int64_t count, DType dtype) {
  check_args("allgather_chunks", count, dtype);
  CallDesc d{int32_t(CollectiveKind::AllgatherChunks), int32_t(dtype), count, 0, -1, 0};
  // Data movement only: the ring's all-gather phase, whatever the algorithm (no bits to keep).
  return launch(d, [=](const OpInfo& info) { ring_->allgather_in_place(buf, count, dtype, info); });
}

WorkPtr RingCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  check_args("broadcast", count, dtype);
  TANDEM_CHECK(root >= 0 && root < size_, "broadcast: root {} is not a rank of this {}-rank communicator",
               root, size_);
  CallDesc d{int32_t(CollectiveKind::Broadcast), int32_t(dtype), count, 0, root, 0};
  return launch(d, [=](const OpInfo& info) {
    if (opts_.algo == Options::Algo::Native && native_broadcast(buf, count, dtype, root, info)) return;
    ring_->broadcast(buf, count, dtype, root, info);
  });
}

WorkPtr RingCommunicator::barrier() {
  check_args("barrier", 0, DType::i32);
  CallDesc d{int32_t(CollectiveKind::Barrier), int32_t(DType::i32), 0, 0, -1, 0};
  return launch(d, [=](const OpInfo& info) {
    if (opts_.algo == Options::Algo::Native && native_barrier(info)) return;
    ring_->barrier(info);
  });
}

WorkPtr RingCommunicator::send(const void* buf, int64_t count, DType dtype, int peer) {
  return point_to_point("send", true, const_cast<void*>(buf), count, dtype, peer);
}

WorkPtr RingCommunicator::recv(void* buf, int64_t count, DType dtype, int peer) {
  return point_to_point("recv", false, buf, count, dtype, peer);
}

WorkPtr RingCommunicator::point_to_point(const char* name, bool is_send, void* buf, int64_t count, DType dtype,
                                         int peer) {
  check_args(name, count, dtype);
  TANDEM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "{}: peer {} is not another rank of 0..{}", name, peer,
               size_ - 1);
  return executor_->submit([=, fence = order_after_caller()] {
    if (fence) fence();
    OpInfo info;
    info.name = name;
    info.seq = 0;  // point-to-point: not numbered with the collectives
    ++p2p_seq_;
    info.timeout_s = opts_.timeout_s;
    info.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(opts_.timeout_s));
    const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
    if (count && is_send) transport_->send(buf, bytes, peer);
    if (count && !is_send) transport_->recv(buf, bytes, peer);
    transport_->wait(info);
    transport_->complete(info);
  });
}

}  // namespace tandem::comm
