"""Writes tests/reference/bpe_tiny_json/tokenizer.json: the tiny tokenizer of bpe_tiny/ (vocab.json and
merges.txt, make_bpe_reference.py) as Hugging Face's fast GPT2TokenizerFast saves it, after checking
that the fast tokenizer gives the slow one's ids (those of bpe_values.h) on the same texts. The C++
test reads the file and expects bpe_values.h's ids. Run with the pyenv python3 after
`pip install "transformers<5" tokenizers`:
  python3 tests/reference/make_bpe_tokenizer_json.py
"""
import os
import shutil
import tempfile

import tokenizers
import transformers
from transformers import GPT2Tokenizer, GPT2TokenizerFast

import make_bpe_reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "bpe_tiny_json")


def main():
    vocab, merges = os.path.join(ref.OUT_DIR, "vocab.json"), os.path.join(ref.OUT_DIR, "merges.txt")
    slow, fast = GPT2Tokenizer(vocab, merges), GPT2TokenizerFast(vocab_file=vocab, merges_file=merges)
    text = ""
    for name in ref.TRAIN_FILES:
        with open(os.path.join(ref.FORTUNES, name), encoding="utf-8") as f:
            text += f.read()
    for t in ref.TEXTS + [text[1000:3000]]:  # bpe_values.h's texts
        assert fast.encode(t) == slow.encode(t), t
    with tempfile.TemporaryDirectory() as tmp:
        fast.save_pretrained(tmp)
        os.makedirs(OUT_DIR, exist_ok=True)
        shutil.copy(os.path.join(tmp, "tokenizer.json"), os.path.join(OUT_DIR, "tokenizer.json"))
    print(f"wrote {OUT_DIR}/tokenizer.json (transformers {transformers.__version__}, tokenizers {tokenizers.__version__})")


if __name__ == "__main__":
    main()
