// The A/B switches of GPU sessions (TANDEM_CE_GRAD, TANDEM_COLUMN_SUMS, ...): an environment
// variable that picks one of a few named ways, the first of them the default.
#pragma once
#include <initializer_list>

namespace tandem {

// The index in `ways` of environment variable `name`'s value: 0 (the default) when it is unset or
// empty; any other value throws ValueError naming the variable, the value and the ways. Read at
// each call: a caller that reads it once keeps the result.
int env_switch(const char* name, std::initializer_list<const char*> ways);

}  // namespace tandem
