#!/usr/bin/env bash
# Resume check for tandem-train: N steps with checkpoints every K, then a run resumed from the
# step-K checkpoint to N steps must print the same param_hash. Usage: resume_check.sh WORKDIR CMD...
# RESUME_FLAGS (16 steps) replaces the cnn run's flags, e.g. for a model given in CMD.
set -euo pipefail
work=$1; shift
rm -rf "$work" && mkdir -p "$work"
# shellcheck disable=SC2206
common=(${RESUME_FLAGS:---model cnn --max-steps 16 --batch-size 32 --no-eval --threads 1 --amp bf16 --ema 0.9})
"$@" "${common[@]}" --save "$work/ck" --save-every 8 --metrics "$work/full.jsonl"
"$@" "${common[@]}" --resume "$work/ck/ckpt-00000008" --metrics "$work/resumed.jsonl"
h1=$(grep '"event":"done"' "$work/full.jsonl" | sed 's/.*"param_hash":"\([0-9a-f]*\)".*/\1/')
h2=$(grep '"event":"done"' "$work/resumed.jsonl" | sed 's/.*"param_hash":"\([0-9a-f]*\)".*/\1/')
echo "uninterrupted $h1, resumed $h2"
[[ -n "$h1" && "$h1" == "$h2" ]] || { echo "resume_check: param_hash differs" >&2; exit 1; }
