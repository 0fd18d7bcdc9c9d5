#!/usr/bin/env bash
# mpirun wrapper: on the ranks listed in HIDE_RANKS (e.g. "1 2 3"), runs the command in a private
# mount namespace with an empty tmpfs over HIDE_DIR, as a node that does not share that filesystem.
# Usage: HIDE_DIR=D HIDE_RANKS="1" mpirun ... hide_dir.sh CMD...
# The ranks inherit HIDE_DIR and HIDE_RANKS from the launcher on one host (no -x: Open MPI's flag, which
# MPICH's Hydra refuses; it passes the whole environment anyway). Open MPI's rank, else PMI's (Hydra).
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
for r in $HIDE_RANKS; do
  if [[ $r == "$rank" ]]; then
    exec unshare -m bash -c 'mount -t tmpfs hidden "$HIDE_DIR" && exec "$@"' hide_dir "$@"
  fi
done
exec "$@"
