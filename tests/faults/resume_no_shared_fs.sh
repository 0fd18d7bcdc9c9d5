#!/usr/bin/env bash
# Resume on "several nodes" without a shared filesystem: the checkpoint directory is hidden from
# every rank but 0 (hide_dir.sh: a private mount namespace with an empty tmpfs over it). Rank 0
# reads and broadcasts the checkpoint, so the resumed 2-rank run must end with the param_hash of
# the run that never stopped; hidden from rank 0 instead, every rank must fail with an error
# naming the path (not wait for a deadline). Exit 77 (skipped) without root/unshare.
# Usage: resume_no_shared_fs.sh WORKDIR MPIEXEC TANDEM_TRAIN
set -uo pipefail
source "$(dirname "$0")/fault_lib.sh"
work=$1 mpiexec=$2 tt=$3
hide=$(cd "$(dirname "$0")" && pwd)/hide_dir.sh
rm -rf "$work" && mkdir -p "$work/ck"
if [[ $(id -u) -ne 0 ]] || ! unshare -m true 2>/dev/null; then echo "SKIP: needs root and unshare -m"; exit 77; fi
run=(timeout -k 5 120 "$mpiexec" -np 2 "$hide" "$tt" "${TT_FLAGS[@]}")
export HIDE_DIR="$work/ck"
HIDE_RANKS="" "${run[@]}" --max-steps 12 --save "$work/ck" --save-every 4 --metrics "$work/full.jsonl" >"$work/full.log" 2>&1 \
  || { cat "$work/full.log"; fail "reference run"; }
want=$(done_hash "$work/full.jsonl")
HIDE_RANKS="1" "${run[@]}" --max-steps 12 --resume "$work/ck/ckpt-00000008" --metrics "$work/resumed.jsonl" \
  >"$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; fail "resume with the checkpoint on rank 0 only"; }
have=$(done_hash "$work/resumed.jsonl")
echo "resume, checkpoint on rank 0 only: $have (uninterrupted $want)"
[[ -n $want && $have == "$want" ]] || fail "resumed param_hash $have, uninterrupted $want"
HIDE_RANKS="0" TANDEM_COMM_TIMEOUT=60 "${run[@]}" --max-steps 12 --resume "$work/ck/ckpt-00000008" \
  >"$work/rank0.log" 2>&1
rc=$?
cat "$work/rank0.log" | grep -v "^ " | head -5
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "hidden from rank 0: rc $rc"
grep -q "ckpt-00000008" "$work/rank0.log" || fail "the error does not name the checkpoint"
grep -q "missed its deadline" "$work/rank0.log" && fail "a rank waited for the deadline"
echo PASS
