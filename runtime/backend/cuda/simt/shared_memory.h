// SIMT emulator: shared memory as checked views into the block's arena: dynamic shared memory
// (dynamic_shared) and static arrays (SIMT_SHARED, which kernels spell TANDEM_SHARED), every access
// checked for bounds, uninitialised reads and races (race_check.h). Part of simt.h.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "runtime/backend/cuda/simt/block.h"
#include "runtime/backend/cuda/simt/race_check.h"

namespace tandem::simt {

// ---- shared memory: bounds- and race-checked views into the block's arena ----

template <class T>
class SharedRef {
 public:
  SharedRef(detail::Block* b, size_t off, SharedRegion r) : b_(b), off_(off), r_(r) {}
  operator T() const {
    check(false);
    T v;
    std::memcpy(&v, b_->smem.data() + off_, sizeof(T));
    return v;
  }
  SharedRef& operator=(const T& v) {
    check(true);
    std::memcpy(b_->smem.data() + off_, &v, sizeof(T));
    return *this;
  }
  SharedRef& operator=(const SharedRef& o) { return *this = static_cast<T>(o); }
  // A cp.async copy to here is issued: checked as a write, and until it lands (land()) any access
  // fails, since the bytes may change at any moment.
  void claim() const {
    check(true);
    for (size_t i = off_; i < off_ + sizeof(T); ++i) b_->shadow[i].in_flight = true;
  }
  void land(const T& v) const {
    for (size_t i = off_; i < off_ + sizeof(T); ++i) b_->shadow[i].in_flight = false;
    SharedRef(b_, off_, r_) = v;
  }
  SharedRef& operator+=(const T& v) { return *this = static_cast<T>(*this) + v; }
  SharedRef& operator-=(const T& v) { return *this = static_cast<T>(*this) - v; }
  SharedRef& operator*=(const T& v) { return *this = static_cast<T>(*this) * v; }

 private:
  // Bounds, uninitialised reads and races: race_check.h.
  void check(bool write) const { detail::check_shared_access(*b_, off_, sizeof(T), r_, write); }
  detail::Block* b_;
  size_t off_;
  SharedRegion r_;
};

template <class T>
class SharedPtr {
 public:
  SharedPtr(detail::Block* b, size_t off, SharedRegion r) : b_(b), off_(off), r_(r) {}
  SharedRef<T> operator[](long long i) const {
    if (i < 0) detail::fail("negative index " + std::to_string(i) + " into " + r_.what());
    return SharedRef<T>(b_, off_ + static_cast<size_t>(i) * sizeof(T), r_);
  }
  SharedPtr operator+(long long i) const { return SharedPtr(b_, off_ + static_cast<size_t>(i) * sizeof(T), r_); }
  template <class U>
  SharedPtr<U> as() const { return SharedPtr<U>(b_, off_, r_); }
  size_t byte_offset() const { return off_; }
  const SharedRegion& region() const { return r_; }

 private:
  detail::Block* b_;
  size_t off_;
  SharedRegion r_;
};

template <class T>
SharedPtr<T> dynamic_shared() {
  detail::Block& b = detail::block();
  return SharedPtr<T>(&b, 0, SharedRegion{0, b.dynamic_bytes, nullptr});
}

// A static shared array (A = E[N], E[N][M], ...): each index checked against its extent, the
// elements checked as dynamic shared memory's are.
template <class A>
class SharedArray;
template <class E, size_t N>
class SharedArray<E[N]> {
 public:
  SharedArray(detail::Block* b, size_t off, SharedRegion r) : b_(b), off_(off), r_(r) {}
  auto operator[](long long i) const {
    if (i < 0 || static_cast<unsigned long long>(i) >= N)
      detail::fail("index " + std::to_string(i) + " out of bounds of " + r_.what() + " (extent " + std::to_string(N) +
                   ")");
    const size_t at = off_ + static_cast<size_t>(i) * sizeof(E);
    if constexpr (std::is_array_v<E>) return SharedArray<E>(b_, at, r_);
    else return SharedRef<E>(b_, at, r_);
  }

 private:
  detail::Block* b_;
  size_t off_;
  SharedRegion r_;
};

// The block's static shared variable declared at `site` (a static local of the declaration, so each
// template instance has its own), placed in the arena after the dynamic bytes the first time a
// thread of the launch reaches it, NaN-poisoned and unwritten at every block's start as the rest.
template <class A>
auto static_shared(const void* site, const char* name) {
  static_assert(std::is_trivially_copyable_v<std::remove_all_extents_t<A>>, "shared memory of a non-trivial type");
  detail::Block& b = detail::block();
  size_t off = 0;
  const auto found = std::find_if(b.statics.begin(), b.statics.end(),
                                  [&](const detail::StaticShared& s) { return s.site == site; });
  if (found != b.statics.end()) {
    off = found->offset;
  } else {
    off = (b.smem.size() + 15) / 16 * 16;
    if (off + sizeof(A) > kMaxDynamicShared)
      detail::fail("static shared memory `" + std::string(name) + "` (" + std::to_string(sizeof(A)) +
                   " bytes) beside the launch's other " + std::to_string(b.smem.size()) +
                   " bytes of shared memory exceeds the 48 KiB a block may use");
    b.smem.resize(off + sizeof(A), static_cast<unsigned char>(0xff));
    b.shadow.resize(off + sizeof(A));
    b.statics.push_back(detail::StaticShared{site, off});
  }
  const SharedRegion r{off, off + sizeof(A), name};
  if constexpr (std::is_array_v<A>) return SharedArray<A>(&b, off, r);
  else return SharedRef<A>(&b, off, r);
}

}  // namespace tandem::simt

// Declares the block's static shared variable `name` of `type` (T, T[N], T[N][M], ...; a type with a
// comma needs an alias) as a checked view: TANDEM_SHARED's emulator form.
#define SIMT_SHARED(type, name)         \
  static char name##_simt_shared_site; \
  auto name = ::tandem::simt::static_shared<type>(&name##_simt_shared_site, #name)
