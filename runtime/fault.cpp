// TANDEM_FAULT parsing and the self-inflicted faults of the reliability tests (runtime/fault.h).
#include "runtime/fault.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "runtime/env_settings.h"
#include "runtime/error.h"

namespace tandem::fault {

namespace {
Spec* parse(const char* text) {
  if (text == nullptr || *text == '\0') return nullptr;
  auto* s = new Spec;  // lives for the process: read by every later call
  std::stringstream in(text);
  std::string part;
  for (int i = 0; std::getline(in, part, ':'); ++i) {
    size_t eq = part.find('=');
    if (i == 0) {
      s->name = part;
    } else if (eq != std::string::npos) {
      s->values[part.substr(0, eq)] = part.substr(eq + 1);
    } else {
      TANDEM_CHECK(s->stage.empty(), "TANDEM_FAULT='{}': more than one stage ('{}', '{}')", text, s->stage, part);
      s->stage = part;
    }
  }
  TANDEM_CHECK(!s->name.empty(), "TANDEM_FAULT='{}' names no fault point", text);
  return s;
}
}  // namespace

int64_t Spec::value(const std::string& key, int64_t fallback) const {
  auto it = values.find(key);
  if (it == values.end()) return fallback;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    TANDEM_FAIL(Value, "TANDEM_FAULT: {}={} is not an integer", key, it->second);
  }
}

const Spec* spec() {
  static const Spec* s = [] {
    const std::optional<std::string> text = env::text("TANDEM_FAULT");
    return parse(text ? text->c_str() : nullptr);
  }();
  return s;
}

bool armed(const char* name, const char* stage) {
  const Spec* s = spec();
  if (s == nullptr || s->name != name) return false;
  return stage == nullptr || s->stage.empty() || s->stage == stage;
}

void raise_now(int signal, const std::string& what) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "tandem fault: %s at %lld\n", what.c_str(), static_cast<long long>(ms));
  std::fflush(stderr);
  ::kill(::getpid(), signal);
}

void kill_point(const char* name, const char* stage) {
  const Spec* s = spec();
  if (s == nullptr || s->name != name || s->stage != stage) return;
  static std::atomic<int64_t> hits{0};
  if (++hits != s->value("hit", 1)) return;
  raise_now(SIGKILL, std::string(name) + ":" + stage + " (SIGKILL)");
}

}  // namespace tandem::fault
