#!/usr/bin/env bash
# Runs tandem-train twice (e.g. 1 rank and 2 ranks on the same global batch) and requires the same
# validation loss to a relative tolerance: the ranks' shards of each global batch are the 1-rank
# batch's samples, summed in another order.
# Usage: same_loss.sh RTOL "COMMAND A" "COMMAND B"
set -euo pipefail
rtol=$1 a=$2 b=$3
# shellcheck disable=SC2086
la=$($a | sed -n 's/.*validation loss \([0-9.e+-]*\) on.*/\1/p')
# shellcheck disable=SC2086
lb=$($b | sed -n 's/.*validation loss \([0-9.e+-]*\) on.*/\1/p')
echo "A: $la  B: $lb"
[[ -n "$la" && -n "$lb" ]] || { echo "same_loss: a run printed no validation loss" >&2; exit 1; }
awk -v a="$la" -v b="$lb" -v r="$rtol" 'BEGIN { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a;
  exit !(d <= r * m) }' || { echo "same_loss: $la and $lb differ by more than $rtol relative" >&2; exit 1; }
