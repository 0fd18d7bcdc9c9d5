#!/usr/bin/env bash
# The GPT step's fusions take effect: scripts/sim-launches counts fewer launches a step with the
# defaults than with the residual adds apart from their LayerNorms (--no-fuse-norm), cross-entropy's
# gradient made in its backward (TANDEM_CE_GRAD=backward), the column sums in two launches
# (TANDEM_COLUMN_SUMS=two-pass) and AdamW a launch per parameter (TANDEM_ADAM=per-tensor), each
# alone; and the host waits for the device at most twice a step. The defaults' AdamW is the
# tandem-train one (nn::AdamW, multi-tensor on a device), not --fused-adamw.
# Usage: fewer_launches.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
# count [VAR=VALUE | --flag]: one step's launches with that switch (none: the defaults).
count() {
  local envs=() flags=()
  [[ $# -gt 0 && $1 != --* ]] && envs=("$1") || flags=("$@")
  env "${envs[@]}" "$src/scripts/sim-launches" "$build" "${flags[@]}" |
    sed -n 's/^\([0-9]*\) launches a step$/\1/p'
}
fused=$(count)
echo "defaults: $fused launches a step"
fail=0
# The host waits for the device twice a step, both in the forward: the token ids' host copy (the
# embedding's backward plans from it, and its range check reads it) and cross-entropy's target
# check. The position table is a slice (no lookup, nothing to check) since 2026-11-27.
waits=$("$src/scripts/sim-launches" "$build" | sed -n 's/^\([0-9]*\) host waits a step$/\1/p')
echo "defaults: $waits host waits a step"
[[ -n "$waits" && $waits -le 2 ]] || { echo "fewer_launches: $waits host waits a step, expected at most 2" >&2; fail=1; }
for way in "--no-fuse-norm" "TANDEM_CE_GRAD=backward" "TANDEM_COLUMN_SUMS=two-pass" "TANDEM_ADAM=per-tensor"; do
  n=$(count "$way")
  echo "$way: $n launches a step"
  [[ -n "$fused" && -n "$n" && $fused -lt $n ]] || { echo "fewer_launches: $way does not launch more" >&2; fail=1; }
done
exit $fail
