#!/usr/bin/env bash
# A rank SIGKILLed or SIGSTOPped after step 5 (mid-epoch) of an mpirun job: every other rank must
# end at the communication deadline with a message naming the collective and the lost rank, and
# the whole job must end (within the deadline plus a few seconds; more than deadline + 20 s fails, so a
# hang fails rather than passes). mpirun runs with orte_enable_recovery, so it does not end the job
# itself when a process dies: the deadline has to, as when a node vanishes. FAULT_RECOVERY=0 runs
# with mpirun's default (it ends the job itself when a process dies of a signal) for comparison.
# Each surviving rank's flight record (TANDEM_FLIGHT_DIR) must be named in its error, and
# scripts/flight-report must name the collective the lost rank never entered.
# Usage: rank_fault.sh kill|stop NP RANK MPIEXEC TANDEM_TRAIN
set -uo pipefail
source "$(dirname "$0")/fault_lib.sh"
kind=$1 np=$2 rank=$3 mpiexec=$4 tt=$5
deadline=${FAULT_DEADLINE:-5}  # short, but above a rank's lag in loading the data under ASan
out=$(mktemp) flight=$(mktemp -d); trap 'rm -rf "$out" "$flight"' EXIT
TANDEM_FLIGHT_DIR=$flight TANDEM_COMM_TIMEOUT=$deadline TANDEM_FAULT=rank_$kind:step=5:rank=$rank \
  timeout -k 5 50 "$mpiexec" -np "$np" --mca orte_enable_recovery "${FAULT_RECOVERY:-1}" \
  "$tt" "${TT_FLAGS[@]}" --max-steps 200 >"$out" 2>&1
rc=$?
end=$(now_ms)
cat "$out"
t0=$(fault_ms "$out")
[[ -n "$t0" ]] || fail "the fault never fired (no 'tandem fault:' line)"
# (mpirun's exit status after MPI_Abort is 0 under orte_enable_recovery: what counts is that no
# rank finished.)
grep -q "param_hash" "$out" && fail "a rank finished training after another was lost"
[[ $rc -ne 124 ]] || fail "the job hung: ended by the driver's 50 s guard"
elapsed=$(( end - t0 ))
echo "fault_table: rank_$kind np=$np rank=$rank deadline=${deadline}s fault_to_all_exited_ms=$elapsed rc=$rc"
grep -q "missed its deadline of $deadline s" "$out" || fail "no deadline error in the output"
grep -Eq "allreduce|barrier|broadcast|allgather" "$out" || fail "the message names no collective"
grep -Eq "(missing ranks \(never arrived at #[0-9]+\): ([0-9]+, )*$rank[;,]|rank\(s\) ([0-9]+, )*$rank )" "$out" \
  || fail "the message does not name rank $rank"
# The flight recorder: the error names the dump, and the reader names the collective the lost
# rank never entered.
grep -q "Flight record of this rank's last collectives: $flight/tandem-flight-rank[0-9]*.json" "$out" \
  || fail "the error does not name a flight record"
report=$("$(dirname "$0")/../../scripts/flight-report" "$flight") || fail "flight-report named no collective: $report"
echo "$report"
echo "$report" | grep -Eq "first collective some rank never entered: #[0-9]+ allreduce .*not by rank\(s\) ([0-9]+, )*$rank\b" \
  || fail "flight-report does not name rank $rank"
(( elapsed < (deadline + 20) * 1000 )) || fail "the job took ${elapsed} ms to end after the fault"
echo "PASS"
