#!/usr/bin/env bash
# A short run with step records plots as curves: tandem-train --max-steps 200 --metrics-every 10, then
# tandem-plot (through plot_check.sh: no stderr, one colour per run); the loss, lr and samples/s
# panels each receive the 20 step records as 20 points.
# Usage: plot_steps_check.sh TANDEM_TRAIN TANDEM_PLOT DIR
set -euo pipefail
train=$1 plot=$2 dir=$3
here=$(dirname "$0")
rm -f "$dir/steps.jsonl"
"$train" --max-steps 200 --metrics "$dir/steps.jsonl" --metrics-every 10 --no-eval --threads 1 --quiet >/dev/null
"$here/plot_check.sh" "$plot" "$dir/plot_steps.png" "$dir/steps.jsonl"
# The panels' datablocks: $p0 loss, $p1 test accuracy (none: no evaluation), $p2 lr, $p3 samples/s.
for block in p0s0 p2s0 p3s0; do
  points=$(awk -v b="\$$block << EOD" '$0 == b { on = 1; next } on && $0 == "EOD" { exit } on { n++ }
                                        END { print n + 0 }' "$dir/plot_steps.png.gp")
  [[ "$points" -eq 20 ]] ||
    { echo "plot_steps_check: \$$block has $points points, want 20 (one per step record)" >&2; exit 1; }
done
echo "plot_steps_check: 20 points per panel"
