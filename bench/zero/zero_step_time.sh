#!/usr/bin/env bash
# ZeRO's step time against stage 0 (docs/zero.md): tandem-train at --zero 0, 1, 2 on the same ranks,
# interleaved (0 1 2 0 1 2 ...) so that a machine shared with other work slows all alike. A run's
# figure is its fastest step (the step records' samples_per_s after the first step: on a shared
# machine the least disturbed one); per stage, the median over the rounds, and stage 0's over it.
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
def rate(r, z):
    steps = [json.loads(l) for l in open(f"{work}/r{r}-z{z}.jsonl") if '"event":"step"' in l]
    return max(s["samples_per_s"] for s in steps if s["step"] > 1)
rates = {z: [rate(r, z) for r in range(1, rounds + 1)] for z in range(3)}
for z in range(3):
    med = statistics.median(rates[z])
    print(f"zero {z}: samples/s {', '.join(f'{v:.0f}' for v in rates[z])}; median {med:.0f}; "
          f"step time / stage 0's {statistics.median(rates[0]) / med:.3f}")
PY
