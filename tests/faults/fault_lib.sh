# Shared pieces of the fault-injection drivers (sourced): timing from the fault's own stderr line,
# the param_hash of a run's metrics, and the tandem-train flags every driver uses.
now_ms() { date +%s%3N; }
# The wall-clock ms printed by runtime/fault.cpp ("tandem fault: ... at <ms>") in file $1.
fault_ms() { sed -n 's/.*tandem fault: .* at \([0-9]*\)$/\1/p' "$1" | head -1; }
# The param_hash of the "done" record of metrics file $1.
done_hash() { grep '"event":"done"' "$1" | sed 's/.*"param_hash":"\([0-9a-f]*\)".*/\1/'; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# A short mlp run: 12 steps of 32 samples, no evaluation, one thread.
TT_FLAGS=(--model mlp --batch-size 32 --no-eval --threads 1 --epochs 1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
