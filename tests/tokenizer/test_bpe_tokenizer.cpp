// The GPT-2 BPE tokenizer: ids equal to Hugging Face's GPT2Tokenizer on the tiny files of
// tests/reference/bpe_tiny (make_bpe_reference.py) and on their tokenizer.json (bpe_tiny_json,
// make_bpe_tokenizer_json.py), exact round trips, merge order, and the errors.
#include <omp.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/data/bpe_tokenizer.h"
#include "runtime/error.h"
#include "tests/data/temp_dir.h"
#include "tests/reference/bpe_values.h"
#include "tests/support/error_of.h"

using namespace tandem;
using data::BpeTokenizer;
using tandem::testing::error_of;

namespace {

const std::string kDir = std::string(TANDEM_REFERENCE_DIR) + "/bpe_tiny";

// vocab.json and merges.txt in a fresh folder.
struct Files {
  tandem::testing::TempDir dir;
  Files(const std::string& vocab, const std::string& merges) {
    std::ofstream(dir.file("vocab.json")) << vocab;
    std::ofstream(dir.file("merges.txt")) << merges;
  }
  BpeTokenizer load() const { return BpeTokenizer::from_dir(dir.path().string()); }
};

}  // namespace

TEST(BpeTokenizer, IdsEqualHuggingFaces) {
  BpeTokenizer bpe = BpeTokenizer::from_dir(kDir);
  EXPECT_EQ(bpe.vocab_size(), bpe_ref::kVocab);
  EXPECT_EQ(static_cast<int64_t>(bpe.num_merges()), bpe_ref::kMerges);
  EXPECT_EQ(bpe.end_of_text(), bpe_ref::kVocab - 1);
  ASSERT_EQ(bpe_ref::kTexts.size(), bpe_ref::kIds.size());
  for (int pass = 0; pass < 2; ++pass)  // the second pass reads the per-piece cache
    for (size_t i = 0; i < bpe_ref::kTexts.size(); ++i)
      EXPECT_EQ(bpe.encode(bpe_ref::kTexts[i]), bpe_ref::kIds[i]) << "text " << i << ": " << bpe_ref::kTexts[i];
}

TEST(BpeTokenizer, DecodeGivesTheBytesBack) {
  BpeTokenizer bpe = BpeTokenizer::from_dir(kDir);
  for (const std::string& text : bpe_ref::kTexts) EXPECT_EQ(bpe.decode(bpe.encode(text)), text);
  for (size_t i = 0; i < bpe_ref::kTexts.size(); ++i) EXPECT_EQ(bpe.decode(bpe_ref::kIds[i]), bpe_ref::kTexts[i]);
  std::mt19937 gen(7);  // any bytes, invalid UTF-8 included
  for (int round = 0; round < 300; ++round) {
    std::string text(static_cast<size_t>(gen() % 80), '\0');
    for (char& c : text) c = static_cast<char>(gen() % 4 == 0 ? gen() % 256 : 'a' + gen() % 26);
    ASSERT_EQ(bpe.decode(bpe.encode(text)), text);
  }
  const std::vector<int64_t> wide(bpe_ref::kIds[1].begin(), bpe_ref::kIds[1].end());
  EXPECT_EQ(bpe.decode(wide), "Hello world");  // i64 ids (the sampler's) as well
}

