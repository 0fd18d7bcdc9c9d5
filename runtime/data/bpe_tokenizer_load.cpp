// GPT-2's byte-level BPE, loading: vocab.json and merges.txt (or tokenizer.json) into the tokenizer's
// tables, every token spelled in GPT-2's byte alphabet. Encoding and decoding: bpe_tokenizer_encode.cpp.
#include "runtime/data/bpe_tokenizer.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/data/bpe_tokenizer_detail.h"
#include "runtime/data/gpt2_pretokenize.h"
#include "runtime/error.h"

namespace tandem::data {

using bpe_detail::kEndOfText;
using bpe_detail::pair_key;

namespace {

constexpr int64_t kMaxId = int64_t{1} << 24;  // far above any BPE vocabulary; a guard on the allocation

bool printable_byte(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

// The byte a character of GPT-2's byte alphabet stands for, -1 for other characters.
int byte_of_char(char32_t c) {
  static const std::vector<int> table = [] {
    std::vector<int> t(256 + 68, -1);
    for (int b = 0; b < 256; ++b) t[gpt2_byte_char(static_cast<uint8_t>(b))] = b;
    return t;
  }();
  return c < table.size() ? table[c] : -1;
}

// A token as vocab.json and merges.txt spell it -> its bytes; false (and the offending character in
// `bad`) for a character outside GPT-2's byte alphabet.
bool token_to_bytes(std::string_view token, std::string& bytes, char32_t& bad) {
  bytes.clear();
  for (size_t i = 0; i < token.size();) {
    char32_t cp = 0;
    i += next_code_point(token, i, cp);
    const int b = cp == kInvalidCodePoint ? -1 : byte_of_char(cp);
    if (b < 0) {
      bad = cp;
      return false;
    }
    bytes.push_back(static_cast<char>(b));
  }
  return true;
}

std::ifstream open_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK_KIND(IO, in.good(), "BPE tokenizer: cannot read '{}'", path);
  return in;
}

nlohmann::json parse_json_file(const std::string& path) {
  std::ifstream in = open_file(path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    TANDEM_FAIL(IO, "BPE tokenizer: '{}' is not valid JSON: {}", path, e.what());
  }
}

// Every (token, id) of a vocabulary object (vocab.json, or tokenizer.json's model.vocab), checked.
void for_each_vocab_entry(const nlohmann::json& vocab, const std::string& where,
                          const std::function<void(const std::string&, int32_t)>& take) {
  TANDEM_CHECK_KIND(IO, vocab.is_object() && !vocab.empty(),
                    "BPE tokenizer: {} must be a JSON object of token -> id, got {}", where,
                    vocab.is_object() ? "an empty one" : vocab.type_name());
  for (const auto& [token, value] : vocab.items()) {
    TANDEM_CHECK_KIND(IO, value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < kMaxId,
                      "BPE tokenizer: {}: the id of token '{}' must be an integer in [0, {}), got {}", where, token,
                      kMaxId, value.dump());
    take(token, value.get<int32_t>());
  }
}

// obj[key] where it is a string; `otherwise` where obj has no such key or it is null.
std::string string_field(const nlohmann::json& obj, const char* key, const std::string& otherwise,
                         const std::string& path, const std::string& field) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return otherwise;
  TANDEM_CHECK_KIND(IO, it->is_string(), "BPE tokenizer: '{}': {} must be a string, got {}", path, field, it->dump());
  return it->get<std::string>();
}

// tokenizer.json's settings that this encoder does not implement: where one is set otherwise than
// GPT-2's files set it, an IOError naming it (encoding as if it were not there would give other ids).
void check_gpt2_settings(const nlohmann::json& doc, const std::string& path) {
  const auto refuse = [&](const std::string& field, const nlohmann::json& value) {
    TANDEM_FAIL(IO, "BPE tokenizer: '{}': {} is {}; this tokenizer is GPT-2's byte-level BPE, which has {}", path,
                field, value.dump(), field == "pre_tokenizer" ? "a ByteLevel one" : "none");
  };
  const nlohmann::json& model = doc.at("model");
  if (string_field(model, "type", "BPE", path, "model.type") != "BPE")
    TANDEM_FAIL(IO, "BPE tokenizer: '{}': model.type is {}; only a \"BPE\" model is read", path, model["type"].dump());
  for (const char* field : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(field);
    if (it != model.end() && !it->is_null() && *it != "") refuse(std::string("model.") + field, *it);
  }
  for (const char* field : {"byte_fallback", "ignore_merges"}) {
    const auto it = model.find(field);
    if (it != model.end() && !it->is_null() && *it != false) refuse(std::string("model.") + field, *it);
  }
  const auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0))
    refuse("model.dropout", *dropout);
  const auto normalizer = doc.find("normalizer");
  if (normalizer != doc.end() && !normalizer->is_null()) refuse("normalizer", *normalizer);
  const auto pre = doc.find("pre_tokenizer");
  TANDEM_CHECK_KIND(IO, pre != doc.end() && pre->is_object() &&
                            string_field(*pre, "type", "", path, "pre_tokenizer.type") == "ByteLevel",
                    "BPE tokenizer: '{}': pre_tokenizer is {}; this tokenizer is GPT-2's byte-level BPE, which has a "
                    "ByteLevel one", path, pre == doc.end() ? std::string("missing") : pre->dump());
  for (const char* field : {"add_prefix_space", "use_regex"}) {
    const bool want = std::string(field) == "use_regex";  // GPT-2: no prefix space, the regex split
    const auto it = pre->find(field);
    if (it != pre->end() && *it != want)
      TANDEM_FAIL(IO, "BPE tokenizer: '{}': pre_tokenizer.{} is {}; GPT-2's is {}", path, field, it->dump(), want);
  }
}

}  // namespace

