// All differentiable ops.
#pragma once
#include "runtime/autograd.h"
#include "runtime/ops/conv.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/matmul.h"
#include "runtime/ops/norm.h"
#include "runtime/ops/reduce.h"
#include "runtime/ops/shape.h"
#include "runtime/random.h"
#include "runtime/tensor.h"
