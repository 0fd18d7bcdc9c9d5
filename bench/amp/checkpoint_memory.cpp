// Peak RSS of one forward + backward of the cnn with and without gradient checkpointing, and a
// hash of the gradients (equal in both modes). One mode per process, so ru_maxrss is that mode's:
//   tandem-bench-checkpoint-memory --mode plain --batch 256
//   tandem-bench-checkpoint-memory --mode checkpoint --segments 4 --batch 256
// Prints one JSON line.
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <CLI/CLI.hpp>

#include "nn/checkpoint_sequential.h"
#include "nn/models.h"
#include "runtime/autocast.h"
#include "runtime/ops.h"
#include "runtime/storage.h"

using namespace tandem;

namespace {
// Wraps the CPU allocator to count live tensor bytes and their peak (RSS also counts code, the
// allocator's free lists and fragmentation).
class CountingAllocator final : public Allocator {
 public:
  explicit CountingAllocator(Allocator& inner) : inner_(inner) {}
  void* allocate(size_t nbytes, Device device) override {
    void* p = inner_.allocate(nbytes, device);
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = nbytes;
    live_ += nbytes;
    peak_ = std::max(peak_, live_);
    return p;
  }
  void deallocate(void* ptr, Device device) noexcept override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {
        live_ -= it->second;
        sizes_.erase(it);
      }
    }
    inner_.deallocate(ptr, device);
  }
  size_t live() const { return live_; }
  size_t peak() const { return peak_; }
  void reset_peak() { peak_ = live_; }

 private:
  Allocator& inner_;
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  size_t live_ = 0, peak_ = 0;
};

long max_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}
uint64_t fnv1a(const void* p, size_t n, uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
}  // namespace

int main(int argc, char** argv) {
  std::string mode = "plain", amp = "off";
  int64_t batch = 256;
  int segments = 4;
  CLI::App app{"peak RSS of cnn forward+backward with/without gradient checkpointing"};
  app.add_option("--mode", mode, "plain | checkpoint")->check(CLI::IsMember({"plain", "checkpoint"}));
  app.add_option("--batch", batch, "batch size");
  app.add_option("--segments", segments, "checkpoint_sequential segments");
  app.add_option("--amp", amp, "off | f16 | bf16")->check(CLI::IsMember({"off", "f16", "bf16"}));
  CLI11_PARSE(app, argc, argv);

  // Every tensor made from here on is counted (the model, data and all activations).
  static CountingAllocator counting(allocator_for(kCPU));
  register_allocator(DeviceKind::CPU, &counting);
  Generator g(1);
  auto model = nn::make_cnn(g);
  Generator gx(2);
  Tensor x = rand_uniform({batch, 1, 28, 28}, 0, 1, gx);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = i % 10;
  Tensor y = Tensor::from_vector(labels, {batch});
  const long before = max_rss_kb();
  const size_t base = counting.live();
  counting.reset_peak();
  Tensor logits;
  {
    std::optional<AutocastGuard> ac;
    if (amp != "off") ac.emplace(amp == "f16" ? DType::f16 : DType::bf16);
    logits = mode == "plain" ? model->forward(x) : nn::checkpoint_sequential(*model, segments, x);
  }
  const size_t after_forward = counting.live() - base, forward_peak = counting.peak() - base;
  ops::cross_entropy(logits, y).backward();
  const long peak = max_rss_kb();
  const size_t total_peak = counting.peak() - base;
  uint64_t h = 1469598103934665603ull;
  for (const Tensor& p : model->parameters()) h = fnv1a(p.grad().data_ptr(), p.grad().nbytes(), h);
  std::printf("{\"bench\":\"checkpoint_memory\",\"model\":\"cnn\",\"mode\":\"%s\",\"segments\":%d,\"batch\":%lld,"
              "\"amp\":\"%s\",\"saved_after_forward_mb\":%.1f,\"forward_peak_mb\":%.1f,\"peak_tensor_mb\":%.1f,"
              "\"rss_before_kb\":%ld,\"peak_rss_kb\":%ld,\"grad_hash\":\"%016llx\"}\n",
              mode.c_str(), mode == "plain" ? 0 : segments, static_cast<long long>(batch), amp.c_str(), after_forward / 1048576.0, forward_peak / 1048576.0,
              total_peak / 1048576.0, before, peak,
              static_cast<unsigned long long>(h));
}
