#!/usr/bin/env bash
# mpiexec's "-np N ARGS..." on the test nodes: scripts/nodes run NODESx(N/NODES) ARGS... (NODES from
# the environment, default 2), for drivers written against an mpiexec (tests/faults/rank_fault.sh).
set -euo pipefail
[[ ${1:-} == -np ]] || { echo "usage: nodes_mpiexec.sh -np N ARGS..." >&2; exit 2; }
np=$2
shift 2
nodes=${NODES:-2}
((np % nodes == 0)) || { echo "nodes_mpiexec.sh: $np ranks do not split evenly over $nodes nodes" >&2; exit 2; }
exec "$(dirname "$0")/../../scripts/nodes" run "${nodes}x$((np / nodes))" "$@"
