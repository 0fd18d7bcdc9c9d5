// Causal attention forward + backward on the CPU: the fused op (ops::causal_attention) against the
// same attention composed of existing ops (batched matmul, additive mask, softmax, matmul). One JSON
// line per path with the median of --reps timed runs after one warm-up.
//   OMP_NUM_THREADS=1 tandem-bench-attention --b 8 --h 4 --t 128 --d 64 --reps 20
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <omp.h>

#include "runtime/ops.h"
#include "tests/ops_attn/composed.h"

using namespace tandem;

int main(int argc, char** argv) {
  int64_t b = 8, h = 4, t = 128, d = 64;
  int reps = 20;
  std::string path = "both";
  CLI::App app{"causal attention forward+backward: fused vs composed"};
  app.add_option("--b", b);
  app.add_option("--h", h);
  app.add_option("--t", t);
  app.add_option("--d", d);
  app.add_option("--reps", reps);
  app.add_option("--path", path)->check(CLI::IsMember({"fused", "composed", "both"}));
  CLI11_PARSE(app, argc, argv);

  Generator gen(0);
  const Shape s{b, h, t, d};
  Tensor q = rand_normal(s, 0, 1, gen), k = rand_normal(s, 0, 1, gen), v = rand_normal(s, 0, 1, gen);
  Tensor dout = rand_normal(s, 0, 1, gen);
  for (Tensor* x : {&q, &k, &v}) x->set_requires_grad(true);
  const Tensor mask = testing::causal_mask(t, DType::f32);

  auto time_path = [&](const std::string& name) {
    auto once = [&] {
      Tensor y = name == "fused" ? ops::causal_attention(q, k, v) : testing::composed_attention(q, k, v, mask);
      grad({y}, {q, k, v}, {dout});
    };
    once();
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      once();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("{\"bench\":\"attention\",\"path\":\"%s\",\"b\":%ld,\"h\":%ld,\"t\":%ld,\"d\":%ld,\"threads\":%d,"
                "\"reps\":%d,\"fwd_bwd_ms_median\":%.3f,\"fwd_bwd_ms_min\":%.3f}\n",
                name.c_str(), static_cast<long>(b), static_cast<long>(h), static_cast<long>(t), static_cast<long>(d),
                omp_get_max_threads(), reps, ms[ms.size() / 2], ms.front());
    std::fflush(stdout);
  };
  if (path != "composed") time_path("fused");
  if (path != "fused") time_path("composed");
  return 0;
}
