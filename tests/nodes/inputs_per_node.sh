#!/usr/bin/env bash
# The files every rank reads (issue 51 item 4), on 2 test nodes whose views differ: a folder holding
# an ONNX model, an .npz of arrays and a run config is hidden on node1 (node_view.sh). Each run must
# end at once (not at a deadline, not hang) with rank 1's message naming the files it cannot read,
# its host and the shared filesystem it needs; with nothing hidden the same runs train to the end.
# Usage: inputs_per_node.sh WORK TANDEM_TRAIN
set -uo pipefail
source "$(dirname "$0")/../faults/fault_lib.sh"
work=$1 tt=$2
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../..
ip netns list | grep -qw tandem-node1 || { echo "SKIP: node1 is not up (scripts/nodes up 2)"; exit 77; }
rm -rf "$work" && mkdir -p "$work/inputs"
cp "$src/tests/onnx/models/mlp.onnx" "$src/tests/data/arrays/regression.npz" "$src/tests/app/resmlp.yaml" "$work/inputs/"
export HIDE_DIR=$work/inputs TANDEM_COMM_TIMEOUT=60
onnx=(--model "$work/inputs/mlp.onnx" --data "$work/inputs/regression.npz" --loss mse --val-fraction 0.25
      --batch-size 16 --threads 1 --max-steps 4)
config=(--config "$work/inputs/resmlp.yaml" --batch-size 32 --no-eval --threads 1 --max-steps 4)
run() {  # run NAME HIDE_HOSTS ARGS...: the job's exit code; its output in $work/NAME.log
  local name=$1
  HIDE_HOSTS=$2 timeout -k 5 120 "$src/scripts/nodes" run 2x1 "$here/node_view.sh" "$tt" "${@:3}" >"$work/$name.log" 2>&1
}
for case in onnx config; do
  declare -n args=$case
  run "$case-shared" "" "${args[@]}" || { cat "$work/$case-shared.log"; fail "$case: the run with the files on both nodes"; }
  grep -q "world size 2" "$work/$case-shared.log" || { cat "$work/$case-shared.log"; fail "$case: no world size 2"; }
  run "$case-hidden" node1 "${args[@]}"
  rc=$?
  grep -v "^\[rank 0\]" "$work/$case-hidden.log" | head -8
  [[ $rc -ne 0 ]] || fail "$case: hidden on node1, the run succeeded"
  [[ $rc -ne 124 && $rc -ne 137 ]] || fail "$case: hidden on node1, the job hung"
  grep -q "missed its deadline" "$work/$case-hidden.log" && fail "$case: a rank waited for the deadline"
  grep -q "rank 1 of 2 (host node1) cannot read" "$work/$case-hidden.log" || fail "$case: no message of rank 1 on node1"
  grep -q "filesystem shared by the nodes" "$work/$case-hidden.log" || fail "$case: the message does not say what is needed"
done
grep -q -- "--data $work/inputs/regression.npz (No such file or directory), --model $work/inputs/mlp.onnx" \
  "$work/onnx-hidden.log" || fail "onnx: the message does not name both files"
grep -q -- "--config $work/inputs/resmlp.yaml" "$work/config-hidden.log" || fail "config: the message does not name it"
echo PASS
