"""Checks the GPT-2 BPE tokenizer at scale against Hugging Face's `tokenizers` (its Rust BPE with
GPT-2's byte-level pre-tokenizer): trains a byte-level BPE of 20,000 tokens on the fortunes corpus
(the regular files of /usr/share/games/fortunes, 2.58 MB), then encodes with both the whole corpus,
200 KB of random letters (one pre-tokenizer piece: GPT-2's own encoder takes time quadratic in a
piece's length there) and 200 KB of one repeated character, and compares the ids. Prints one JSON
line per text with tandem-bench-tokenizer's figures and the comparison. Not part of the suite (it
needs Python and `pip install tokenizers`):
  python3 tests/reference/bpe_against_hf.py build/bench/tokenizer/tandem-bench-tokenizer
"""
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from tokenizers import ByteLevelBPETokenizer

FORTUNES = "/usr/share/games/fortunes"


def corpus_files():
    return sorted(f for f in glob.glob(os.path.join(FORTUNES, "*"))
                  if os.path.isfile(f) and not os.path.islink(f) and not f.endswith((".dat", ".u8")))


def main():
    bench = sys.argv[1]
    work = tempfile.mkdtemp(prefix="tandem-bpe-")
    files = corpus_files()
    hf = ByteLevelBPETokenizer()
    hf.train(files, vocab_size=20000, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
    hf.save_model(work)
    rng = random.Random(1)
    texts = {
        "fortunes": b"".join(open(f, "rb").read() for f in files),
        "random_letters": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(200000)).encode(),
        "one_character": b"-" * 200000,
    }
    ok = True
    for name, text in texts.items():
        path = os.path.join(work, name + ".txt")
        ids_path = os.path.join(work, name + ".ids")
        with open(path, "wb") as f:
            f.write(text)
        out = subprocess.run([bench, "--tokenizer", work, "--text", path, "--ids-out", ids_path],
                             check=True, capture_output=True, text=True).stdout
        figures = json.loads(out)
        start = time.perf_counter()
        want = hf.encode(text.decode("utf-8")).ids
        hf_seconds = time.perf_counter() - start
        got = [int(line) for line in open(ids_path)]
        first_difference = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                                None if len(got) == len(want) else min(len(got), len(want)))
        ok &= first_difference is None
        figures.update(text=name, hf_ids=len(want), hf_encode_s=round(hf_seconds, 4),
                       equal_to_hf=first_difference is None, first_difference=first_difference)
        print(json.dumps(figures))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
