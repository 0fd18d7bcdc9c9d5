// Loopback addresses and names, for the HTTP endpoints that trust the local machine: tandem-serve's
// reads and tandem-train's status port.
#pragma once
#include "apps/common/engine.h"
#include <string>

namespace tandem::app {

// Whether `bind` is a loopback address (127.0.0.0/8, ::1) or localhost.
bool is_loopback_address(const std::string& bind);

// Whether a request's Host header names this machine's loopback ("localhost:8080", "127.0.0.1",
// "[::1]:8080"). A browser sends the name it was given: a page of another site whose name was made
// to resolve to 127.0.0.1 (DNS rebinding) sends that site's name, so a loopback server that answers
// only loopback names without a token gives such a page nothing.
bool is_loopback_host(const std::string& host);

}  // namespace tandem::app
