#!/usr/bin/env bash
# A node's processes lost (issue 51 item 1): on the test nodes, 2 nodes x 2 ranks; rank 3 (on node1)
# stops itself after step 5 (TANDEM_FAULT=rank_stop), then processes of node1's namespace are
# SIGKILLed, and the job must end, not hang (more than deadline + 30 s fails; no rank may finish):
#   ranks: its two ranks (tandem-train), Open MPI's daemon left (mpirun runs with
#          orte_enable_recovery): the ranks of node0 end with the deadline's error naming the
#          collective and node1's ranks 2 and 3 as missing (found by the roll call across nodes).
#   all:   every process there, the daemon too: mpirun notices the lost daemon and ends the job
#          itself (its message blames the daemon's start), or node0's ranks reach the deadline first.
# Usage: node_kill.sh ranks|all TANDEM_TRAIN
set -uo pipefail
source "$(dirname "$0")/../faults/fault_lib.sh"
what=$1 tt=$2
nodes=$(dirname "$0")/../../scripts/nodes
ip netns list | grep -qw tandem-node1 || { echo "SKIP: node1 is not up (scripts/nodes up 2)"; exit 77; }
deadline=5
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(now_ms)
TANDEM_COMM_TIMEOUT=$deadline TANDEM_FAULT=rank_stop:step=5:rank=3 \
  timeout -k 5 $((deadline + 60)) "$nodes" run 2x2 --mca orte_enable_recovery 1 "$tt" "${TT_FLAGS[@]}" \
  --max-steps 200 >"$out" 2>&1 &
job=$!
for ((i = 0; i < 600; i++)); do grep -q "tandem fault:" "$out" && break; sleep 0.1; done
grep -q "tandem fault:" "$out" || { cat "$out"; kill "$job"; fail "the fault never fired"; }
pids=$(ip netns pids tandem-node1)
[[ $what == ranks ]] && pids=$(for p in $pids; do [[ $(cat /proc/$p/comm 2>/dev/null) == tandem-train ]] && echo $p; done)
echo "killing node1's processes ($what): $(echo $pids)"
kill -9 $pids 2>/dev/null
t0=$(now_ms)
wait "$job"
rc=$?
elapsed=$(( $(now_ms) - t0 ))
cat "$out"
echo "node_kill: rc=$rc, the job ended ${elapsed} ms after node1 was killed (deadline ${deadline} s)"
[[ $rc -ne 124 && $rc -ne 137 ]] || fail "the job hung: ended by the driver's timeout"
grep -q "param_hash" "$out" && fail "a rank finished training after node1 was lost"
if [[ $what == all ]]; then
  # Whichever comes first ends the job: mpirun noticing its lost daemon (a non-zero exit), or the
  # deadline on node0's ranks, whose MPI_Abort mpirun may report as 0 under orte_enable_recovery.
  [[ $rc -ne 0 ]] || grep -Eq "rank [01] of 4: allreduce \(collective #[0-9]+\) missed its deadline" "$out" \
    || fail "mpirun exited 0 after losing a node, and no rank of node0 reported the deadline"
  echo "PASS"
  exit 0
fi
grep -Eq "rank [01] of 4: allreduce \(collective #[0-9]+\) missed its deadline of $deadline s; missing ranks \(never arrived at #[0-9]+\): 2, 3;" "$out" \
  || fail "no deadline error of a node0 rank naming node1's ranks 2 and 3 as missing"
(( elapsed < (deadline + 30) * 1000 )) || fail "the job took ${elapsed} ms to end after node1 was killed"
echo "PASS"
