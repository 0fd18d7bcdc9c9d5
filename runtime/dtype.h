// Element types and the one dtype-dispatch helper: dispatch(dtype, [&](auto tag) { using T = decltype(tag); ... }).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "runtime/backend/common/half.h"
#include "runtime/error.h"

namespace tandem {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::u8: return 1;
  }
  return 0;
}
const char* dtype_name(DType t);           // "f32", "bf16", ...
DType dtype_from_name(const std::string&);  // inverse of dtype_name; throws ValueError
constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
constexpr bool is_low_precision(DType t) { return t == DType::f16 || t == DType::bf16; }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <class T> constexpr DType dtype_v = dtype_of<T>::value;

// The accumulation type of T: float for the 16-bit floats, T otherwise.
template <class T> struct acc_type { using type = T; };
template <> struct acc_type<half> { using type = float; };
template <> struct acc_type<bfloat16> { using type = float; };
template <class T> using acc_t = typename acc_type<T>::type;
// Whether T is one of the floating storage types (f16, bf16, f32, f64).
template <class T> constexpr bool is_floating_type_v = std::is_floating_point_v<acc_t<T>>;

enum class DTypeSet { All, Floating, Float32Or64 };

// Calls f with a value of the C++ type of dtype. `what` names the op in the error for a dtype
// outside `allowed`.
template <class F>
decltype(auto) dispatch(DType t, F&& f, const char* what = "op", DTypeSet allowed = DTypeSet::All) {
  bool ok = allowed == DTypeSet::All || (allowed == DTypeSet::Floating && is_floating(t)) ||
            (allowed == DTypeSet::Float32Or64 && (t == DType::f32 || t == DType::f64));
  if (!ok) TANDEM_FAIL(NotSupported, "{} does not support dtype {}", what, dtype_name(t));
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::f16: return f(half{});
    case DType::bf16: return f(bfloat16{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::u8: return f(uint8_t{});
  }
  TANDEM_FAIL(Internal, "unknown dtype {}", int(t));
}

template <class F>
decltype(auto) dispatch_floating(DType t, const char* what, F&& f) {
  return dispatch(t, std::forward<F>(f), what, DTypeSet::Floating);
}

}  // namespace tandem
