// Reading a run config's YAML (yaml-cpp): one mapping of the file at a time (Block) with typed
// getters that fail at the key's line, and the helpers they share. Internal to nn/config: the
// parser's blocks (run_config_parse.cpp) and its model block (run_config_parse_model.cpp) use it.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "nn/config/checks.h"
#include "nn/config/run_config.h"
#include "runtime/enum_names.h"
#include "runtime/spelling.h"

namespace tandem::nn::config::yaml {

// ValueError "<source>:<line>: <path>: <what>" (the line left out when 0, the path when empty).
[[noreturn]] void fail_at(const std::string& source, int line, const std::string& path, const std::string& what);
// The 1-based line where `n` was written, or `fallback` where yaml-cpp has no mark.
int line_of(const YAML::Node& n, int fallback);
// YAML's numbers: decimal integers and floats (1e-3, .5), and .inf / .nan (rejected later as not finite).
std::optional<double> parse_number(const std::string& s);
// The words yaml-cpp reads as booleans, and 0 / 1, which TorchFort's own files write (amsgrad: 0).
std::optional<bool> parse_bool(const std::string& s);
// Whether a scalar was written without quotes ("!": a quoted scalar).
bool plain(const YAML::Node& n);
// What a node holds, for messages.
std::string describe(const YAML::Node& n);
// The allowed keys of a message, listed.
std::string join(const std::vector<std::string>& names);

// One mapping of the file: its keys with their lines, read through typed getters that fail at the
// key's line. `line` is where the mapping's own key was written (0: the document).
class Block {
 public:
  Block(RunConfig& out, const YAML::Node& node, std::string block_path, int line)
      : out_(out), path_(std::move(block_path)), line_(line) {
    if (!node.IsDefined() || node.IsNull()) return;  // `parameters:` with nothing under it: no keys
    if (!node.IsMap())
      fail_at(out_.source, line_of(node, line_), path_,
              fmt::format("expected a mapping (key: value lines), got {}", describe(node)));
    for (auto it = node.begin(); it != node.end(); ++it) {
      const int key_line = line_of(it->first, line_);
      if (!it->first.IsScalar()) fail_at(out_.source, key_line, path_, "a key must be a plain word");
      const std::string key = it->first.Scalar();
      for (const Entry& e : entries_)
        if (e.key == key)
          fail_at(out_.source, key_line, path(key), fmt::format("given twice (first at line {})", e.line));
      entries_.push_back({key, it->second, key_line});
      out_.key_lines[path(key)] = key_line;
    }
  }

