// How a loss combines its per-element terms: declared apart so that the op entry points
// (runtime/ops/loss.h) and the kernel tables (runtime/backend/loss.h) share it without one
// including the other.
#pragma once

namespace tandem::ops {

enum class Reduction { Mean, Sum, None };

}  // namespace tandem::ops
