#!/usr/bin/env bash
# ZeRO's step time against stage 0 (docs/zero.md): tandem-train at --zero 0, 1, 2 on the same ranks,
# interleaved (0 1 2 0 1 2 ...) so that a machine shared with other work slows all alike. A run's
# figures are its fastest step (on a shared machine the least disturbed one) and its median step (the
# step records' samples_per_s after the first step); per stage, the median over the rounds of each,
# and the step time over stage 0's: of the medians, and the median of each round's ratio (a round's
# runs are close in time, so that ratio suffers less from the machine's load changing).
# Usage: zero_step_time.sh TANDEM_TRAIN "MODEL FLAGS" [RANKS] [ROUNDS]   (env MPIEXEC, default mpirun)
set -euo pipefail
tt=$1 flags=$2 n=${3:-2} rounds=${4:-3}
mpi=${MPIEXEC:-mpirun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for r in $(seq "$rounds"); do
  for z in 0 1 2; do
    # shellcheck disable=SC2086
    "$mpi" -np "$n" --oversubscribe --bind-to none "$tt" $flags --mode ddp --zero "$z" --no-eval \
      --metrics "$work/r$r-z$z.jsonl" --metrics-every 1 >/dev/null
  done
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def rates(r, z):  # the run's steps after the first: (fastest, median) samples/s
    steps = [json.loads(l)["samples_per_s"] for l in open(f"{work}/r{r}-z{z}.jsonl") if '"event":"step"' in l][1:]
    return max(steps), statistics.median(steps)
runs = {z: [rates(r, z) for r in range(1, rounds + 1)] for z in range(3)}
for k, what in ((0, "fastest step"), (1, "median step")):
    base = statistics.median(v[k] for v in runs[0])
    for z in range(3):
        med = statistics.median(v[k] for v in runs[z])
        paired = statistics.median(runs[0][r][k] / runs[z][r][k] for r in range(rounds))
        print(f"{what}: zero {z}: samples/s {', '.join(f'{v[k]:.0f}' for v in runs[z])}; median {med:.0f}; "
              f"step time / stage 0's {base / med:.3f} (median of the rounds' ratios {paired:.3f})")
PY
