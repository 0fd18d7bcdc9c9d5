// One libFuzzer harness: TANDEM_FUZZ_ENTRY (a function of fuzz_inputs.h) per executable.
#include "fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tandem::fuzz::TANDEM_FUZZ_ENTRY(data, size);
  return 0;
}
