// Helpers of the C API tests: config files in a temporary directory, and a small regression task.
#pragma once
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace tandem::capi_test {

// A directory under /tmp removed with its contents at the end of the scope.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tandem-capi-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path + "/" + name) << text;
    return path + "/" + name;
  }
};

// A TorchFort-style config: an mlp 4 -> 16 -> 3 on MSE, SGD with momentum.
inline std::string mlp_config(const std::string& extra = "") {
  return "model:\n"
         "  type: mlp\n"
         "  parameters:\n"
         "    layer_sizes: [4, 16, 3]\n"
         "loss:\n"
         "  type: MSE\n"
         "optimizer:\n"
         "  type: sgd\n"
         "  parameters:\n"
         "    learning_rate: 0.05\n"
         "    momentum: 0.9\n"
         "training:\n"
         "  seed: 3\n" +
         extra;
}

// Row i of the global batch: x [4] and its target y [3] (smooth functions of x).
inline void sample(int64_t i, float* x, float* y) {
  for (int j = 0; j < 4; ++j) x[j] = static_cast<float>(std::sin(0.37 * (i + 1) * (j + 1)));
  y[0] = x[0] * x[1];
  y[1] = std::cos(x[2]);
  y[2] = 0.5f * (x[3] - x[0]);
}

// Rows [begin, end) of the batch of step `step` (each step its own rows).
inline void batch(int64_t step, int64_t begin, int64_t end, std::vector<float>& x, std::vector<float>& y) {
  x.resize(static_cast<size_t>(end - begin) * 4);
  y.resize(static_cast<size_t>(end - begin) * 3);
  for (int64_t i = begin; i < end; ++i)
    sample(1000 * step + i, &x[static_cast<size_t>(i - begin) * 4], &y[static_cast<size_t>(i - begin) * 3]);
}

}  // namespace tandem::capi_test