// A text of 1 MiB or more is encoded in chunks on the threads, cut before newlines: the same ids as
// the texts' pieces encoded one after the other on one thread, whatever the thread count; the
// first error of the text is the one reported.
TEST(BpeTokenizer, LongTextsGiveTheSameIdsOnAnyThreadCount) {
  // The tiny tokenizer and a merge of a space and a newline, so that a chunk cut inside a run of
  // whitespace (a space, then a newline) would change the ids.
  std::ifstream vocab_in(kDir + "/vocab.json"), merges_in(kDir + "/merges.txt");
  std::string vocab((std::istreambuf_iterator<char>(vocab_in)), std::istreambuf_iterator<char>());
  std::string merges((std::istreambuf_iterator<char>(merges_in)), std::istreambuf_iterator<char>());
  vocab.insert(vocab.rfind('}'), ", \"\u0120\u010a\": 421");  // ĠĊ
  merges += "\u0120 \u010a\n";
  const Files spaced(vocab, merges);
  BpeTokenizer bpe = spaced.load();
  ASSERT_EQ(bpe.encode(" \n"), (std::vector<int32_t>{421}));
  std::mt19937 gen(11);
  std::string text;
  std::vector<int32_t> expected;
  while (text.size() < (size_t{3} << 19)) {  // 1.5 MiB of the reference texts, random bytes and newlines
    const std::string& t = bpe_ref::kTexts[gen() % bpe_ref::kTexts.size()];
    text += t;
    // Newlines after spaces (" \n\n" is the piece " \n" and a newline, which a cut before the first
    // newline would change), after letters and punctuation, after a no-break space and half of one.
    const char* noise[] = {" \n\n", " \n\n", "\n", " ", "a\n", ".\n ", "\xc2\xa0\n", "\xc2\n", "7\t"};
    text += noise[gen() % 9];
  }
  omp_set_num_threads(1);  // the reference: the whole text on one thread
  expected = bpe.encode(text);
  EXPECT_EQ(bpe.decode(expected), text);
  for (int threads : {2, 3, 8}) {
    omp_set_num_threads(threads);
    BpeTokenizer fresh = spaced.load();  // its cache empty: every piece merged by the threads
    EXPECT_EQ(fresh.encode(text), expected) << threads << " threads";
    EXPECT_EQ(bpe.encode(text), expected) << threads << " threads, the cache of one thread's pass";
  }
  // The first error of the text, as one thread meets it: a vocabulary without 'z' and 'q', the
  // first of them in the text's second half.
  Files f(R"({"a": 0, "b": 1, "q": 2, "z": 3, "Ġ": 4, "Ċ": 5, "ab": 6})", "a b\n");
  std::string ab;
  while (ab.size() < (size_t{3} << 19)) ab += "ab ab\nab a\n";
  const std::string bad = ab + "a z\nq\n" + ab;
  Files no_zq(R"({"a": 0, "b": 1, "Ġ": 4, "Ċ": 5, "ab": 6})", "a b\n");
  std::string one, many;
  omp_set_num_threads(1);
  one = error_of<ValueError>([&] { no_zq.load().encode(bad); });
  omp_set_num_threads(4);
  many = error_of<ValueError>([&] { no_zq.load().encode(bad); });
  EXPECT_NE(one.find("byte 0x7a has no token"), std::string::npos) << one;
  EXPECT_EQ(many, one);
  EXPECT_EQ(f.load().decode(f.load().encode(bad)), bad);
  omp_set_num_threads(1);
}

TEST(BpeTokenizer, ByteAlphabet) {
  EXPECT_EQ(data::gpt2_byte_char('!'), U'!');
  EXPECT_EQ(data::gpt2_byte_char(0), U'\u0100');
  EXPECT_EQ(data::gpt2_byte_char('\n'), U'\u010a');  // Ċ
  EXPECT_EQ(data::gpt2_byte_char(' '), U'\u0120');   // Ġ
  EXPECT_EQ(data::gpt2_byte_char(0xad), U'\u0143');  // the last of the 68 remapped bytes
  EXPECT_EQ(data::gpt2_byte_char(0xff), U'\u00ff');
}

