#include "runtime/backend/env_switch.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/error.h"

namespace tandem {

int env_switch(const char* name, std::initializer_list<const char*> ways) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  int index = 0;
  std::string listed;
  for (const char* way : ways) {
    if (std::strcmp(v, way) == 0) return index;
    listed += (index == 0 ? "" : index + 1 == static_cast<int>(ways.size()) ? " or " : ", ") + std::string(way);
    ++index;
  }
  TANDEM_FAIL(Value, "{}={}: expected {}", name, v, listed);
}

}  // namespace tandem
