// choose_device and the size parser of --min-free-memory.
#include "runtime/monitor/device_selection.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

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

uint64_t parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const char* begin = text.c_str() + i;
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  TANDEM_CHECK(end != begin && std::isfinite(value) && value >= 0 && *begin != '-' && *begin != '+',
               "'{}' is not a size: expected a number and a unit, e.g. 512MB, 2GB, 1.5GiB", text);
  std::string unit(end);
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }),
             unit.end());
  std::string lower;
  for (char ch : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (lower.empty() || lower == "b") scale = 1;
  else if (lower == "kb" || lower == "k") scale = 1e3;
  else if (lower == "mb" || lower == "m") scale = 1e6;
  else if (lower == "gb" || lower == "g") scale = 1e9;
  else if (lower == "tb" || lower == "t") scale = 1e12;
  else if (lower == "kib") scale = 1024.0;
  else if (lower == "mib") scale = 1024.0 * 1024;
  else if (lower == "gib") scale = 1024.0 * 1024 * 1024;
  else if (lower == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  TANDEM_CHECK(scale > 0, "'{}': unknown size unit '{}' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", text, unit);
  const double bytes = value * scale;
  TANDEM_CHECK(bytes < 9e18, "'{}' is too large a size", text);
  return static_cast<uint64_t>(std::llround(bytes));
}

}  // namespace tandem::monitor
