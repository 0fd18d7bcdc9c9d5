#!/usr/bin/env bash
# tandem-train --model gpt --tokenizer DIR end to end: a tiny GPT trains on BPE tokens of fortunes,
# its eval records say nats/token, the validation loss falls (from the first evaluation to the last,
# and well below ln(vocabulary), the loss of knowing nothing) and the sample decodes to text.
# Usage: bpe_app_check.sh WORK_DIR TANDEM_TRAIN TOKENIZER_DIR
set -euo pipefail
work=$1 exe=$2 tok=$3
rm -rf "$work" && mkdir -p "$work"
out=$("$exe" --model gpt --tokenizer "$tok" --n-layer 1 --n-head 2 --n-embd 32 --context 32 --batch-size 4 \
  --eval-windows 16 --sample-tokens 40 --threads 1 --max-steps 60 --eval-every 20 --warmup-steps 5 --lr 3e-3 \
  --metrics "$work/metrics.jsonl")
echo "$out"
fail() { echo "bpe_app_check: $*" >&2; exit 1; }
grep -q "tokenizer: 421 tokens, 164 merges" <<<"$out" || fail "no tokenizer line"
grep -q "vocabulary 448 in the model" <<<"$out" || fail "the model's vocabulary is not 421 padded to 448"
evals=$(grep '"event":"eval"' "$work/metrics.jsonl") || fail "no eval records"
[[ $(grep -c '"loss_unit":"nats/token"' <<<"$evals") == 3 ]] || fail "eval records without loss_unit nats/token"
grep '"event":"done"' "$work/metrics.jsonl" | grep -q '"loss_unit":"nats/token"' || fail "done record's loss_unit"
losses=$(sed -n 's/.*"val_loss":\([-0-9.eE+]*\).*/\1/p' <<<"$evals" | tr '\n' ' ')
echo "val_loss per evaluation: $losses"
# ln(421) = 6.04: a model that knows nothing; falling by 0.5 below it and from first to last.
awk -v l="$losses" 'BEGIN { n = split(l, v, " "); exit !(n == 3 && v[n] < v[1] && v[n] < log(421) - 0.5) }' ||
  fail "the validation loss did not fall: $losses"
sample=$(sed -n '/^sample (/,$p' <<<"$out" | tail -n +2)
[[ -n "${sample//[$'\n']/}" ]] || fail "empty sample"
