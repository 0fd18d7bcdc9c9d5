// Files shipped inside the binary (no CDN, no install path to find): openapi.json and the dashboard
// page. Embedded at build time by embed_assets.cmake from this folder's files.
#pragma once
#include <string>
#include <string_view>

namespace tandem::serve {

// The file's bytes; empty when there is no such asset. Names: "openapi.json",
// "dashboard/index.html", "dashboard/dashboard.js".
std::string_view asset(const std::string& name);

}  // namespace tandem::serve
