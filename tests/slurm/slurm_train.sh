#!/usr/bin/env bash
# tandem-train under a real Slurm (scripts/slurm-local's cluster; SLURM_CONF names it):
#   slurm_train.sh srun   TANDEM_TRAIN WORK   srun -n 2 --mpi=pmix: each rank reads its rank, local
#                                             rank and node from SLURM_PROCID/SLURM_LOCALID/SLURM_NODEID
#                                             and Open MPI's MPI_Init meets the others through PMIx
#   slurm_train.sh sbatch TANDEM_TRAIN WORK   a batch job of 2 tasks running mpirun inside its allocation
# Exits 77 (skipped) when no cluster answers (the fixture skipped: no Slurm packages).
set -euo pipefail
mode=$1 tt=$2 work=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
if [[ -z ${SLURM_CONF:-} || ! -f $SLURM_CONF ]] || ! sinfo -h >/dev/null 2>&1; then
  echo "SKIP: no Slurm test cluster answers (SLURM_CONF=${SLURM_CONF:-unset}; scripts/slurm-local start DIR)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$work/out"; exit 1; }
train=("$tt" --model mlp --max-steps 10 --no-eval --threads 1 --batch-size 32)
case "$mode" in
  srun)
    # What each task is told: rank, local rank and node, all distinct ranks on node 0.
    srun -n 2 --mpi=pmix sh -c 'echo "task $SLURM_PROCID local $SLURM_LOCALID node $SLURM_NODEID of $SLURM_STEP_NUM_TASKS"' \
      | sort >"$work/tasks"
    cat "$work/tasks"
    diff <(printf 'task 0 local 0 node 0 of 2\ntask 1 local 1 node 0 of 2\n') "$work/tasks" || { cp "$work/tasks" "$work/out"; fail "srun's task variables"; }
    timeout 300 srun -n 2 --mpi=pmix --kill-on-bad-exit=1 "${train[@]}" >"$work/out" 2>&1 || fail "srun exited with $?"
    grep -q "launched with 2 ranks by srun" "$work/out" || fail "tandem-train did not take its ranks from srun's variables"
    ;;
  sbatch)
    printf '#!/bin/sh\nexec mpirun --oversubscribe --bind-to none "$@"\n' >"$work/batch.sh"
    id=$(sbatch --parsable --ntasks=2 --output="$work/out" --chdir="$work" "$work/batch.sh" "${train[@]}") \
      || fail "sbatch exited with $?"
    # (sbatch --wait polls at growing intervals, 10 s here: asked every 0.25 s instead.)
    for ((i = 0; i < 1200; i++)); do
      state=$(scontrol -o show job "$id" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
      [[ $state == PENDING || $state == RUNNING || $state == CONFIGURING || $state == COMPLETING ]] || break
      sleep 0.25
    done
    [[ $state == COMPLETED ]] || fail "batch job $id ended $state"
    grep -q "launched with 2 ranks by Open MPI" "$work/out" || fail "tandem-train did not see mpirun's 2 ranks"
    ;;
  *) echo "usage: slurm_train.sh srun|sbatch TANDEM_TRAIN WORK" >&2; exit 2 ;;
esac
grep -q "world size 2" "$work/out" || fail "no 'world size 2' in tandem-train's last line"
grep "done:" "$work/out"
echo "PASS: tandem-train under $mode"
