// Loopback addresses and Host names.
#include "apps/common/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace tandem::app {

bool is_loopback_address(const std::string& bind) {
  if (bind == "localhost") return true;
  // Addresses only, parsed: "127.example.com" is a name anyone's DNS may point anywhere.
  in_addr v4{};
  if (::inet_pton(AF_INET, bind.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, bind.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool is_loopback_host(const std::string& host) {
  std::string name = host;
  if (!name.empty() && name.front() == '[') {  // "[::1]" or "[::1]:port"
    const size_t close = name.find(']');
    if (close == std::string::npos) return false;
    const std::string rest = name.substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || rest.find_first_not_of("0123456789", 1) != std::string::npos))
      return false;
    name = name.substr(1, close - 1);
  } else if (const size_t colon = name.find(':'); colon != std::string::npos) {  // "name:port"
    if (name.find_first_not_of("0123456789", colon + 1) != std::string::npos) return false;
    name = name.substr(0, colon);
  }
  return is_loopback_address(name);
}

}  // namespace tandem::app
