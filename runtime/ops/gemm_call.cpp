// The op entries' GEMM call, weight-gradient GEMMs into .grad, operand checks (gemm_call.h).
#include "runtime/ops/gemm_call.h"

#include <algorithm>

#include "runtime/autograd.h"
#include "runtime/autograd_engine.h"
#include "runtime/backend/gemm.h"
#include "runtime/backend/reduce.h"
#include "runtime/ops/op_checks.h"

namespace tandem::ops::detail {
namespace {
void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
}  // namespace

void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, int64_t m, int64_t n, int64_t k,
          double beta, int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c,
          const GemmEpilogue& epilogue) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {
    if (beta == 0.0) c.zero_();
    return;
  }
  kernels::GemmArgs args;
  args.bias = ptr_or_null(epilogue.bias);
  args.pre = ptr_or_null(epilogue.pre);
  args.gelu = epilogue.gelu;
  args.a_row_sums = ptr_or_null(epilogue.a_row_sums);
  args.dgelu_pre = ptr_or_null(epilogue.dgelu_pre);
  args.c_col_sums = ptr_or_null(epilogue.c_col_sums);
  args.sums_add = epilogue.sums_add;
  args.dtype = a.dtype();
  args.wide_c = c.dtype() != a.dtype();
  args.trans_a = ta;
  args.trans_b = tb;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = a.data_ptr();
  args.lda = ta ? m : k;
  args.b = b.data_ptr();
  args.ldb = tb ? k : n;
  args.c = c.data_ptr();
  args.ldc = n;
  args.beta = beta;
  args.batch = batch;
  args.stride_a = stride_a;
  args.stride_b = stride_b;
  args.stride_c = stride_c;
  kernels::gemm(c.device())(c.device(), args);
}

void check_gemm_operands(const char* op, const Tensor& a, const Tensor& b) {
  check_compatible(op, a, b);
  check_floating(op, a);
}

void check_bias(const char* op, const char* name, const Tensor& weight, const Tensor& bias) {
  if (!bias.defined()) return;
  check_compatible(op, weight, bias);
  TANDEM_CHECK(bias.shape() == Shape{weight.size(0)}, "{}: {} must be [{}] for its weight {}, got {}", op, name,
               weight.size(0), shape_str(weight.shape()), shape_str(bias.shape()));
}

Tensor gemm_sink(size_t index, const Tensor& g) {
  Tensor sink = gradient_sink(index);
  if (!sink.defined()) return sink;
  if (sink.dtype() == g.dtype() || (is_low_precision(g.dtype()) && sink.dtype() == DType::f32)) return sink;
  return {};
}

Tensor sums_sink(size_t index, const Tensor& g) {
  Tensor sink = gradient_sink(index);
  const DType sums = g.dtype() == DType::f64 ? DType::f64 : DType::f32;
  return sink.defined() && sink.dtype() == sums ? sink : Tensor();
}

std::pair<Tensor, Tensor> weight_bias_grads(const Tensor& g, const Tensor& x, const Shape& sw, bool gw, bool gbias,
                                            size_t w_index, size_t b_index) {
  const int64_t out_f = sw[0], in = sw[1], M = g.numel() / std::max<int64_t>(out_f, 1);
  // db by the weight GEMM's epilogue, into the bias's .grad where the engine offers it.
  const bool db_in_epilogue = gw && gbias && in > 0 && M > 0;
  const Tensor db_sink = db_in_epilogue ? sums_sink(b_index, g) : Tensor();
  Tensor dw, db;
  if (gbias && !db_sink.defined()) db = Tensor::empty({out_f}, g.dtype(), g.device());
  if (gw) {  // dW [out, in] = g^T [out, M] @ x [M, in]; db [out] = sums over M of g^T's rows
    Tensor sink = gemm_sink(w_index, g);
    dw = sink.defined() ? sink : Tensor::empty(sw, g.dtype(), g.device());
    GemmEpilogue e;
    if (db_in_epilogue) {
      e.sums_add = db_sink.defined();
      e.a_row_sums = e.sums_add ? db_sink : db;
    }
    gemm(g, true, x, false, dw, out_f, in, M, sink.defined() ? 1.0 : 0.0, 1, 0, 0, 0, e);
    if (sink.defined()) dw = Tensor();  // added to the weight's .grad already
  }
  if (gbias && !db_in_epilogue) kernels::sum_to(g.device())(g, db, 1.0);
  return {dw, db};
}

}  // namespace tandem::ops::detail
