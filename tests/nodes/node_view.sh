#!/usr/bin/env bash
# A node's own view of the filesystem, for the test nodes (scripts/nodes): on the hosts listed in
# HIDE_HOSTS (e.g. "node1"), runs the command in a private mount namespace with an empty tmpfs over
# HIDE_DIR, as a node that does not share that folder; elsewhere runs it as it is. The ranks get
# HIDE_DIR and HIDE_HOSTS from mpirun's environment (the nodes' rsh agent runs on this machine).
# Usage: HIDE_DIR=D HIDE_HOSTS="node1" scripts/nodes run 2x1 node_view.sh CMD...
host=$(hostname)
for h in $HIDE_HOSTS; do
  if [[ $h == "$host" ]]; then
    exec unshare -m bash -c 'mount -t tmpfs hidden "$HIDE_DIR" && exec "$@"' node_view "$@"
  fi
done
exec "$@"
