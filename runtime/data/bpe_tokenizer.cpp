// GPT-2's byte-level BPE: loading vocab.json and merges.txt, merging by rank, decoding.
#include "runtime/data/bpe_tokenizer.h"

#include <climits>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/data/gpt2_pretokenize.h"
#include "runtime/error.h"

namespace tandem::data {

namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";
constexpr int64_t kMaxId = int64_t{1} << 24;  // far above any BPE vocabulary; a guard on the allocation
constexpr size_t kCacheMax = size_t{1} << 20;  // pieces remembered (a few hundred MB at most)

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

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

std::ifstream open_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK_KIND(IO, in.good(), "BPE tokenizer: cannot read '{}'", path);
  return in;
}

}  // namespace

char32_t gpt2_byte_char(uint8_t b) {
  if (printable_byte(b)) return b;
  char32_t n = 0;  // the others, in byte order, from U+0100
  for (int k = 0; k < b; ++k) n += printable_byte(k) ? 0 : 1;
  return 256 + n;
}

BpeTokenizer BpeTokenizer::from_dir(const std::string& dir) {
  return BpeTokenizer(dir + "/vocab.json", dir + "/merges.txt");
}

BpeTokenizer::BpeTokenizer(const std::string& vocab_path, const std::string& merges_path) : vocab_path_(vocab_path) {
  read_vocab(vocab_path);
  read_merges(merges_path);
}

void BpeTokenizer::read_vocab(const std::string& path) {
  std::ifstream in = open_file(path);
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    TANDEM_FAIL(IO, "BPE tokenizer: '{}' is not valid JSON: {}", path, e.what());
  }
  TANDEM_CHECK_KIND(IO, vocab.is_object() && !vocab.empty(),
                    "BPE tokenizer: '{}' must be a JSON object of token -> id, got {}", path, vocab.type_name());
  byte_id_.fill(-1);
  for (const auto& [token, value] : vocab.items()) {
    TANDEM_CHECK_KIND(IO, value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < kMaxId,
                      "BPE tokenizer: '{}': the id of token '{}' must be an integer in [0, {}), got {}", path, token,
                      kMaxId, value.dump());
    const auto id = value.get<int32_t>();
    std::string bytes;
    char32_t bad = 0;
    TANDEM_CHECK_KIND(IO, token_to_bytes(token, bytes, bad), "BPE tokenizer: '{}': token '{}' (id {}) has a "
                      "character outside GPT-2's byte alphabet (U+{:04X})", path, token, id, static_cast<uint32_t>(bad));
    TANDEM_CHECK_KIND(IO, !bytes.empty(), "BPE tokenizer: '{}': an empty token (id {})", path, id);
    if (static_cast<size_t>(id) >= id_bytes_.size()) {
      id_bytes_.resize(static_cast<size_t>(id) + 1);
      id_used_.resize(static_cast<size_t>(id) + 1, false);
    }
    TANDEM_CHECK_KIND(IO, !id_used_[static_cast<size_t>(id)], "BPE tokenizer: '{}': id {} is given to '{}' and to "
                      "another token", path, id, token);
    id_used_[static_cast<size_t>(id)] = true;
    id_bytes_[static_cast<size_t>(id)] = bytes;
    if (bytes.size() == 1) byte_id_[static_cast<uint8_t>(bytes[0])] = id;
    if (bytes == kEndOfText) end_of_text_ = id;
    byte_token_.emplace(std::move(bytes), id);
  }
}

void BpeTokenizer::read_merges(const std::string& path) {
  std::ifstream in = open_file(path);
  std::string line;
  int32_t rank = 0;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    TANDEM_CHECK_KIND(IO, space != std::string::npos && space > 0 && space + 1 < line.size() &&
                              line.find(' ', space + 1) == std::string::npos,
                      "BPE tokenizer: '{}' line {}: a merge is two tokens separated by one space, got '{}'", path,
                      line_no, line);
    int32_t ids[3];  // left, right, result
    const std::string parts[3] = {line.substr(0, space), line.substr(space + 1),
                                  line.substr(0, space) + line.substr(space + 1)};
    for (int k = 0; k < 3; ++k) {
      std::string bytes;
      char32_t bad = 0;
      const bool spelled = token_to_bytes(parts[k], bytes, bad);  // else it cannot be in the vocabulary
      const auto it = spelled ? byte_token_.find(bytes) : byte_token_.end();
      TANDEM_CHECK_KIND(IO, it != byte_token_.end(), "BPE tokenizer: '{}' line {}: the merge '{}' {} '{}', which is "
                        "not in {}", path, line_no, line, k < 2 ? "has the part" : "makes", parts[k], vocab_path_);
      ids[k] = it->second;
    }
    merges_[pair_key(ids[0], ids[1])] = Merge{rank++, ids[2]};  // a repeated merge: the later rank, as GPT-2's
  }
  TANDEM_CHECK_KIND(IO, !in.bad(), "BPE tokenizer: error reading '{}'", path);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) {
  const std::string key(piece);
  if (auto it = cache_.find(key); it != cache_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int32_t> word, merged;  // a byte without a token is -1 - byte (merges never match it)
  for (char c : piece) {
    const auto b = static_cast<uint8_t>(c);
    word.push_back(byte_id_[b] >= 0 ? byte_id_[b] : -1 - static_cast<int32_t>(b));
  }
  while (word.size() >= 2) {
    // The pair of lowest rank; then every occurrence of it, left to right, as GPT-2's encoder.
    const Merge* best = nullptr;
    uint64_t best_key = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      if (word[i] < 0 || word[i + 1] < 0) continue;
      const auto it = merges_.find(pair_key(word[i], word[i + 1]));
      if (it != merges_.end() && (!best || it->second.rank < best->rank)) best = &it->second, best_key = it->first;
    }
    if (!best) break;
    merged.clear();
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] >= 0 && word[i + 1] >= 0 && pair_key(word[i], word[i + 1]) == best_key) {
        merged.push_back(best->result);
        ++i;
      } else {
        merged.push_back(word[i]);
      }
    }
    word.swap(merged);
  }
  for (int32_t id : word)
    TANDEM_CHECK(id >= 0, "BPE tokenizer: byte 0x{:02x} has no token in {} and no merge covers it", -1 - id,
                 vocab_path_);
  out.insert(out.end(), word.begin(), word.end());
  if (cache_.size() < kCacheMax) cache_.emplace(key, std::move(word));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) {
  std::vector<int32_t> ids;
  while (!text.empty()) {
    // "<|endoftext|>" in the text is the special token; the text around it is encoded on its own.
    const size_t special = end_of_text_ >= 0 ? text.find(kEndOfText) : std::string_view::npos;
    const std::string_view part = text.substr(0, special);
    for (const TextPiece& p : gpt2_pretokenize(part)) encode_piece(part.substr(p.begin, p.size), ids);
    if (special == std::string_view::npos) break;
    ids.push_back(end_of_text_);
    text.remove_prefix(special + kEndOfText.size());
  }
  return ids;
}

const std::string& BpeTokenizer::token_bytes(int64_t id) const {
  TANDEM_CHECK(id >= 0 && id < vocab_size(), "BPE tokenizer: id {} is out of range [0, {}) of {}", id, vocab_size(),
               vocab_path_);
  TANDEM_CHECK(id_used_[static_cast<size_t>(id)], "BPE tokenizer: id {} has no token in {}", id, vocab_path_);
  return id_bytes_[static_cast<size_t>(id)];
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) out += token_bytes(id);
  return out;
}

}  // namespace tandem::data
