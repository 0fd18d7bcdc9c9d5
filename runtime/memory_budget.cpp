// Tensor-memory accounting: atomic counters per device (kind x index), the budgets, size parsing.
#include "runtime/memory_budget.h"

#include <array>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace tandem {

void throw_out_of_memory(const char* file, int line, const std::string& message) {
  try {
    throw_error(ErrorKind::Backend, file, line, message);  // the common "file:line: message" text
  } catch (const BackendError& e) {
    throw OutOfMemoryError(e.what());
  }
}

namespace memory {

namespace {

constexpr int kMaxIndex = 64;  // devices of one kind that are counted apart (more share the last slot)

struct Counters {
  std::atomic<size_t> used{0}, peak{0};
};

struct Table {
  std::array<std::atomic<size_t>, kNumDeviceKinds> limits{};
  std::array<std::array<Counters, kMaxIndex>, kNumDeviceKinds> counters;
};

Table& table() {
  static Table t;
  return t;
}

Counters& counters(Device d) {
  const int index = d.index < 0 ? 0 : (d.index < kMaxIndex ? d.index : kMaxIndex - 1);
  return table().counters[static_cast<size_t>(d.kind)][static_cast<size_t>(index)];
}

}  // namespace

void set_limit(DeviceKind kind, size_t bytes) { table().limits[static_cast<size_t>(kind)] = bytes; }
size_t limit(DeviceKind kind) { return table().limits[static_cast<size_t>(kind)]; }
size_t in_use(Device device) { return counters(device).used.load(); }
size_t peak(Device device) { return counters(device).peak.load(); }
void reset_peak(Device device) { counters(device).peak = counters(device).used.load(); }

void charge(Device device, size_t nbytes) {
  Counters& c = counters(device);
  const size_t budget = limit(device.kind);
  size_t now = c.used.fetch_add(nbytes) + nbytes;
  if (budget > 0 && now > budget) {
    c.used.fetch_sub(nbytes);
    throw_out_of_memory(__FILE__, __LINE__,
                        fmt::format("out of memory on {}: {} more would hold {} of the {} budget (--memory-limit)",
                                    device.str(), format_size(nbytes), format_size(now), format_size(budget)));
  }
  size_t p = c.peak.load(std::memory_order_relaxed);
  while (now > p && !c.peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

void release(Device device, size_t nbytes) noexcept { counters(device).used.fetch_sub(nbytes); }

size_t parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const char* begin = text.c_str() + i;
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  TANDEM_CHECK(end != begin && std::isfinite(value) && value >= 0 && *begin != '-' && *begin != '+',
               "'{}' is not a size: give a number with a unit, e.g. 96MB, 2GB, 1.5GiB (KB/MB/GB: powers of 1000, "
               "KiB/MiB/GiB: of 1024)", text);
  std::string unit;  // case and spaces do not matter: "100 mib" is "100MiB"
  for (const char* c = end; *c; ++c)
    if (!std::isspace(static_cast<unsigned char>(*c))) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  static const std::pair<const char*, double> units[] = {
      {"", 1},   {"b", 1},   {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},     {"tb", 1e12},         {"k", 1e3},
      {"m", 1e6}, {"g", 1e9}, {"t", 1e12}, {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0},
      {"tib", 1099511627776.0}};
  double scale = 0;
  for (const auto& [name, s] : units)
    if (unit == name) scale = s;
  TANDEM_CHECK(scale > 0, "'{}': unknown size unit '{}' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", text, unit);
  const double bytes = value * scale;
  TANDEM_CHECK(bytes < 9e18, "'{}' is too large a size", text);
  return static_cast<size_t>(std::llround(bytes));
}

std::string format_size(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1073741824.0) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (b >= 1048576.0) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace memory
}  // namespace tandem