TEST(BpeTokenizer, LowestRankMergesFirstLeftToRight) {
  const std::string vocab = R"({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "aa": 5})";
  Files bc_first(vocab, "#version: 0.2\nb c\na b\n"), ab_first(vocab, "a b\r\nb c\r\n");  // no header, CR LF
  EXPECT_EQ(bc_first.load().encode("abc"), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(ab_first.load().encode("abc"), (std::vector<int32_t>{3, 2}));
  Files aa(vocab, "a a\n");
  EXPECT_EQ(aa.load().encode("aaaaa"), (std::vector<int32_t>{5, 5, 0}));  // non-overlapping, from the left
}

namespace {

// GPT-2's encoder as it is written (bpe() in its encoder.py): while a pair merges, find the pair of
// lowest rank and rebuild the word with every occurrence of it merged, left to right.
std::vector<std::string> gpt2_merge_loop(const std::string& piece,
                                         const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> word;
  for (char c : piece) word.emplace_back(1, c);
  for (;;) {
    const std::pair<std::string, std::string>* best = nullptr;
    int best_rank = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = ranks.find({word[i], word[i + 1]});
      if (it != ranks.end() && (!best || it->second < best_rank)) best = &it->first, best_rank = it->second;
    }
    if (!best) return word;
    const auto pair = *best;
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == pair.first && word[i + 1] == pair.second) {
        merged.push_back(word[i] + word[i + 1]);
        ++i;
      } else {
        merged.push_back(word[i]);
      }
    }
    word.swap(merged);
  }
}

}  // namespace

// The tokenizer merges as GPT-2's loop does for merge lists in any order: random tokens over four
// letters, their merges ranked at random (so a merge may outrank the merges that make its parts, and
// a pair formed by a merge may outrank the pair being merged), some listed twice, on random words.
TEST(BpeTokenizer, MergesAsGpt2sLoopForMergesInAnyOrder) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> tokens = {"a", "b", "c", "d"};
    std::vector<std::pair<std::string, std::string>> merges;
    const int num_merges = 1 + static_cast<int>(rng() % 24);
    for (int m = 0; m < num_merges; ++m) {
      const std::string l = tokens[rng() % tokens.size()];
      const std::string r = tokens[rng() % tokens.size()];
      merges.emplace_back(l, r);
      if (std::find(tokens.begin(), tokens.end(), l + r) == tokens.end()) tokens.push_back(l + r);
    }
    for (int m = 0; m < num_merges / 4; ++m) merges.push_back(merges[rng() % merges.size()]);  // repeats
    std::shuffle(merges.begin(), merges.end(), rng);
    std::string vocab = "{", merges_txt = "#version: 0.2\n";
    std::map<std::pair<std::string, std::string>, int> ranks;
    for (size_t t = 0; t < tokens.size(); ++t) vocab += (t ? ", \"" : "\"") + tokens[t] + "\": " + std::to_string(t);
    vocab += "}";
    for (size_t m = 0; m < merges.size(); ++m) {
      merges_txt += merges[m].first + " " + merges[m].second + "\n";
      ranks[merges[m]] = static_cast<int>(m);  // a repeated merge keeps its later rank
    }
    Files files(vocab, merges_txt);
    BpeTokenizer bpe = files.load();
    for (int w = 0; w < 20; ++w) {
      std::string word(1 + rng() % 40, 'a');
      for (char& c : word) c = static_cast<char>('a' + rng() % (w % 2 ? 2 : 4));  // two letters: longer runs
      std::vector<int32_t> expected;
      for (const std::string& t : gpt2_merge_loop(word, ranks))
        expected.push_back(static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), t) - tokens.begin()));
      ASSERT_EQ(bpe.encode(word), expected) << "word " << word << "\nmerges:\n" << merges_txt;
    }
  }
}

