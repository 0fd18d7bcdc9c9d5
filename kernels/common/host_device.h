// TANDEM_HD marks math that compiles for host and device (nvcc) and under the SIMT emulator (g++).
#pragma once
#if defined(__CUDACC__) || defined(TANDEM_SIMT_EMULATOR)
#define TANDEM_HD __host__ __device__
#else
#define TANDEM_HD
#endif
