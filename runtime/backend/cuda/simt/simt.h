// SIMT emulator (header-only): runs CUDA kernel sources compiled by g++ as host C++ with CUDA's
// execution model. Force-included (-include) before every .cu compiled for DeviceKind::SIM.
// Blocks run one at a time; the threads of a block are fibers (Boost.Context) on one OS thread, so
// shared memory, dynamic (dynamic_shared) and static (SIMT_SHARED, which kernels spell TANDEM_SHARED),
// lives in the block's checked arena. Barriers reached by only some threads, warp operations whose
// mask names exited or missing lanes, and out-of-bounds, uninitialised or racy shared memory accesses
// throw simt::KernelError instead of hanging or silently passing.
//
// One header per part: cuda_names.h (the CUDA keywords and built-ins for g++), run_order.h (the order
// blocks and threads run in), block.h (a block's state; how a thread suspends), scheduler.h (fibers,
// barriers, launch), race_check.h and shared_memory.h (checked shared memory), async_copy.h
// (cp.async), warp.h (shuffles, votes, the all-gather under mma.sync), atomics.h, intrinsics.h.
#pragma once

#include "runtime/backend/cuda/simt/cuda_names.h"
#include "runtime/backend/cuda/simt/run_order.h"
#include "runtime/backend/cuda/simt/block.h"
#include "runtime/backend/cuda/simt/scheduler.h"
#include "runtime/backend/cuda/simt/race_check.h"
#include "runtime/backend/cuda/simt/shared_memory.h"
#include "runtime/backend/cuda/simt/async_copy.h"
#include "runtime/backend/cuda/simt/warp.h"
#include "runtime/backend/cuda/simt/atomics.h"
#include "runtime/backend/cuda/simt/intrinsics.h"