char32_t gpt2_byte_char(uint8_t b) {
  if (printable_byte(b)) return b;
  char32_t n = 0;  // the others, in byte order, from U+0100
  for (int k = 0; k < b; ++k) n += printable_byte(k) ? 0 : 1;
  return 256 + n;
}

BpeTokenizer BpeTokenizer::from_dir(const std::string& dir) {
  const std::string vocab = dir + "/vocab.json", single = dir + "/tokenizer.json";
  std::error_code ec;  // a folder we cannot look into counts as one without the file
  const bool has_vocab = std::filesystem::exists(vocab, ec), has_single = std::filesystem::exists(single, ec);
  if (!has_vocab && has_single) return from_tokenizer_json(single);
  TANDEM_CHECK_KIND(IO, has_vocab, "BPE tokenizer: cannot read '{}' (with merges.txt beside it) nor '{}'", vocab,
                    single);
  return BpeTokenizer(vocab, dir + "/merges.txt");
}

BpeTokenizer BpeTokenizer::from_tokenizer_json(const std::string& path) {
  const nlohmann::json doc = parse_json_file(path);
  const auto read = [&]() -> BpeTokenizer {
    TANDEM_CHECK_KIND(IO, doc.is_object() && doc.contains("model") && doc["model"].is_object(),
                      "BPE tokenizer: '{}' has no \"model\" object (a tokenizer.json of Hugging Face's tokenizers "
                      "library has one)", path);
    check_gpt2_settings(doc, path);
    const nlohmann::json& model = doc["model"];
    BpeTokenizer bpe;
    bpe.vocab_path_ = path;
    bpe.byte_id_.fill(-1);
    TANDEM_CHECK_KIND(IO, model.contains("vocab"), "BPE tokenizer: '{}' has no model.vocab", path);
    const std::string vocab_where = "'" + path + "': model.vocab";
    for_each_vocab_entry(model["vocab"], vocab_where,
                         [&](const std::string& token, int32_t id) { bpe.add_token(token, id, vocab_where); });
    // Added tokens are split out of a text before BPE; this encoder does that for <|endoftext|> alone
    // (GPT-2 lists it, in the vocabulary too), so any other is refused rather than encoded otherwise.
    const auto added = doc.find("added_tokens");
    if (added != doc.end() && !added->is_null()) {
      TANDEM_CHECK_KIND(IO, added->is_array(), "BPE tokenizer: '{}': added_tokens must be an array, got {}", path,
                        added->type_name());
      for (size_t i = 0; i < added->size(); ++i) {
        const nlohmann::json& t = (*added)[i];
        const bool well_formed = t.is_object() && t.contains("content") && t["content"].is_string() &&
                                 t.contains("id") && t["id"].is_number_integer() && t["id"].get<int64_t>() >= 0 &&
                                 t["id"].get<int64_t>() < kMaxId;
        TANDEM_CHECK_KIND(IO, well_formed, "BPE tokenizer: '{}': added_tokens[{}] must have a string \"content\" and "
                          "an integer \"id\" in [0, {}), got {}", path, i, kMaxId, t.dump());
        const std::string content = t["content"].get<std::string>();
        const auto id = t["id"].get<int32_t>();
        TANDEM_CHECK_KIND(IO, content == kEndOfText, "BPE tokenizer: '{}': added_tokens[{}] is '{}' (id {}); this "
                          "encoder splits only \"{}\" out of a text", path, i, content, id, kEndOfText);
        if (bpe.end_of_text_ == id) continue;  // the vocabulary's own
        TANDEM_CHECK_KIND(IO, bpe.end_of_text_ < 0, "BPE tokenizer: '{}': added_tokens[{}] gives \"{}\" id {}, the "
                          "vocabulary id {}", path, i, kEndOfText, id, bpe.end_of_text_);
        bpe.add_token(content, id, "'" + path + "': added_tokens");  // ASCII: spelled as itself
      }
    }
    TANDEM_CHECK_KIND(IO, model.contains("merges") && model["merges"].is_array(),
                      "BPE tokenizer: '{}': model.merges must be an array of merges, got {}", path,
                      model.contains("merges") ? model["merges"].type_name() : "none");
    const nlohmann::json& merges = model["merges"];
    for (size_t i = 0; i < merges.size(); ++i) {
      const nlohmann::json& m = merges[i];
      const std::string where = fmt::format("'{}': model.merges[{}]", path, i);
      if (m.is_array()) {  // tokenizers 0.20 on: ["left", "right"]
        TANDEM_CHECK_KIND(IO, m.size() == 2 && m[0].is_string() && m[1].is_string(),
                          "BPE tokenizer: {}: a merge is two tokens, got {}", where, m.dump());
        bpe.add_merge(m[0].get<std::string>(), m[1].get<std::string>(), static_cast<int32_t>(i), where);
        continue;
      }
      TANDEM_CHECK_KIND(IO, m.is_string(), "BPE tokenizer: {}: a merge is \"left right\" or [\"left\", \"right\"], "
                        "got {}", where, m.dump());
      bpe.add_merge_line(m.get<std::string>(), static_cast<int32_t>(i), where);
    }
    return bpe;
  };
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {  // a field of a type the checks missed: still an IOError
    TANDEM_FAIL(IO, "BPE tokenizer: '{}' is not a tokenizer.json this tokenizer reads: {}", path, e.what());
  }
}