  // Fails at the first key not in `allowed`; `owner` says whose keys these are ("optimizer type adam").
  void only(const std::vector<std::string>& allowed, const std::string& owner = "") const {
    for (const Entry& e : entries_) {
      bool known = false;
      for (const std::string& a : allowed) known = known || a == e.key;
      if (known) continue;
      const std::string of = owner.empty() ? "" : " for " + owner;
      if (allowed.empty()) fail(e, fmt::format("unknown key ({} takes no parameters)", owner.empty() ? path_ : owner));
      const std::string hint = closest_spelling(e.key, allowed);  // a typo, not a different word
      fail(e, fmt::format("unknown key{} (expected one of {}){}", of, join(allowed),
                          hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
    }
  }

  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::vector<std::string> keys() const {  // in file order
    std::vector<std::string> k;
    for (const Entry& e : entries_) k.push_back(e.key);
    return k;
  }
  std::string path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  int line() const { return line_; }
  int line(const std::string& key) const { return find(key)->line; }

  [[noreturn]] void missing(const std::string& key, const std::string& hint = "") const {
    fail_at(out_.source, line_, path(key), "required key missing" + (hint.empty() ? "" : " (" + hint + ")"));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { fail(*find(key), what); }
  void warn(const std::string& key, const std::string& what) const {
    out_.warnings.push_back(fmt::format("{}:{}: {}: {}", out_.source, line(key), path(key), what));
  }

  Block block(const std::string& key) const {
    const Entry* e = find(key);
    return e ? Block(out_, e->value, path(key), e->line) : Block(out_, YAML::Node(), path(key), line_);
  }
  const YAML::Node& node(const std::string& key) const { return find(key)->value; }

  bool get(const std::string& key, double& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    out = number(*e, e->value, "a number");
    return true;
  }
  bool get(const std::string& key, int64_t& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    out = integer(*e, e->value);
    return true;
  }
  bool get(const std::string& key, bool& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    std::optional<bool> b = e->value.IsScalar() ? parse_bool(e->value.Scalar()) : std::nullopt;
    if (!b) fail(*e, fmt::format("expected true or false, got {}", describe(e->value)));
    out = *b;
    return true;
  }
  // A word (a type name, a reduction): a scalar, compared case-insensitively by the caller.
  bool get(const std::string& key, std::string& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    if (!e->value.IsScalar() || e->value.Scalar().empty())
      fail(*e, fmt::format("expected a word, got {}", describe(e->value)));
    out = e->value.Scalar();
    return true;
  }
  bool get(const std::string& key, std::vector<std::string>& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    if (!e->value.IsSequence()) fail(*e, fmt::format("expected a list of names, got {}", describe(e->value)));
    out.clear();
    for (size_t i = 0; i < e->value.size(); ++i) {
      const YAML::Node item = e->value[i];
      if (!item.IsScalar() || item.Scalar().empty())
        fail(*e, fmt::format("item {}: expected a name, got {}", i, describe(item)));
      out.push_back(item.Scalar());
    }
    return true;
  }
  bool get(const std::string& key, std::vector<int64_t>& out) const {
    const Entry* e = find(key);
    if (!e) return false;
    if (!e->value.IsSequence()) fail(*e, fmt::format("expected a list of integers, got {}", describe(e->value)));
    out.clear();
    for (size_t i = 0; i < e->value.size(); ++i) {
      const YAML::Node item = e->value[i];
      const std::string at = fmt::format("{}[{}]", path(key), i);
      out_.key_lines[at] = line_of(item, e->line);
      out.push_back(integer(Entry{at, item, line_of(item, e->line)}, item, true));
    }
    return true;
  }

 private:
  struct Entry {
    std::string key;  // or, for a list item, its full path (see fail)
    YAML::Node value;
    int line;
  };

  const Entry* find(const std::string& key) const {
    for (const Entry& e : entries_)
      if (e.key == key) return &e;
    return nullptr;
  }
  [[noreturn]] void fail(const Entry& e, const std::string& what) const {
    fail_at(out_.source, e.line, e.key.find('[') != std::string::npos ? e.key : path(e.key), what);
  }
  double number(const Entry& e, const YAML::Node& v, const char* want) const {
    std::optional<double> x = v.IsScalar() ? parse_number(v.Scalar()) : std::nullopt;
    if (!x) fail(e, fmt::format("expected {}, got {}", want, describe(v)));
    if (!std::isfinite(*x)) fail(e, fmt::format("expected a finite number, got {}", v.Scalar()));
    return *x;
  }
  // Integers may be written as whole floats (TorchFort's T_max is a float: 100.0, 1e3).
  int64_t integer(const Entry& e, const YAML::Node& v, bool in_list = false) const {
    const double x = number(e, v, in_list ? "an integer (in a list of integers)" : "an integer");
    if (x != std::floor(x) || std::fabs(x) > 9.0e15) fail(e, fmt::format("expected an integer, got {}", v.Scalar()));
    return static_cast<int64_t>(x);
  }

  RunConfig& out_;
  std::string path_;
  int line_;
  std::vector<Entry> entries_;
};

// The word at `key` lower-cased, or a missing-key error naming the choices.
std::string type_of(const Block& b, const std::string& choices);

// The enum `key` names (in any case), or a failure naming the choices; `what` says which kind of
// word ("loss type").
template <class E>
bool get_word(const Block& b, const std::string& key, E& out, const std::string& what) {
  std::string word;
  if (!b.get(key, word)) return false;
  const std::optional<E> v = enum_value<E>(lower(word));
  if (!v) b.fail(key, fmt::format("unknown {} '{}' (expected {})", what, word, or_list(enum_words<E>())));
  out = *v;
  return true;
}

// The model block (run_config_parse_model.cpp): its type's keys onto out.model.
void parse_model(RunConfig& out, const Block& m);

}  // namespace tandem::nn::config::yaml
