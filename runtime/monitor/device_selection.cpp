// choose_device (--min-free-memory's sizes are memory::parse_size's).
#include "runtime/monitor/device_selection.h"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/error.h"

namespace tandem::monitor {

std::string format_bytes(uint64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

DeviceChoice choose_device(const std::vector<GpuStats>& gpus, int local_rank, int local_size,
                           uint64_t min_free_bytes) {
  TANDEM_CHECK(local_size >= 1 && local_rank >= 0 && local_rank < local_size,
               "choose_device: local rank {} of {} is not a rank of the node", local_rank, local_size);
  DeviceChoice c;
  if (gpus.empty()) {
    c.reason = "cpu: no GPU visible";
    return c;
  }
  std::vector<const GpuStats*> eligible;
  std::string skipped;
  for (const GpuStats& g : gpus) {
    std::string why;
    if (!g.memory_free) why = g.lost ? "lost" : "free memory unavailable";
    else if (*g.memory_free < min_free_bytes) why = fmt::format("{} free", format_bytes(*g.memory_free));
    if (why.empty()) {
      eligible.push_back(&g);
    } else {
      skipped += fmt::format("{}cuda:{} {}", skipped.empty() ? "" : ", ", g.index, why);
    }
  }
  std::stable_sort(eligible.begin(), eligible.end(), [](const GpuStats* a, const GpuStats* b) {
    return *a->memory_free != *b->memory_free ? *a->memory_free > *b->memory_free : a->index < b->index;
  });
  const std::string minimum = min_free_bytes ? fmt::format(" with >= {} free", format_bytes(min_free_bytes)) : "";
  const std::string skip_note = skipped.empty() ? "" : fmt::format(" (skipped: {})", skipped);
  if (static_cast<int>(eligible.size()) < local_size) {
    c.reason = fmt::format("cpu: {} rank{} on this node but {} of {} GPU{}{}{}; NCCL needs a GPU per rank",
                           local_size, local_size == 1 ? "" : "s", eligible.size(), gpus.size(),
                           gpus.size() == 1 ? "" : "s", minimum, skip_note);
    return c;
  }
  const GpuStats& g = *eligible[local_rank];
  c.device = Device(DeviceKind::CUDA, g.index);
  const std::string place = local_size == 1 ? "the most free memory"
                                            : fmt::format("rank {} of {} on this node by free memory", local_rank,
                                                          local_size);
  c.reason = fmt::format("cuda:{} ({}): {} free of {}, {} of {} GPU{}{}{}", g.index, g.name.empty() ? "?" : g.name,
                         format_bytes(*g.memory_free), g.memory_total ? format_bytes(*g.memory_total) : "?", place,
                         gpus.size(), gpus.size() == 1 ? "" : "s", minimum, skip_note);
  return c;
}

}  // namespace tandem::monitor