BpeTokenizer::BpeTokenizer(const std::string& vocab_path, const std::string& merges_path) : vocab_path_(vocab_path) {
  read_vocab(vocab_path);
  read_merges(merges_path);
}

void BpeTokenizer::read_vocab(const std::string& path) {
  byte_id_.fill(-1);
  const std::string where = "'" + path + "'";
  for_each_vocab_entry(parse_json_file(path), where,
                       [&](const std::string& token, int32_t id) { add_token(token, id, where); });
}

void BpeTokenizer::add_token(const std::string& token, int32_t id, const std::string& where) {
  std::string bytes;
  char32_t bad = 0;
  TANDEM_CHECK_KIND(IO, token_to_bytes(token, bytes, bad), "BPE tokenizer: {}: token '{}' (id {}) has a "
                    "character outside GPT-2's byte alphabet (U+{:04X})", where, token, id, static_cast<uint32_t>(bad));
  TANDEM_CHECK_KIND(IO, !bytes.empty(), "BPE tokenizer: {}: an empty token (id {})", where, id);
  if (static_cast<size_t>(id) >= id_bytes_.size()) {
    id_bytes_.resize(static_cast<size_t>(id) + 1);
    id_used_.resize(static_cast<size_t>(id) + 1, false);
  }
  TANDEM_CHECK_KIND(IO, !id_used_[static_cast<size_t>(id)], "BPE tokenizer: {}: id {} is given to '{}' and to "
                    "another token", where, id, token);
  id_used_[static_cast<size_t>(id)] = true;
  id_bytes_[static_cast<size_t>(id)] = bytes;
  if (bytes.size() == 1) byte_id_[static_cast<uint8_t>(bytes[0])] = id;
  if (bytes == kEndOfText) end_of_text_ = id;
  byte_token_.emplace(std::move(bytes), id);
}

void BpeTokenizer::read_merges(const std::string& path) {
  std::ifstream in = open_file(path);
  std::string line;
  int32_t rank = 0;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    add_merge_line(line, rank++, fmt::format("'{}' line {}", path, line_no));
  }
  TANDEM_CHECK_KIND(IO, !in.bad(), "BPE tokenizer: error reading '{}'", path);
}

void BpeTokenizer::add_merge_line(const std::string& line, int32_t rank, const std::string& where) {
  const size_t space = line.find(' ');
  TANDEM_CHECK_KIND(IO, space != std::string::npos && space > 0 && space + 1 < line.size() &&
                            line.find(' ', space + 1) == std::string::npos,
                    "BPE tokenizer: {}: a merge is two tokens separated by one space, got '{}'", where, line);
  add_merge(line.substr(0, space), line.substr(space + 1), rank, where);
}

void BpeTokenizer::add_merge(const std::string& left, const std::string& right, int32_t rank,
                             const std::string& where) {
  int32_t ids[3];  // left, right, result
  const std::string parts[3] = {left, right, left + right};
  for (int k = 0; k < 3; ++k) {
    std::string bytes;
    char32_t bad = 0;
    const bool spelled = token_to_bytes(parts[k], bytes, bad);  // else it cannot be in the vocabulary
    const auto it = spelled ? byte_token_.find(bytes) : byte_token_.end();
    TANDEM_CHECK_KIND(IO, it != byte_token_.end(), "BPE tokenizer: {}: the merge '{} {}' {} '{}', which is not in {}",
                      where, left, right, k < 2 ? "has the part" : "makes", parts[k], vocab_path_);
    ids[k] = it->second;
  }
  merges_[pair_key(ids[0], ids[1])] = Merge{rank, ids[2]};  // a repeated merge: the later rank, as GPT-2's
}

}  // namespace tandem::data
