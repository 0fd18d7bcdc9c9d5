#!/usr/bin/env bash
# Rank 0 SIGKILLed while it writes its second checkpoint (step 8 of 12), at each stage of the write
# (TANDEM_FAULT=ckpt_write:<stage>:hit=2): the directory must still hold a loadable checkpoint (step
# 4, or step 8 once `latest` names it), and a run resumed from it must end with the param_hash of
# the run that never stopped; the crashed write's temporary directory is pruned by the next save.
# Usage: ckpt_kill.sh WORKDIR NP TANDEM_TRAIN [MPIEXEC] [STAGE...]
set -uo pipefail
source "$(dirname "$0")/fault_lib.sh"
work=$1 np=$2 tt=$3 mpiexec=${4:-}
shift 4 2>/dev/null || shift $#
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(tmp_dir after_model after_state after_rename after_latest)
launch=("$tt")
[[ $np -gt 1 ]] && launch=(timeout -s KILL 120 "$mpiexec" -np "$np" "$tt")
rm -rf "$work" && mkdir -p "$work"
run=("${launch[@]}" "${TT_FLAGS[@]}" --max-steps 12 --save-every 4)

"${run[@]}" --save "$work/ref" --metrics "$work/ref.jsonl" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; fail "reference run"; }
want=$(done_hash "$work/ref.jsonl")
[[ -n "$want" ]] || fail "no param_hash in the reference run"
for stage in "${stages[@]}"; do
  ck="$work/ck-$stage"
  TANDEM_FAULT=ckpt_write:$stage:hit=2 "${run[@]}" --save "$ck" >"$work/$stage.log" 2>&1
  rc=$? end=$(now_ms)
  t0=$(fault_ms "$work/$stage.log")
  [[ -n "$t0" && $rc -ne 0 ]] || { cat "$work/$stage.log"; fail "$stage: the fault did not end the run (rc $rc)"; }
  expect=ckpt-00000004
  [[ $stage == after_latest ]] && expect=ckpt-00000008
  got=$(cat "$ck/latest")
  [[ $got == "$expect" ]] || fail "$stage: latest names '$got', expected $expect"
  "${run[@]}" --resume "$ck" --save "$ck" --metrics "$work/$stage.jsonl" >"$work/$stage.resume.log" 2>&1 \
    || { cat "$work/$stage.resume.log"; fail "$stage: resume failed"; }
  have=$(done_hash "$work/$stage.jsonl")
  grep -o "resumed from [^:]*: step [0-9]*" "$work/$stage.resume.log" | head -1
  ls -a "$ck" | grep -q '^\.tmp-' && fail "$stage: the crashed write's temporary was not pruned"
  echo "fault_table: ckpt_write:$stage np=$np rc=$rc fault_to_exit_ms=$((end - t0)) latest=$got resumed_hash=$have want=$want"
  [[ $have == "$want" ]] || fail "$stage: resumed param_hash $have, the uninterrupted run's $want"
done
echo PASS
