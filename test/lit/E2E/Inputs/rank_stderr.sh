#!/bin/sh
# Runs a command as one rank of an mpirun job with its standard error in
# DIR/rankN.err (N: the rank), written by the rank itself. A test that
# checks what every rank printed before the job ended reads those files:
# mpirun forwards the ranks' output, and may not forward all of it once a
# rank's non-zero exit has it end the job.
#
# Usage: rank_stderr.sh DIR COMMAND [ARGS...]
dir="$1"
shift
exec "$@" 2>"$dir/rank${OMPI_COMM_WORLD_RANK:?rank_stderr.sh runs under mpirun}.err"
