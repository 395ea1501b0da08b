#!/bin/sh
# rankns.sh COMMON DIR_0 DIR_1 ... -- PROGRAM [ARG...]
#
# Runs one rank of an Open MPI job as if it ran on its own node: in a mount
# namespace of its own, with DIR_r (r its rank in MPI_COMM_WORLD) bind-mounted
# at COMMON, so every rank opens the same paths and each reaches its own
# node's scrfs mount, as ranks on a real cluster reach their node's /scr.
# mpirun starts it in place of the rank program:
#
#   mpirun -np 4 rankns.sh /scr /mnt/node0 /mnt/node1 /mnt/node2 /mnt/node3 -- ./prog
#
# Only the mount namespace is new: the network namespace stays the host's,
# so the ranks reach each other (and mpirun) over loopback as before. The
# namespace is private (no propagation either way), so the bind mount is
# seen by this rank alone and goes when it exits. Needs root (unshare,
# mount); the rank keeps root's identity.
set -eu
rank=${OMPI_COMM_WORLD_RANK:?rankns.sh: not started by Open MPI mpirun (no OMPI_COMM_WORLD_RANK)}
common=$1
shift
dir=
i=0
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
	[ "$i" -eq "$rank" ] && dir=$1
	i=$((i + 1))
	shift
done
[ "$#" -gt 1 ] || { echo "rankns.sh: no -- PROGRAM" >&2; exit 2; }
shift
[ -n "$dir" ] || { echo "rankns.sh: rank $rank has no directory (given $i)" >&2; exit 2; }
# unshare execs the shell in the new namespace (same process, no fork), and
# the shell execs the program after the mount: the rank keeps the pid mpirun
# knows, so mpirun's signals and exit status are the program's own.
exec unshare --mount --propagation private -- \
	sh -c 'mount --bind -- "$1" "$2" && shift 2 && exec "$@"' rankns "$dir" "$common" "$@"
