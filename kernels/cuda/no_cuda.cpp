// Device discovery for a build without CUDA (TANDEM_CUDA=OFF): there is never a device.
#include "kernels/cuda/device.h"
#include "runtime/error.h"

namespace tandem::cuda {

int device_count() { return 0; }
bool available() { return false; }
std::string describe() { return "no CUDA device: tandem was built without CUDA (TANDEM_CUDA=OFF)"; }
Device default_device(bool insist) {
  if (insist) TANDEM_FAIL(NotSupported, "{}; rebuild with -DTANDEM_CUDA=ON or use the CPU", describe());
  return kCPU;
}

}  // namespace tandem::cuda
