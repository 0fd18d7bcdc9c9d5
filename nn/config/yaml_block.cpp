// The shared helpers of the run config's YAML reader (yaml_block.h).
#include "nn/config/yaml_block.h"

#include <cctype>
#include <cstdlib>
#include <limits>

#include "runtime/error.h"

namespace tandem::nn::config::yaml {

[[noreturn]] void fail_at(const std::string& source, int line, const std::string& path, const std::string& what) {
  const std::string where = line > 0 ? fmt::format("{}:{}", source, line) : source;
  throw ValueError(path.empty() ? fmt::format("{}: {}", where, what) : fmt::format("{}: {}: {}", where, path, what));
}

int line_of(const YAML::Node& n, int fallback) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? fallback : m.line + 1;  // yaml-cpp counts from 0
}

// YAML's numbers: decimal integers and floats (1e-3, .5), and .inf / .nan (rejected later as not finite).
std::optional<double> parse_number(const std::string& s) {
  const std::string l = lower(s);
  if (l == ".inf" || l == "+.inf") return std::numeric_limits<double>::infinity();
  if (l == "-.inf") return -std::numeric_limits<double>::infinity();
  if (l == ".nan") return std::numeric_limits<double>::quiet_NaN();
  if (s.empty()) return std::nullopt;
  // strtod would also take "inf", "nan" and hex floats, which YAML reads as strings.
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'))
      return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

// The words yaml-cpp reads as booleans, and 0 / 1, which TorchFort's own files write (amsgrad: 0).
std::optional<bool> parse_bool(const std::string& s) {
  const std::string l = lower(s);
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  return std::nullopt;
}

bool plain(const YAML::Node& n) { return n.Tag() != "!"; }  // "!": a quoted scalar

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar:
      if (plain(n) && parse_number(n.Scalar())) return fmt::format("a number ({})", n.Scalar());
      if (plain(n) && parse_bool(n.Scalar())) return fmt::format("a boolean ({})", n.Scalar());
      return fmt::format("a string ('{}')", n.Scalar());
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The word at `key` lower-cased, or a missing-key error naming the choices.
std::string type_of(const Block& b, const std::string& choices) {
  std::string type;
  if (!b.get("type", type)) b.missing("type", choices);
  return lower(type);
}

}  // namespace tandem::nn::config::yaml
