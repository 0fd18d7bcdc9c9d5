// The Fashion-MNIST models of tandem-train and their FLOP counts for the benchmark.
#pragma once
#include <memory>
#include <string>

#include "nn/layers/sequential.h"
#include "runtime/random.h"

namespace tandem::nn {

// Linear(784,512)-ReLU-Linear(512,512)-ReLU-Linear(512,10); input [N, 784].
std::shared_ptr<Sequential> make_mlp(Generator& gen);
// Conv2d(1,32,3,p1)-BatchNorm2d(32)-ReLU-MaxPool2d(2)-Conv2d(32,64,3,p1)-BatchNorm2d(64)-ReLU-
// MaxPool2d(2)-Flatten-Linear(3136,128)-ReLU-Linear(128,10); input [N, 1, 28, 28].
std::shared_ptr<Sequential> make_cnn(Generator& gen);
// "mlp" or "cnn"; anything else throws ValueError naming the choices.
std::shared_ptr<Sequential> make_model(const std::string& name, Generator& gen);

// Forward + backward FLOPs of one sample. Counted: the GEMMs and convolutions only, 2*M*N*K per
// GEMM (a conv as its im2col GEMM: 2 * Ho*Wo * Cout * Cin*k*k per sample), backward = 2x forward
// (input and weight gradients; also for the first layer, whose input gradient a trainer would not
// need). Not counted: bias adds, BN, ReLU, pooling, softmax/loss, optimizer (all O(activations)).
// mlp: 3 * 2*(784*512 + 512*512 + 512*10) = 4,012,032
// cnn: 3 * 2*(784*32*9 + 196*64*288 + 3136*128 + 128*10) = 25,446,912
// `name`: a registered type with a FLOP count (nn/model_registry.h), in tandem-train's shape.
double model_flops_per_sample(const std::string& name);
double cnn_flops_per_sample();

}  // namespace tandem::nn
