#!/usr/bin/env bash
# ZeRO checkpoints (docs/zero.md): written at --zero 1 on 2 ranks (the optimizer state consolidated
# in stage 0's layout), resumed at --zero 1, 0 and 2 on 2 ranks: the uninterrupted run's param_hash;
# resumed at --zero 2 on 3 ranks (the same global batch of 12): it loads and trains on.
# Usage: zero_resume.sh WORKDIR MPIEXEC TANDEM_TRAIN
set -euo pipefail
work=$1 mpi=$2 tt=$3
rm -rf "$work" && mkdir -p "$work"
common=(--model gpt --n-layer 2 --n-head 2 --n-embd 64 --context 64 --max-steps 8 --no-eval --threads 1
        --optimizer adamw --bucket-cap-mb 0.05)
run() { local np=$1; shift; "$mpi" -np "$np" "$tt" "${common[@]}" "$@"; }
done_hash() { grep '"event":"done"' "$1" | sed 's/.*"param_hash":"\([0-9a-f]*\)".*/\1/'; }
run 2 --batch-size 6 --zero 1 --save "$work/ck" --save-every 4 --metrics "$work/full.jsonl" >/dev/null
h=$(done_hash "$work/full.jsonl")
for z in 1 0 2; do
  run 2 --batch-size 6 --zero "$z" --resume "$work/ck/ckpt-00000004" --metrics "$work/r$z.jsonl" >/dev/null
  hz=$(done_hash "$work/r$z.jsonl")
  echo "uninterrupted (--zero 1) $h, resumed at --zero $z $hz"
  [[ -n "$h" && "$h" == "$hz" ]] || { echo "zero_resume: param_hash differs" >&2; exit 1; }
done
run 3 --batch-size 4 --zero 2 --resume "$work/ck/ckpt-00000004" --metrics "$work/r3.jsonl" >/dev/null
grep -q '"event":"done"' "$work/r3.jsonl" || { echo "zero_resume: the 3-rank resume did not finish" >&2; exit 1; }
echo "resumed on 3 ranks at --zero 2: $(done_hash "$work/r3.jsonl")"
