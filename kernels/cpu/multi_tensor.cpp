// CPU multi-tensor kernels: the chunk list of kernels/multi_tensor.h, one OpenMP iteration per
// chunk. Elementwise math is kernels/common/adam_step.h, so results equal the per-tensor kernels;
// sums of squares are added chunk by chunk in list order (deterministic for any thread count).
// A list of one chunk runs on the calling thread: a parallel region costs more than it saves.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "runtime/backend/dtype_dispatch.h"
#include "runtime/backend/multi_tensor.h"
#include "runtime/tensor_impl.h"

namespace tandem::kernels {

void check_multi_tensor_lists(const char* what, const std::vector<Tensor>& params,
                              const std::vector<const std::vector<Tensor>*>& others, size_t hypers) {
  TANDEM_CHECK(hypers == params.size(), "{}: {} hyperparameter sets for {} tensors", what, hypers, params.size());
  for (const auto* list : others) {
    if (list->empty()) continue;
    TANDEM_CHECK(list->size() == params.size(), "{}: tensor lists of different lengths ({} and {})", what,
                 list->size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& a = params[i];
      const Tensor& b = (*list)[i];
      TANDEM_CHECK(b.defined() && b.numel() == a.numel() && b.device() == a.device(),
                   "{}: tensor {} of a list is {} on {} but the parameter is {} on {}", what, i,
                   b.defined() ? shape_str(b.shape()) : "undefined", b.defined() ? b.device().str() : "-",
                   shape_str(a.shape()), a.device().str());
    }
  }
}

void check_multi_tensor_cast(const std::vector<Tensor>& src, const std::vector<Tensor>& dst) {
  TANDEM_CHECK(src.size() == dst.size(), "multi_tensor_cast: {} sources for {} destinations", src.size(), dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const Tensor &s = src[i], &d = dst[i];
    TANDEM_CHECK(s.defined() && d.defined() && s.numel() == d.numel() && s.device() == d.device(),
                 "multi_tensor_cast: pair {} is {} on {} -> {} on {}", i, s.defined() ? shape_str(s.shape()) : "undefined",
                 s.defined() ? s.device().str() : "-", d.defined() ? shape_str(d.shape()) : "undefined",
                 d.defined() ? d.device().str() : "-");
    TANDEM_CHECK(is_floating(s.dtype()) && is_floating(d.dtype()) && s.dtype() == src[0].dtype() &&
                     d.dtype() == dst[0].dtype() && s.device() == src[0].device(),
                 "multi_tensor_cast: pair {} is {} -> {} on {}; the list casts floating {} -> {} on {}", i,
                 dtype_name(s.dtype()), dtype_name(d.dtype()), s.device().str(), dtype_name(src[0].dtype()),
                 dtype_name(dst[0].dtype()), src[0].device().str());
  }
}

namespace {

void cpu_cast(const std::vector<Tensor>& src, const std::vector<Tensor>& dst) {
  check_multi_tensor_cast(src, dst);
  std::vector<TensorChunk> chunks = make_chunks(src);
#pragma omp parallel for schedule(static) if (chunks.size() > 1)
  for (size_t c = 0; c < chunks.size(); ++c) {
    const TensorChunk& ch = chunks[c];
    const Tensor &s = src[static_cast<size_t>(ch.tensor)], &d = dst[static_cast<size_t>(ch.tensor)];
    convert_host(static_cast<const char*>(s.data_ptr()) + ch.start * int64_t(s.element_size()), s.dtype(),
                 static_cast<char*>(d.data_ptr()) + ch.start * int64_t(d.element_size()), d.dtype(), ch.length);
  }
}

void set_found_inf(Tensor& found_inf) {
  TANDEM_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == DType::f32,
               "multi_tensor: found_inf must be a one-element f32 tensor");
  *found_inf.data<float>() = 1.0f;
}

bool skip_step(const Tensor& found_inf) { return found_inf.defined() && found_inf.item() != 0.0; }

void cpu_zero(const std::vector<Tensor>& tensors) {
  std::vector<TensorChunk> chunks = make_chunks(tensors);
#pragma omp parallel for schedule(static) if (chunks.size() > 1)
  for (size_t c = 0; c < chunks.size(); ++c) {
    const TensorChunk& ch = chunks[c];
    const Tensor& t = tensors[static_cast<size_t>(ch.tensor)];
    std::memset(static_cast<char*>(t.data_ptr()) + ch.start * int64_t(t.element_size()), 0,
                static_cast<size_t>(ch.length) * t.element_size());
  }
}

void cpu_unscale(const std::vector<Tensor>& grads, double inv_scale, Tensor& found_inf) {
  std::vector<TensorChunk> chunks = make_chunks(grads);
  int any = 0;
#pragma omp parallel for schedule(static) reduction(| : any) if (chunks.size() > 1)
  for (size_t c = 0; c < chunks.size(); ++c) {
    const TensorChunk& ch = chunks[c];
    const Tensor& g = grads[static_cast<size_t>(ch.tensor)];
    dispatch_floating(dtype_inline(g), "multi_tensor_unscale", [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      T* d = static_cast<T*>(data_ptr_inline(g)) + ch.start;
      const A f = static_cast<A>(inv_scale);
      for (int64_t i = 0; i < ch.length; ++i) {
        A v = static_cast<A>(d[i]);
        if (!std::isfinite(v)) any = 1;
        d[i] = T(v * f);
      }
    });
  }
  if (any) set_found_inf(found_inf);
}

double cpu_sum_squares_check(const std::vector<Tensor>& grads, Tensor& found_inf) {
  std::vector<TensorChunk> chunks = make_chunks(grads);
  std::vector<double> partial(chunks.size(), 0.0);
  int any = 0;
#pragma omp parallel for schedule(static) reduction(| : any) if (chunks.size() > 1)
  for (size_t c = 0; c < chunks.size(); ++c) {
    const TensorChunk& ch = chunks[c];
    const Tensor& g = grads[static_cast<size_t>(ch.tensor)];
    dispatch_floating(dtype_inline(g), "multi_tensor_sum_squares_check", [&](auto tag) {
      using T = decltype(tag);
      const T* d = static_cast<const T*>(data_ptr_inline(g)) + ch.start;
      double s = 0.0;
      for (int64_t i = 0; i < ch.length; ++i) {
        double v = static_cast<double>(static_cast<acc_t<T>>(d[i]));
        if (!std::isfinite(v)) any = 1;
        s += v * v;
      }
      partial[c] = s;
    });
  }
  if (any) set_found_inf(found_inf);
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

// Runs f(chunk, tensor index, T tag, G tag) over every chunk of `params`, chunks in parallel; T and G
// are the C++ types of the parameter and of its gradient.
template <class F>
void for_each_param_chunk(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const char* what,
                          F&& f) {
  std::vector<TensorChunk> chunks = make_chunks(params);
#pragma omp parallel for schedule(static) if (chunks.size() > 1)
  for (size_t c = 0; c < chunks.size(); ++c) {
    const TensorChunk& ch = chunks[c];
    const size_t t = static_cast<size_t>(ch.tensor);
    dispatch_floating_pair(dtype_inline(params[t]), dtype_inline(grads[t]), what,
                           [&](auto pt, auto gt) { f(ch, t, pt, gt); });
  }
}

// Calls f(std::bool_constant<v>{}). The update loops are instantiated per combination of their
// options (a momentum buffer, a second stream to write, a gradient factor), so that no test is
// left inside a loop, where it would keep the loop from being vectorised.
template <class F>
void with_flag(bool v, F&& f) {
  if (v) f(std::true_type{});
  else f(std::false_type{});
}

void cpu_adam(const MultiTensorAdamArgs& a) {
  check_multi_tensor_lists("multi_tensor_adam", a.params, {&a.grads, &a.exp_avgs, &a.exp_avg_sqs, &a.model_params},
                           a.hypers.size());
  if (skip_step(a.found_inf) || a.params.empty()) return;
  const bool master = !a.model_params.empty();
  for_each_param_chunk(a.params, a.grads, "multi_tensor_adam", [&](const TensorChunk& ch, size_t t, auto pt, auto gt) {
    using T = decltype(pt);
    using G = decltype(gt);
    using A = acc_t<T>;
    T* __restrict p = static_cast<T*>(data_ptr_inline(a.params[t])) + ch.start;
    T* __restrict m = static_cast<T*>(data_ptr_inline(a.exp_avgs[t])) + ch.start;
    T* __restrict v = static_cast<T*>(data_ptr_inline(a.exp_avg_sqs[t])) + ch.start;
    const G* __restrict g = static_cast<const G*>(data_ptr_inline(a.grads[t])) + ch.start;
    G* __restrict out = master ? static_cast<G*>(data_ptr_inline(a.model_params[t])) + ch.start : nullptr;
    const A factor = static_cast<A>(a.grad_factor);
    const AdamHyper h = a.hypers[t];  // a local copy: the stores below cannot alias it
    with_flag(master, [&](auto has_out) {
      with_flag(a.grad_factor != 1.0, [&](auto scaled) {
        for (int64_t i = 0; i < ch.length; ++i) {
          A gv = static_cast<A>(static_cast<acc_t<G>>(g[i]));
          if constexpr (scaled) gv = gv * factor;
          A pv = static_cast<A>(p[i]), mv = static_cast<A>(m[i]), vv = static_cast<A>(v[i]);
          adam_update<A>(pv, gv, mv, vv, h);
          p[i] = T(pv);
          m[i] = T(mv);
          v[i] = T(vv);
          if constexpr (has_out) out[i] = G(pv);
        }
      });
    });
  });
}

void cpu_sgd(const MultiTensorSgdArgs& a) {
  check_multi_tensor_lists("multi_tensor_sgd", a.params, {&a.grads, &a.momentum_bufs, &a.model_params},
                           a.hypers.size());
  if (skip_step(a.found_inf) || a.params.empty()) return;
  const bool master = !a.model_params.empty();
  const bool momentum = !a.momentum_bufs.empty();
  for_each_param_chunk(a.params, a.grads, "multi_tensor_sgd", [&](const TensorChunk& ch, size_t t, auto pt, auto gt) {
    using T = decltype(pt);
    using G = decltype(gt);
    using A = acc_t<T>;
    T* __restrict p = static_cast<T*>(data_ptr_inline(a.params[t])) + ch.start;
    T* __restrict b = momentum ? static_cast<T*>(data_ptr_inline(a.momentum_bufs[t])) + ch.start : nullptr;
    const G* __restrict g = static_cast<const G*>(data_ptr_inline(a.grads[t])) + ch.start;
    G* __restrict out = master ? static_cast<G*>(data_ptr_inline(a.model_params[t])) + ch.start : nullptr;
    const A factor = static_cast<A>(a.grad_factor);
    const SgdHyper h = a.hypers[t];  // a local copy: the stores below cannot alias it
    with_flag(momentum, [&](auto has_buf) {
      with_flag(master, [&](auto has_out) {
        with_flag(a.grad_factor != 1.0, [&](auto scaled) {
          for (int64_t i = 0; i < ch.length; ++i) {
            A gv = static_cast<A>(static_cast<acc_t<G>>(g[i]));
            if constexpr (scaled) gv = gv * factor;
            A pv = static_cast<A>(p[i]), bv = A(0);
            if constexpr (has_buf) bv = static_cast<A>(b[i]);
            sgd_update<A>(pv, gv, bv, h);
            p[i] = T(pv);
            if constexpr (has_buf) b[i] = T(bv);
            if constexpr (has_out) out[i] = G(pv);
          }
        });
      });
    });
  });
}

TANDEM_REGISTER_KERNEL(multi_tensor_zero, DeviceKind::CPU, cpu_zero);
TANDEM_REGISTER_KERNEL(multi_tensor_cast, DeviceKind::CPU, cpu_cast);
TANDEM_REGISTER_KERNEL(multi_tensor_unscale, DeviceKind::CPU, cpu_unscale);
TANDEM_REGISTER_KERNEL(multi_tensor_sum_squares_check, DeviceKind::CPU, cpu_sum_squares_check);
TANDEM_REGISTER_KERNEL(multi_tensor_adam, DeviceKind::CPU, cpu_adam);
TANDEM_REGISTER_KERNEL(multi_tensor_sgd, DeviceKind::CPU, cpu_sgd);

}  // namespace
}  // namespace tandem::kernels
