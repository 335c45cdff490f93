#!/usr/bin/env bash
# sd's MPI transport against Open MPI's own collectives.
#
# In one run: sd_collectives_bench under mpirun on 2 and 4 ranks, one device
# per rank (mesh x: ici 1, dcn = ranks), for all_reduce, all_gather,
# reduce_scatter and all_to_all at 1, 4, 16, 64 and 256 MiB: sd's
# MpiTransport (through the program ABI) against MPI_Allreduce,
# MPI_Allgather, MPI_Reduce_scatter_block and MPI_Alltoall on the same
# buffers. Sizes as in nccl-tests (all_reduce's buffer, all_gather's output,
# reduce_scatter's input, all_to_all's send buffer). Each cell is the best of
# ROUNDS rounds that alternate between sd and Open MPI. Operands are small
# integers, so sd's results are checked bitwise against Open MPI's.
#
# Prints one markdown table of bus bandwidth (nccl-tests' definition:
# all_reduce busbw = algbw * 2(n-1)/n, the others algbw * (n-1)/n, algbw =
# size / time) with sd/Open MPI ratios, then the target with PASS/FAIL:
#   sd busbw >= 70% of Open MPI's at 64 MiB and above (every op, every n)
# Exits 1 if the target fails or a result differs from Open MPI's, 2 on a
# usage or setup error.
#
# Usage: bench/collectives.sh [--quick] [--out DIR]
#   --quick    2 ranks, 1 and 64 MiB, 1 round (a smoke test; the target is
#              still checked on what ran)
#   --out DIR  keep the raw logs there (default: a temp dir)
# Environment: BUILD (build dir, default build), COLLECTIVES_BENCH, MPIRUN
#   (default mpirun), RANKS (default "2 4"), SIZES_MIB (default
#   1,4,16,64,256), ROUNDS (default 3), MIN_TIME (seconds per round and
#   cell, default 0.2), TIMEOUT (seconds per mpirun, default 240).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD="${BUILD:-build}"
BENCH="${COLLECTIVES_BENCH:-$BUILD/bin/sd_collectives_bench}"
MPIRUN="${MPIRUN:-mpirun}"
RANKS="${RANKS:-2 4}"
SIZES_MIB="${SIZES_MIB:-1,4,16,64,256}"
ROUNDS="${ROUNDS:-3}"
MIN_TIME="${MIN_TIME:-0.2}"
TIMEOUT="${TIMEOUT:-240}"

die() { echo "collectives.sh: $*" >&2; exit 2; }

out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) RANKS=2; SIZES_MIB=1,64; ROUNDS=1 ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
for n in ROUNDS TIMEOUT; do
  [[ "${!n}" =~ ^[1-9][0-9]*$ ]] || die "$n must be a positive integer, not '${!n}'"
done
for n in $RANKS; do
  [[ "$n" =~ ^[1-9][0-9]*$ && "$n" -ge 2 ]] || die "RANKS must list integers >= 2, not '$n'"
done
[[ "$SIZES_MIB" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  die "SIZES_MIB must be a comma-separated list of MiB, not '$SIZES_MIB'"

# --- Preconditions, checked before anything slow runs ---------------------
[[ -x "$BENCH" ]] ||
  die "$BENCH not found: build it (scripts/build.sh sd_collectives_bench) or set COLLECTIVES_BENCH"
command -v "$MPIRUN" >/dev/null || die "$MPIRUN not found (apt install openmpi-bin)"
command -v timeout >/dev/null || die "timeout not found (coreutils)"
# The largest cell holds operand, result and staging of 256 MiB each per
# rank, a few times over on the largest world.
max_ranks=$(tr ' ' '\n' <<<"$RANKS" | sort -n | tail -1)
max_mib=$(tr ',' '\n' <<<"$SIZES_MIB" | sort -n | tail -1)
need_kib=$((max_ranks * max_mib * 4 * 1024))
avail_kib=$(awk '/MemAvailable/ { print $2 }' /proc/meminfo)
[[ "$avail_kib" -gt "$need_kib" ]] ||
  die "needs about $((need_kib / 1024)) MiB of memory for $max_ranks ranks x $max_mib MiB, $((avail_kib / 1024)) MiB available (lower SIZES_MIB or RANKS)"

if [[ -z "$out" ]]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

# Loopback between the ranks of this machine: shared memory (vader) and TCP.
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader,tcp}"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"

failed=0
for n in $RANKS; do
  log="$out/np$n.log"
  if ! timeout "$TIMEOUT" "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" \
      "$BENCH" --sizes-mib="$SIZES_MIB" --rounds="$ROUNDS" --min-time="$MIN_TIME" \
      >"$log" 2>&1; then
    grep -q MISMATCH "$log" || { cat "$log" >&2; die "the bench on $n ranks failed (log above)"; }
    failed=1
  fi
done

cat "$out"/np*.log | grep '^RESULT' | awk -v target=0.70 '
  function field(name,   i, kv) {
    for (i = 2; i <= NF; ++i) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
    return ""
  }
  BEGIN {
    print "| op | ranks | size | sd busbw (GB/s) | Open MPI busbw (GB/s) | sd / Open MPI | check |"
    print "|---|---:|---:|---:|---:|---:|---|"
    fails = 0; checked = 0
  }
  {
    op = field("op"); n = field("ranks"); bytes = field("bytes")
    sd = field("sd_s"); mpi = field("mpi_s"); check = field("check")
    factor = (op == "all_reduce") ? 2 * (n - 1) / n : (n - 1) / n
    sdbw = bytes / sd * factor / 1e9; mpibw = bytes / mpi * factor / 1e9
    ratio = sdbw / mpibw
    mib = bytes / 1048576
    size = (mib >= 1) ? sprintf("%d MiB", mib + 0.5) : sprintf("%d B", bytes)
    printf "| %s | %d | %s | %.2f | %.2f | %.0f%% | %s |\n", op, n, size, sdbw, mpibw, 100 * ratio, check
    if (check != "ok") fails++
    if (bytes >= 64 * 1048576) {
      checked++
      if (ratio < target) { fails++; bad = bad sprintf(" %s/%d/%s", op, n, size) }
    }
  }
  END {
    print ""
    if (checked == 0)
      print "- sd busbw >= 70% of Open MPI at 64 MiB and above: not measured"
    else if (bad == "")
      printf "- sd busbw >= 70%% of Open MPI at 64 MiB and above (%d cells): PASS\n", checked
    else
      printf "- sd busbw >= 70%% of Open MPI at 64 MiB and above (%d cells): FAIL:%s\n", checked, bad
    exit (fails > 0 ? 1 : 0)
  }' || failed=1

exit "$failed"
