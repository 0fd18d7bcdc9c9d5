// Token loading, generation and constant-time comparison.
#include "apps/tandem-serve/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "runtime/error.h"

namespace tandem::serve {

std::string load_or_make_token(const std::string& token_file, const std::string& generated_path) {
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    TANDEM_CHECK(in.good(), "--token-file {}: cannot read it", token_file);
    std::string token;
    std::getline(in, token);
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) token.erase(token.begin());
    TANDEM_CHECK(!token.empty(), "--token-file {}: the file is empty; put the token on its first line", token_file);
    return token;
  }
  // The state directory's token, kept across restarts (clients keep working).
  if (std::ifstream old(generated_path); old.good()) {
    std::string token;
    std::getline(old, token);
    if (token.size() >= 32) {
      // Readable by the owner only, whatever made it otherwise since (a copy, a umask, a chmod).
      struct stat st {};
      const bool shared = ::stat(generated_path.c_str(), &st) == 0 && (st.st_mode & 077) != 0;
      if (shared && ::chmod(generated_path.c_str(), 0600) != 0)
        TANDEM_FAIL(IO, "the token file {} is readable by others and cannot be made private: {}", generated_path,
                    std::strerror(errno));
      return token;
    }
  }
  // 32 bytes from the kernel's CSPRNG, as hex.
  std::random_device rd("/dev/urandom");
  std::string token;
  for (int i = 0; i < 8; ++i) token += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  int fd = ::open(generated_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) TANDEM_FAIL(IO, "cannot write the token to {}: {}", generated_path, std::strerror(errno));
  ::fchmod(fd, 0600);  // an older file may have had other bits
  const std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  TANDEM_CHECK_KIND(IO, ok, "cannot write the token to {}", generated_path);
  return token;
}

bool bearer_matches(const std::string& header_value, const std::string& token) {
  const std::string expected = "Bearer " + token;
  // Every byte of the expected value is compared, whatever the given length.
  unsigned diff = header_value.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char a = i < header_value.size() ? static_cast<unsigned char>(header_value[i]) : 0;
    diff |= a ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

}  // namespace tandem::serve
