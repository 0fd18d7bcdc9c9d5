"""Writes a tiny GPT-2 byte-level BPE tokenizer (tests/reference/bpe_tiny/vocab.json and merges.txt:
the 256 byte tokens in GPT-2's order, merges learned on a few fortunes files plus a handful chosen by
hand, <|endoftext|> last) and tests/reference/bpe_values.h: test strings and the ids that Hugging
Face's slow GPT2Tokenizer (transformers 4.x, which applies GPT-2's regex with the `regex` module)
gives them. Run with the pyenv python3 after `pip install "transformers<5"`:
  python3 tests/reference/make_bpe_reference.py
"""
import collections
import json
import os

import regex
import transformers
from transformers import GPT2Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "bpe_tiny")
FORTUNES = "/usr/share/games/fortunes"
TRAIN_FILES = ["fortunes", "wisdom", "people"]
N_LEARNED = 160
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# Strings the C++ test encodes: contractions (and an upper-case one that is not), digits, punctuation
# runs, runs of spaces and newlines, tabs, CR LF, letters and digits beyond ASCII (Greek, accents,
# a combining mark, CJK, Arabic-Indic digits, a Roman numeral, a superscript), Unicode spaces, emoji,
# the special token, and a paragraph of fortunes text.
TEXTS = [
    "",
    "Hello world",
    "I'm sure you're right, we've seen they'll say he'd go; it's done. Don't!",
    "IT'S 'S ''s 'x '",
    "In 1984, 3.14159 and 2,718 were 42nd.",
    "Wait!!! What??? ... --- (yes) [no] {maybe} <tag/> @#$%^&*",
    "a  b   c    d",
    "trailing spaces   ",
    "   leading spaces",
    "\n\n\nthree newlines\n\nand two\nand one",
    "\ttab\t\tdouble tab \t mixed",
    "line one\r\nline two\r\n",
    "café naïve Ελληνικά résumé",
    "e\u0301 combining ñ n\u0303",
    "漢字とかな and カタカナ",
    "Arabic-Indic ٣٤٥ Roman \u216b superscript x\u00b2 fraction \u00bd",
    "no\u00a0break em\u2003space ideographic\u3000space",
    "emoji 👍🏽 ok 🎉🎉 done",
    "before<|endoftext|>after",
    "\x00\x01\x7f control",
]


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (written from its definition)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, {b: chr(c) for b, c in zip(bs, cs)}


def learn_merges(text, byte_char, count):
    words = collections.Counter(regex.findall(GPT2_PATTERN, text))
    corpus = {tuple(byte_char[b] for b in w.encode("utf-8")): n for w, n in words.items()}
    merges = []
    for _ in range(count):
        pairs = collections.Counter()
        for w, n in corpus.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]  # most frequent, ties by the pair
        merges.append(best)
        merged = {}
        for w, n in corpus.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        corpus = merged
    return merges


def cpp_string(b):
    """A C++ string literal of the bytes b (octal escapes: fixed width, so no digit is swallowed)."""
    out = []
    for c in b:
        if 0x20 <= c < 0x7F and c not in (ord('"'), ord("\\"), ord("?")):
            out.append(chr(c))
        else:
            out.append("\\%03o" % c)
    return 'std::string("' + "".join(out) + '", %d)' % len(b)


def main():
    bs, byte_char = bytes_to_unicode()
    text = ""
    for name in TRAIN_FILES:
        with open(os.path.join(FORTUNES, name), encoding="utf-8") as f:
            text += f.read()
    merges = learn_merges(text, byte_char, N_LEARNED)
    # By hand: UTF-8 pairs of é and ε, a run of spaces and of newlines, and one merge over a merge.
    for a, b in [("Ã", "©"), ("Î", "µ"), ("Ġ", "Ġ"), ("Ċ", "Ċ"), ("ĠĠ", "ĠĠ")]:
        if (a, b) not in merges:
            merges.append((a, b))
    vocab = {byte_char[b]: i for i, b in enumerate(bs)}
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)

    os.makedirs(OUT_DIR, exist_ok=True)
    vocab_path, merges_path = os.path.join(OUT_DIR, "vocab.json"), os.path.join(OUT_DIR, "merges.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(merges_path, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))

    tok = GPT2Tokenizer(vocab_path, merges_path)
    paragraph = text[1000:3000]
    texts = TEXTS + [paragraph]
    ids = [tok.encode(t) for t in texts]
    for t, i in zip(texts, ids):
        assert tok.decode(i) == t, t  # the reference round-trips too

    lines = [
        f"// Generated by tests/reference/make_bpe_reference.py (transformers {transformers.__version__}, slow",
        "// GPT2Tokenizer; regex " + regex.__version__ + "): the ids of kTexts under bpe_tiny/. Do not edit.",
        "#pragma once",
        "#include <cstdint>",
        "#include <string>",
        "#include <vector>",
        "",
        "namespace bpe_ref {",
        f"constexpr int64_t kVocab = {len(vocab)}, kMerges = {len(merges)};",
        "inline const std::vector<std::string> kTexts = {",
    ]
    lines += ["    " + cpp_string(t.encode("utf-8")) + "," for t in texts]
    lines += ["};", "inline const std::vector<std::vector<int32_t>> kIds = {"]
    lines += ["    {" + ", ".join(str(x) for x in i) + "}," for i in ids]
    lines += ["};", "}  // namespace bpe_ref", ""]
    with open(os.path.join(HERE, "bpe_values.h"), "w") as f:
        f.write("\n".join(lines))
    print(f"{len(vocab)} tokens, {len(merges)} merges, {len(texts)} texts, {sum(map(len, ids))} ids")


if __name__ == "__main__":
    main()
