#!/usr/bin/env bash
# NaN in a batch (TANDEM_FAULT=nan_batch:step=5) and a diverging loss (lr 1e4), without amp:
#  - by default the run stops, exit code 1, with a message naming step 5, and no checkpoint after
#    step 4 exists (the last one is finite, and a resume from it runs);
#  - with --no-stop-on-nonfinite the run warns, skips step 5's update and finishes; its final
#    checkpoint is finite (the save refuses nan/inf parameters);
#  - the diverging run stops at the first non-finite loss, naming its step.
# Usage: nonfinite.sh WORKDIR NP TANDEM_TRAIN [MPIEXEC]
set -uo pipefail
source "$(dirname "$0")/fault_lib.sh"
work=$1 np=$2 tt=$3 mpiexec=${4:-}
launch=("$tt")
[[ $np -gt 1 ]] && launch=(timeout -s KILL 120 "$mpiexec" -np "$np" "$tt")
rm -rf "$work" && mkdir -p "$work"
base=("${launch[@]}" "${TT_FLAGS[@]}" --save-every 2)
run=("${base[@]}" --max-steps 12)

TANDEM_FAULT=nan_batch:step=5:rank=$((np - 1)) "${run[@]}" --save "$work/stop" >"$work/stop.log" 2>&1
rc=$?
cat "$work/stop.log"
[[ $rc -ne 0 ]] || fail "a nan batch did not stop the run"
grep -q "non-finite loss at step 5 (epoch 1, batch 4): loss nan on rank(s) $((np - 1)) of $np" "$work/stop.log" \
  || fail "the message does not name step 5 and rank $((np - 1))"
[[ $(cat "$work/stop/latest") == ckpt-00000004 ]] || fail "latest is $(cat "$work/stop/latest"), expected ckpt-00000004"
ls "$work/stop" | grep -qE 'ckpt-0000000[5-9]|ckpt-0000001' && fail "a checkpoint after the bad step was written"
echo "fault_table: nan_batch np=$np stop rc=$rc latest=$(cat "$work/stop/latest")"
"${base[@]}" --resume "$work/stop" --save "$work/stop" --max-steps 6 >"$work/stop.resume.log" 2>&1 \
  || { cat "$work/stop.resume.log"; fail "resume from the last finite checkpoint failed"; }

TANDEM_FAULT=nan_batch:step=5:rank=0 "${run[@]}" --save "$work/go" --no-stop-on-nonfinite --metrics "$work/go.jsonl" \
  >"$work/go.log" 2>&1 || { cat "$work/go.log"; fail "--no-stop-on-nonfinite did not finish"; }
grep -q "warning: non-finite loss at step 5 .*update is skipped" "$work/go.log" || fail "no warning naming step 5"
[[ $(cat "$work/go/latest") == ckpt-00000012 ]] || fail "no final checkpoint: $(cat "$work/go/latest")"
grep -q '"event":"done"' "$work/go.jsonl" || fail "no done record"
echo "fault_table: nan_batch np=$np --no-stop-on-nonfinite finished, final $(cat "$work/go/latest")"

"${run[@]}" --lr 10000 --lr-schedule constant --save "$work/diverge" >"$work/diverge.log" 2>&1
rc=$?
cat "$work/diverge.log"
[[ $rc -ne 0 ]] || fail "a diverging run did not stop"
grep -Eq "non-finite loss at step [0-9]+|refusing to write a checkpoint at step [0-9]+" "$work/diverge.log" \
  || fail "the diverging run's message names no step"
echo "fault_table: diverging lr=1e4 np=$np rc=$rc: $(grep -Eo 'non-finite loss at step [0-9]+|refusing to write a checkpoint at step [0-9]+' "$work/diverge.log" | head -1)"
echo PASS
