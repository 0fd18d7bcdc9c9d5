// The apps build on the library's training engine (train/, namespace tandem::train): its names are
// the apps' own, so app code writes Trainer and TrainConfig as before.
#pragma once

namespace tandem::train {}
namespace tandem::app {
using namespace ::tandem::train;
}
