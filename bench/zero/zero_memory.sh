#!/usr/bin/env bash
# ZeRO's per-rank memory (docs/zero.md): tandem-train's done record (param_bytes, grad_bytes,
# optimizer_state_bytes of rank 0 after the last step; peak_tensor_mb) for stages 0, 1, 2 at 1, 2
# and 4 ranks, as a markdown table. CPU, a few steps; --mode ddp at every size (ZeRO needs DDP).
# Usage: zero_memory.sh TANDEM_TRAIN "MODEL FLAGS" [RANKS...]   (env MPIEXEC, default mpirun)
set -euo pipefail
tt=$1 flags=$2; shift 2
ranks=("${@:-1 2 4}")
mpi=${MPIEXEC:-mpirun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| ranks | stage | param MB | grad MB | optimizer state MB | peak tensor MB |"
echo "|---|---|---|---|---|---|"
for n in ${ranks[*]}; do
  for z in 0 1 2; do
    # shellcheck disable=SC2086
    "$mpi" -np "$n" --oversubscribe --bind-to none "$tt" $flags --mode ddp --zero "$z" --no-eval --threads 1 \
      --metrics "$work/m.jsonl" >/dev/null
    python3 - "$work/m.jsonl" "$n" "$z" <<'PY'
import json, sys
done = [json.loads(l) for l in open(sys.argv[1]) if '"event":"done"' in l][-1]
mb = lambda b: f"{b / 1e6:.2f}"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {mb(done['param_bytes'])} | {mb(done['grad_bytes'])} | "
      f"{mb(done['optimizer_state_bytes'])} | {done['peak_tensor_mb']:.1f} |")
PY
  done
done
