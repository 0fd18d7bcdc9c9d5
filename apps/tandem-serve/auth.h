// The bearer token: loaded from --token-file (which must exist and hold a non-empty token) or
// generated into <state-dir>/token (mode 0600, kept across restarts); checked in constant time.
#pragma once
#include <string>

namespace tandem::serve {

// The token to require. With `token_file`: its first line, trimmed (ValueError when the file is
// missing or empty). Without: the one in `generated_path`, or a fresh random one written there.
std::string load_or_make_token(const std::string& token_file, const std::string& generated_path);

// Whether the Authorization header's value is "Bearer <token>". The time taken does not depend
// on where the two differ.
bool bearer_matches(const std::string& header_value, const std::string& token);

}  // namespace tandem::serve
