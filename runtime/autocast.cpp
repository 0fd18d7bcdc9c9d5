// Autocast state (thread-local). The casting policy with its per-scope cast cache is owned by the
// mixed-precision work; until then autocast_arg is the identity outside a guard.
#include "runtime/autocast.h"

namespace tandem {

namespace {
thread_local std::optional<DType> t_autocast;
}

std::optional<DType> autocast_dtype() { return t_autocast; }

Tensor autocast_arg(const Tensor& t, AutocastCategory) { return t; }

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : prev_(t_autocast) {
  if (enabled) t_autocast = dtype;
}
AutocastGuard::~AutocastGuard() { t_autocast = prev_; }

}  // namespace tandem
