#!/usr/bin/env bash
# ZeRO stage 2's gradient memory with buckets much smaller than the model (docs/zero.md): the done
# record's grad_bytes of rank 0 (the shards' gradients and the pool of buckets in flight) at most
# RATIO of stage 0's (the model's .grad and every bucket) on the same ranks.
# Usage: zero_grad_bytes.sh RATIO "LAUNCH" "FLAGS"   (LAUNCH: e.g. "mpiexec -np 2 tandem-train")
set -euo pipefail
ratio=$1 launch=$2 flags=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grad_bytes() {  # the done record's grad_bytes of a run with --zero $1
  # shellcheck disable=SC2086
  $launch $flags --zero "$1" --metrics "$work/m$1.jsonl" >/dev/null
  grep '"event":"done"' "$work/m$1.jsonl" | tail -1 | sed -n 's/.*"grad_bytes":\([0-9]*\).*/\1/p'
}
g0=$(grad_bytes 0)
g2=$(grad_bytes 2)
echo "grad_bytes: stage 0 $g0, stage 2 $g2 (at most $ratio of stage 0)"
[[ -n "$g0" && -n "$g2" ]] || { echo "zero_grad_bytes: no grad_bytes in a done record" >&2; exit 1; }
awk -v a="$g2" -v b="$g0" -v r="$ratio" 'BEGIN { exit !(a <= r * b) }' ||
  { echo "zero_grad_bytes: stage 2 holds $g2 bytes of gradients, more than $ratio x $g0" >&2; exit 1; }
