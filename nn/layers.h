// Every nn layer in one include.
#pragma once
#include "nn/layers/activation.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/embedding.h"
#include "nn/layers/flatten.h"
#include "nn/layers/identity.h"
#include "nn/layers/layer_norm.h"
#include "nn/layers/linear.h"
#include "nn/layers/pool.h"
#include "nn/layers/sequential.h"
