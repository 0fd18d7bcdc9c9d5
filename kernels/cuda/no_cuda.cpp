// The device query (runtime/device_query.h) of a build without CUDA (TANDEM_CUDA=OFF): there is never a device.
#include "runtime/device_query.h"
#include "runtime/error.h"

namespace tandem::cuda {

int device_count() { return 0; }
bool available() { return false; }
std::string describe() { return "no CUDA device: tandem was built without CUDA (TANDEM_CUDA=OFF)"; }
Device default_device(bool insist) {
  if (insist) TANDEM_FAIL(NotSupported, "{}; rebuild with -DTANDEM_CUDA=ON or use the CPU", describe());
  return kCPU;
}
DeviceInfo device_info(int index) { TANDEM_FAIL(NotSupported, "cuda:{}: {}", index, describe()); }
void* native_stream(Device device) { TANDEM_FAIL(NotSupported, "{}: {}", device.str(), describe()); }
int pointer_device(const void*) { return -1; }

}  // namespace tandem::cuda