TEST(BpeTokenizer, FileErrorsNameTheFileAndLine) {
  const std::string ab = R"({"a": 0, "b": 1, "ab": 2})";
  std::string m = error_of<IOError>([] { BpeTokenizer::from_dir("/nonexistent/bpe"); });
  EXPECT_NE(m.find("/nonexistent/bpe/vocab.json"), std::string::npos) << m;
  {
    Files f(ab, "a b\n");
    std::filesystem::remove(f.dir.file("merges.txt"));
    m = error_of<IOError>([&] { f.load(); });
    EXPECT_NE(m.find("merges.txt"), std::string::npos) << m;
  }
  m = error_of<IOError>([] { Files(R"({"a": 0,)", "").load(); });
  EXPECT_NE(m.find("is not valid JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("vocab.json"), std::string::npos) << m;
  m = error_of<IOError>([] { Files(R"({"a": 1e400})", "").load(); });  // found by the fuzzer
  EXPECT_NE(m.find("is not valid JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("number overflow"), std::string::npos) << m;
  EXPECT_NE(error_of<IOError>([] { Files("[1, 2]", "").load(); }).find("JSON object"), std::string::npos);
  EXPECT_NE(error_of<IOError>([] { Files(R"({"a": "x"})", "").load(); }).find("must be an integer"), std::string::npos);
  EXPECT_NE(error_of<IOError>([] { Files(R"({"a": -1})", "").load(); }).find("must be an integer"), std::string::npos);
  EXPECT_NE(error_of<IOError>([] { Files(R"({"a": 0, "b": 0})", "").load(); }).find("id 0 is given"),
            std::string::npos);
  m = error_of<IOError>([] { Files(R"({"a b": 0})", "").load(); });  // U+0020 is not in the alphabet (Ġ is)
  EXPECT_NE(m.find("outside GPT-2's byte alphabet (U+0020)"), std::string::npos) << m;
  m = error_of<IOError>([&] { Files(ab, "#version: 0.2\na b\na q\n").load(); });
  EXPECT_NE(m.find("merges.txt' line 3"), std::string::npos) << m;
  EXPECT_NE(m.find("has the part 'q'"), std::string::npos) << m;
  m = error_of<IOError>([] { Files(R"({"a": 0, "b": 1})", "a b\n").load(); });
  EXPECT_NE(m.find("line 1"), std::string::npos) << m;
  EXPECT_NE(m.find("makes 'ab'"), std::string::npos) << m;
  for (const char* bad : {"ab\n", "a  b\n", "a b b\n", " a\n"}) {
    m = error_of<IOError>([&] { Files(ab, bad).load(); });
    EXPECT_NE(m.find("two tokens separated by one space"), std::string::npos) << bad << ": " << m;
  }
}

TEST(BpeTokenizer, EncodeAndDecodeErrors) {
  Files f(R"({"a": 0, "b": 1, "ab": 2, "c": 4})", "a b\n");  // no token for 'z', id 3 unused
  BpeTokenizer bpe = f.load();
  EXPECT_EQ(bpe.vocab_size(), 5);
  EXPECT_EQ(bpe.encode("ab"), (std::vector<int32_t>{2}));
  std::string m = error_of<ValueError>([&] { bpe.encode("abz"); });
  EXPECT_NE(m.find("byte 0x7a has no token"), std::string::npos) << m;
  EXPECT_FALSE(bpe.has_token(3));
  EXPECT_TRUE(bpe.has_token(4));
  m = error_of<ValueError>([&] { bpe.decode(std::vector<int32_t>{0, 5}); });
  EXPECT_NE(m.find("id 5 is out of range [0, 5)"), std::string::npos) << m;
  EXPECT_THROW(bpe.decode(std::vector<int64_t>{-1}), ValueError);
  m = error_of<ValueError>([&] { bpe.decode(std::vector<int32_t>{3}); });
  EXPECT_NE(m.find("id 3 has no token"), std::string::npos) << m;
}

namespace {

const std::string kJsonDir = std::string(TANDEM_REFERENCE_DIR) + "/bpe_tiny_json";

nlohmann::json reference_tokenizer_json() {
  std::ifstream in(kJsonDir + "/tokenizer.json");
  return nlohmann::json::parse(in);
}

// `doc` as tokenizer.json in a fresh folder, read through from_dir (no vocab.json there).
struct JsonFile {
  tandem::testing::TempDir dir;
  explicit JsonFile(const nlohmann::json& doc) { std::ofstream(dir.file("tokenizer.json")) << doc.dump(); }
  BpeTokenizer load() const { return BpeTokenizer::from_dir(dir.path().string()); }
};

// The IOError of loading the reference tokenizer.json changed by `edit`.
template <class Edit>
std::string json_error(Edit edit) {
  nlohmann::json doc = reference_tokenizer_json();
  edit(doc);
  return error_of<IOError>([&] { JsonFile(doc).load(); });
}

}  // namespace

// tokenizer.json as GPT2TokenizerFast saves bpe_tiny (make_bpe_tokenizer_json.py, which checks that
// the fast tokenizer's ids are the slow one's): the same ids as the vocab.json + merges.txt pair,
// with merges as tokenizers 0.20 on writes them (pairs) and as before (one string each).
TEST(BpeTokenizerJson, IdsEqualHuggingFaces) {
  const nlohmann::json doc = reference_tokenizer_json();
  ASSERT_TRUE(doc["model"]["merges"][0].is_array());  // the committed file has pairs
  nlohmann::json strings = doc;
  for (auto& m : strings["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  for (const nlohmann::json& d : {doc, strings}) {
    JsonFile f(d);
    BpeTokenizer bpe = f.load();
    EXPECT_EQ(bpe.vocab_size(), bpe_ref::kVocab);
    EXPECT_EQ(static_cast<int64_t>(bpe.num_merges()), bpe_ref::kMerges);
    EXPECT_EQ(bpe.end_of_text(), bpe_ref::kVocab - 1);
    for (size_t i = 0; i < bpe_ref::kTexts.size(); ++i) {
      EXPECT_EQ(bpe.encode(bpe_ref::kTexts[i]), bpe_ref::kIds[i]) << "text " << i << ": " << bpe_ref::kTexts[i];
      EXPECT_EQ(bpe.decode(bpe_ref::kIds[i]), bpe_ref::kTexts[i]);
    }
  }
  // A folder with both: the vocab.json pair, as before (here a different one, to tell them apart).
  JsonFile both(doc);
  std::ofstream(both.dir.file("vocab.json")) << R"({"a": 0, "b": 1, "ab": 2})";
  std::ofstream(both.dir.file("merges.txt")) << "a b\n";
  EXPECT_EQ(both.load().vocab_size(), 3);
  EXPECT_EQ(BpeTokenizer::from_tokenizer_json(both.dir.file("tokenizer.json")).vocab_size(), bpe_ref::kVocab);
}

// Settings this encoder does not implement are refused by name, not encoded otherwise.
TEST(BpeTokenizerJson, OtherTokenizersAreRefusedByName) {
  using J = nlohmann::json;
  const std::vector<std::pair<std::function<void(J&)>, std::string>> cases = {
      {[](J& d) { d["model"]["type"] = "WordPiece"; }, "model.type is \"WordPiece\""},
      {[](J& d) { d["model"]["continuing_subword_prefix"] = "##"; }, "model.continuing_subword_prefix is \"##\""},
      {[](J& d) { d["model"]["end_of_word_suffix"] = "</w>"; }, "model.end_of_word_suffix"},
      {[](J& d) { d["model"]["byte_fallback"] = true; }, "model.byte_fallback is true"},
      {[](J& d) { d["model"]["ignore_merges"] = true; }, "model.ignore_merges is true"},
      {[](J& d) { d["model"]["dropout"] = 0.1; }, "model.dropout is 0.1"},
      {[](J& d) { d["normalizer"] = J{{"type", "NFC"}}; }, "normalizer is {\"type\":\"NFC\"}"},
      {[](J& d) { d["pre_tokenizer"] = J{{"type", "Whitespace"}}; }, "pre_tokenizer is {\"type\":\"Whitespace\"}"},
      {[](J& d) { d.erase("pre_tokenizer"); }, "pre_tokenizer is missing"},
      {[](J& d) { d["pre_tokenizer"]["add_prefix_space"] = true; }, "pre_tokenizer.add_prefix_space is true"},
      {[](J& d) { d["pre_tokenizer"]["use_regex"] = false; }, "pre_tokenizer.use_regex is false"},
      {[](J& d) { d["added_tokens"].push_back(J{{"id", 421}, {"content", "<|pad|>"}}); },
       "added_tokens[1] is '<|pad|>' (id 421)"},
      {[](J& d) { d["added_tokens"][0]["id"] = 7; }, "gives \"<|endoftext|>\" id 7, the vocabulary id 420"},
  };
  for (const auto& [edit, expected] : cases) {
    const std::string m = json_error(edit);
    EXPECT_NE(m.find(expected), std::string::npos) << "expected '" << expected << "' in: " << m;
    EXPECT_NE(m.find("tokenizer.json"), std::string::npos) << m;
  }
  // <|endoftext|> only in added_tokens (not in model.vocab) is added with its id.
  nlohmann::json doc = reference_tokenizer_json();
  doc["model"]["vocab"].erase("<|endoftext|>");
  BpeTokenizer bpe = JsonFile(doc).load();
  EXPECT_EQ(bpe.end_of_text(), 420);
  EXPECT_EQ(bpe.encode("<|endoftext|>"), (std::vector<int32_t>{420}));
}

TEST(BpeTokenizerJson, FileErrorsNameTheFileAndField) {
  using J = nlohmann::json;
  tandem::testing::TempDir empty;
  std::string m = error_of<IOError>([&] { BpeTokenizer::from_dir(empty.path().string()); });
  EXPECT_NE(m.find("vocab.json' (with merges.txt beside it) nor '"), std::string::npos) << m;
  EXPECT_NE(m.find("tokenizer.json"), std::string::npos) << m;
  {
    tandem::testing::TempDir d;
    std::ofstream(d.file("tokenizer.json")) << R"({"model": )";
    m = error_of<IOError>([&] { BpeTokenizer::from_dir(d.path().string()); });
    EXPECT_NE(m.find("tokenizer.json' is not valid JSON"), std::string::npos) << m;
  }
  const std::vector<std::pair<std::function<void(J&)>, std::string>> cases = {
      {[](J& d) { d.erase("model"); }, "has no \"model\" object"},
      {[](J& d) { d["model"].erase("vocab"); }, "has no model.vocab"},
      {[](J& d) { d["model"]["vocab"] = J::array(); }, "model.vocab must be a JSON object of token -> id"},
      {[](J& d) { d["model"]["vocab"]["x"] = "one"; }, "model.vocab: the id of token 'x' must be an integer"},
      {[](J& d) { d["model"]["vocab"]["x"] = 0; }, "model.vocab: id 0 is given to"},
      {[](J& d) { d["model"].erase("merges"); }, "model.merges must be an array of merges, got none"},
      {[](J& d) { d["model"]["merges"][3] = J::array({"a"}); }, "model.merges[3]: a merge is two tokens"},
      {[](J& d) { d["model"]["merges"][3] = 5; }, "model.merges[3]: a merge is \"left right\""},
      {[](J& d) { d["model"]["merges"][3] = "ab"; }, "model.merges[3]: a merge is two tokens separated by one space"},
      {[](J& d) { d["model"]["merges"][3] = J::array({"Ġ", "q!"}); }, "model.merges[3]: the merge 'Ġ q!' has the part"},
      {[](J& d) { d["added_tokens"] = 3; }, "added_tokens must be an array"},
      {[](J& d) { d["model"]["type"] = 3; }, "model.type must be a string, got 3"},
      {[](J& d) { d["pre_tokenizer"]["type"] = false; }, "pre_tokenizer.type must be a string, got false"},
      {[](J& d) { d["added_tokens"][0].erase("id"); }, "added_tokens[0] must have a string \"content\""},
  };
  for (const auto& [edit, expected] : cases) {
    m = json_error(edit);
    EXPECT_NE(m.find(expected), std::string::npos) << "expected '" << expected << "' in: " << m;
  }
}
