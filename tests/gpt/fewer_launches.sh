#!/usr/bin/env bash
# The GPT step's fusions take effect: scripts/sim-launches counts fewer launches a step with the
# defaults than with the residual adds apart from their LayerNorms (--no-fuse-norm), cross-entropy's
# gradient made in its backward (TANDEM_CE_GRAD=backward) and the column sums in two launches
# (TANDEM_COLUMN_SUMS=two-pass), each alone.
# Usage: fewer_launches.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
count() { "$src/scripts/sim-launches" "$build" --fused-adamw "$@" | sed -n 's/^\([0-9]*\) launches a step$/\1/p'; }
fused=$(count)
echo "defaults: $fused launches a step"
fail=0
for way in "--no-fuse-norm" "TANDEM_CE_GRAD=backward" "TANDEM_COLUMN_SUMS=two-pass"; do
  if [[ $way == --* ]]; then n=$(count "$way"); else n=$(env "$way" "$src/scripts/sim-launches" "$build" --fused-adamw | sed -n 's/^\([0-9]*\) launches a step$/\1/p'); fi
  echo "$way: $n launches a step"
  [[ -n "$fused" && -n "$n" && $fused -lt $n ]] || { echo "fewer_launches: $way does not launch more" >&2; fail=1; }
done
exit $fail
