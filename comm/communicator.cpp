// The communicator's non-virtual parts: Tensor conveniences (checked, then the raw collectives),
// option defaults from the environment, names for messages.
#include "comm/communicator.h"

#include <cstdlib>
#include <string>

#include "runtime/env_settings.h"

namespace tandem::comm {

Work::~Work() = default;
Communicator::~Communicator() = default;

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

Options Options::with_env() const {
  Options o = *this;
  // Each variable overrides its option only where it is set (an unset one leaves the caller's choice).
  if (const std::optional<double> t = env::number("TANDEM_COMM_TIMEOUT")) o.timeout_s = *t;
  if (env::flag("TANDEM_DEBUG_DESYNC")) o.debug_desync = true;
  if (env::is_set("TANDEM_COMM_ALGO")) {  // the values in env_settings.cpp's order
    static constexpr Algo kAlgos[] = {Algo::Auto, Algo::Ring, Algo::Hierarchical, Algo::Native};
    o.algo = kAlgos[env::choice("TANDEM_COMM_ALGO")];
  }
  if (env::is_set("TANDEM_COMM_SHM")) o.shared_memory = env::flag("TANDEM_COMM_SHM");
  TANDEM_CHECK(o.timeout_s > 0, "Options::timeout_s must be positive, got {}", o.timeout_s);
  return o;
}

void Communicator::check_tensor(const Tensor& t, const char* what) const {
  TANDEM_CHECK(t.defined(), "{}: tensor is undefined", what);
  Device d = device();
  if (d.kind == DeviceKind::CUDA)
    TANDEM_CHECK(t.device() == d, "{}: tensor is on {} but this {} communicator works on {}; move it with .to({})",
                 what, t.device().str(), backend_name(), d.str(), d.str());
  else
    TANDEM_CHECK(t.device().is_host_addressable(),
                 "{}: tensor is on {} but the {} communicator needs host memory; move it with .to(cpu)",
                 what, t.device().str(), backend_name());
  TANDEM_CHECK(t.dtype() != DType::u8, "{}: dtype u8 is not supported by collectives", what);
}

Tensor Communicator::make_buffer(int64_t numel, DType dtype) {
  TANDEM_CHECK(numel >= 0, "make_buffer: numel must be >= 0, got {}", numel);
  return Tensor::zeros({numel}, dtype, device());
}

WorkPtr Communicator::reduce_scatter_chunks(void* buf, int64_t count, DType dtype, ReduceOp op) {
  return allreduce(buf, count, dtype, op);  // every chunk reduced, the owned one among them
}

WorkPtr Communicator::allgather_chunks(void*, int64_t, DType) {
  TANDEM_FAIL(NotSupported, "the {} communicator has no in-place all-gather of ring chunks (allgather_chunks); "
              "ZeRO (zero_stage 1 or 2) needs one: use the mpi, local or nccl communicator", backend_name());
}

WorkPtr Communicator::allreduce(Tensor& t, ReduceOp op) {
  check_tensor(t, "allreduce");
  return allreduce(t.data_ptr(), t.numel(), t.dtype(), op);
}

WorkPtr Communicator::broadcast(Tensor& t, int root) {
  check_tensor(t, "broadcast");
  return broadcast(t.data_ptr(), t.numel(), t.dtype(), root);
}

WorkPtr Communicator::allgather(const Tensor& send, Tensor& recv) {
  check_tensor(send, "allgather");
  check_tensor(recv, "allgather");
  TANDEM_CHECK(send.dtype() == recv.dtype(), "allgather: send dtype {} differs from recv dtype {}",
               dtype_name(send.dtype()), dtype_name(recv.dtype()));
  TANDEM_CHECK(recv.numel() == send.numel() * size(),
               "allgather: recv has {} elements, needs size() * send.numel() = {} * {}", recv.numel(),
               size(), send.numel());
  return allgather(send.data_ptr(), recv.data_ptr(), send.numel(), send.dtype());
}

WorkPtr Communicator::reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op) {
  check_tensor(send, "reduce_scatter");
  check_tensor(recv, "reduce_scatter");
  TANDEM_CHECK(send.dtype() == recv.dtype(), "reduce_scatter: send dtype {} differs from recv dtype {}",
               dtype_name(send.dtype()), dtype_name(recv.dtype()));
  TANDEM_CHECK(send.numel() == recv.numel() * size(),
               "reduce_scatter: send has {} elements, needs size() * recv.numel() = {} * {}",
               send.numel(), size(), recv.numel());
  return reduce_scatter(send.data_ptr(), recv.data_ptr(), recv.numel(), send.dtype(), op);
}

}  // namespace tandem::comm
