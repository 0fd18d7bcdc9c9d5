/* A fake libnvidia-ml for the monitor's tests on machines without a GPU: the NVML entry points
 * tandem calls, with NVML's signatures, answering canned figures for three GPUs. The tests point
 * TANDEM_NVML_LIBRARY at it and steer it through the fake_nvml_* calls (a GPU that is lost, a GPU's
 * free memory) and FAKE_NVML_INIT_FAIL (nvmlInit_v2 fails as without a driver). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct FakeDevice {
  int index;
} * nvmlDevice_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;

enum { OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, DRIVER_NOT_LOADED = 9, GPU_IS_LOST = 15 };
#define COUNT 3
#define GiB (1024ull * 1024ull * 1024ull)

static struct FakeDevice devices[COUNT] = {{0}, {1}, {2}};
static const char* names[COUNT] = {"Fake GPU A100", "Fake GPU H100", "Fake \"GPU\" \\ C"};
static const char* uuids[COUNT] = {"GPU-11111111-aaaa-bbbb-cccc-000000000000", "GPU-22222222-aaaa-bbbb-cccc-000000000001",
                                   "GPU-11112222-aaaa-bbbb-cccc-000000000002"};
static unsigned long long totals[COUNT] = {80 * GiB, 80 * GiB, 40 * GiB};
static unsigned long long frees[COUNT] = {10 * GiB, 70 * GiB, 30 * GiB};
static int lost[COUNT];
static int initialised;

/* Test controls. */
void fake_nvml_set_lost(int index, int is_lost) { lost[index] = is_lost; }
void fake_nvml_set_free(int index, unsigned long long bytes) { frees[index] = bytes; }

static int check(nvmlDevice_t d) {
  if (!initialised) return UNINITIALIZED;
  if (!d || d->index < 0 || d->index >= COUNT) return INVALID_ARGUMENT;
  return lost[d->index] ? GPU_IS_LOST : OK;
}

nvmlReturn_t nvmlInit_v2(void) {
  if (getenv("FAKE_NVML_INIT_FAIL")) return DRIVER_NOT_LOADED;
  initialised = 1;
  return OK;
}
nvmlReturn_t nvmlShutdown(void) {
  initialised = 0;
  return OK;
}
const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case OK: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!initialised) return UNINITIALIZED;
  *count = COUNT;
  return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!initialised) return UNINITIALIZED;
  if (index >= COUNT) return INVALID_ARGUMENT;
  *device = &devices[index];
  return OK;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  int r = check(d);
  if (r == OK) snprintf(name, length, "%s", names[d->index]);
  return r;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  int r = check(d);
  if (r == OK) snprintf(uuid, length, "%s", uuids[d->index]);
  return r;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  int r = check(d);
  if (r == OK) {
    m->total = totals[d->index];
    m->free = frees[d->index];
    m->used = totals[d->index] - frees[d->index];
  }
  return r;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  int r = check(d);
  if (r == OK) {
    u->gpu = 10u * (unsigned)d->index + 5u;
    u->memory = 3u * (unsigned)d->index + 1u;
  }
  return r;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int* t) {
  int r = check(d);
  if (r == OK && sensor != 0) return INVALID_ARGUMENT;
  if (r == OK) *t = 40u + (unsigned)d->index;
  return r;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  int r = check(d);
  if (r == OK) *mw = 123456u + 1000u * (unsigned)d->index;
  return r;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int* mw) {
  int r = check(d);
  if (r == OK) *mw = 700000u;
  return r;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int* mhz) {
  int r = check(d);
  if (r == OK && type != 1) return INVALID_ARGUMENT; /* tandem asks for NVML_CLOCK_SM only */
  if (r == OK) *mhz = 1980u - 100u * (unsigned)d->index;
  return r;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int* major, int* minor) {
  int r = check(d);
  if (r == OK) {
    *major = d->index == 0 ? 8 : 9;
    *minor = 0;
  }
  return r;
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int error_type, int counter_type, unsigned long long* n) {
  int r = check(d);
  if (r != OK) return r;
  if (error_type != 1 || counter_type != 0) return INVALID_ARGUMENT; /* uncorrected, volatile */
  if (d->index == 2) return NOT_SUPPORTED;                           /* a GPU without ECC */
  *n = (unsigned long long)d->index * 2u;
  return OK;
}
