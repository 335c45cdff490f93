#!/usr/bin/env bash
# sd's bf16 GEMM against this machine's f32 sgemm ceiling.
#
# Builds sd_gemm_bf16_bench (scripts/build.sh; --no-build skips it), then in
# one run: the CPU's bf16 flags from /proc/cpuinfo (avx512_bf16, amx_bf16,
# amx_tile); which implementation oneDNN runs for gemmBF16 (one call of
# each C type under DNNL_VERBOSE=1, e.g. brg:avx512_core_bf16, and the ISA
# oneDNN detected); the accuracy check (gemmBF16 against oneDNN's sgemm on
# the widened operands, within the round-off bound of f32 accumulation);
# then square GEMM at n = N on THREADS threads, four ways on the same
# operands: OpenBLAS's and oneDNN's sgemm and kernels::gemmBF16 with an f32
# C and with a bf16 C (sd_gemm_bf16_bench --table: each cell the best of
# REPS calls, the implementations taking turns). The timings run ROUNDS
# times in each of two environments, alternating: the environment's
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE as they are, and both unset in the
# benchmark command alone (OpenBLAS 0.3.21 then picks its kernels from the
# CPU: on an AMD EPYC with OPENBLAS_CORETYPE=Haswell it runs AVX2 kernels,
# unset its faster Cooperlake ones); a cell is the best of its rounds.
# Prints one Markdown table of GFLOP/s (2n³ / time) with each
# implementation's ratio to the faster f32 sgemm of the same environment,
# then bf16 against the best f32 sgemm of either environment.
# Exits 1 if the accuracy check fails, 2 on a usage or setup error.
#
# Usage: bench/bf16_gemm.sh [--quick] [--no-build] [--out DIR]
#   --quick     N 512, REPS 3, ROUNDS 1 (a smoke test)
#   --no-build  use the binary as it is
#   --out DIR   keep the raw logs there (default: a temp dir)
# Environment: SD_BUILD_DIR (build dir, default build; scripts/build.sh
#   builds there, with SD_JOBS jobs), GEMM_BF16_BENCH (the binary, default
#   $SD_BUILD_DIR/bin/sd_gemm_bf16_bench), THREADS (default 2), N (default
#   2048), REPS (default 10), ROUNDS (default 2).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

export SD_BUILD_DIR="${SD_BUILD_DIR:-$ROOT/build}"
BENCH="${GEMM_BF16_BENCH:-$SD_BUILD_DIR/bin/sd_gemm_bf16_bench}"
THREADS="${THREADS:-2}"
N="${N:-2048}"
REPS="${REPS:-10}"
ROUNDS="${ROUNDS:-2}"

die() { echo "bf16_gemm.sh: $*" >&2; exit 2; }

build=1
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) N=512; REPS=3; ROUNDS=1 ;;
    --no-build) build=0 ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
for n in THREADS N REPS ROUNDS; do
  [[ "${!n}" =~ ^[1-9][0-9]*$ ]] || die "$n must be a positive integer, not '${!n}'"
done

if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-bf16-gemm.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs: $out" >&2

if [[ $build -eq 1 ]]; then
  echo "building sd_gemm_bf16_bench in $SD_BUILD_DIR (log: $out/build.log)" >&2
  scripts/build.sh sd_gemm_bf16_bench >"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log" >&2; die "scripts/build.sh sd_gemm_bf16_bench failed"; }
fi
[[ -x "$BENCH" ]] ||
  die "$BENCH not found: build it (scripts/build.sh sd_gemm_bf16_bench) or set GEMM_BF16_BENCH"

# run NAME CMD...: runs CMD with its output in $out/NAME.log; on failure
# shows the log's tail and stops.
run() {
  local name="$1"; shift
  echo "running $name: $*" >&2
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "bf16_gemm.sh: $name failed; last lines of $out/$name.log:" >&2
    tail -n 30 "$out/$name.log" >&2
    exit 2
  fi
}

cpu_model="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
flags="$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2-)"
has() { [[ " $flags " == *" $1 "* ]] && echo yes || echo no; }

# --- Which kernels oneDNN runs, and the accuracy check ----------------------
run isa env OMP_NUM_THREADS="$THREADS" DNNL_VERBOSE=1 "$BENCH" --table \
  --n="$N" --reps=1 --impls=bf16_f32c,bf16_bf16c
dnnl_isa="$(grep -m1 -E '^(onednn|dnnl)_verbose,info,cpu,isa:' "$out/isa.log" | cut -d: -f2- || true)"
# Exec lines: onednn_verbose,exec,cpu,matmul,IMPL,undef,SRC WEI DST,...
matmul_impls="$(awk -F, '$2 == "exec" && $4 == "matmul" {
    n = split($7, md, " "); dst = md[n]; sub(/^dst_/, "", dst); sub(/:.*/, "", dst)
    if (!((key = $5 " (" dst " C)") in seen)) { seen[key] = 1; list = list sep key; sep = ", " }
  }
  END { print list }' "$out/isa.log")"
echo "running check: $BENCH --check --n=$N" >&2
check_ok=1
env OMP_NUM_THREADS="$THREADS" "$BENCH" --check --n="$N" >"$out/check.log" 2>&1 || check_ok=0
check_line="$(grep -m1 '^check ' "$out/check.log" || echo "no check line (see $out/check.log)")"

# --- Timings: the environment's OPENBLAS_* as they are, then both unset -----
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; ++r)); do
  run "env_$r" env OMP_NUM_THREADS="$THREADS" "$BENCH" --table --n="$N" --reps="$REPS"
  run "unset_$r" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
    OMP_NUM_THREADS="$THREADS" "$BENCH" --table --n="$N" --reps="$REPS"
done
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- Table ------------------------------------------------------------------
echo "bf16 GEMM against f32 sgemm, n = $N, $THREADS threads, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- CPU: $cpu_model; $(nproc) cores; avx512_bf16: $(has avx512_bf16), amx_bf16: $(has amx_bf16), amx_tile: $(has amx_tile)"
echo "- oneDNN's ISA: ${dnnl_isa:-(not reported)}"
echo "- oneDNN's matmul for gemmBF16: ${matmul_impls:-none ran (oneDNN refused: the sgemm fallback)}"
echo "- accuracy: $check_line (1 = the round-off bound of f32 accumulation)"
echo "- load average (1, 5, 15 min): $load_start at start, $load_end at end"
echo "- a cell: the best of $((ROUNDS * REPS)) calls ($ROUNDS x $REPS)"
echo
grep -H '^gemm ' "$out"/env_*.log "$out"/unset_*.log | awk \
  -v coretype="${OPENBLAS_CORETYPE-(unset)}" -v l2="${OPENBLAS_L2_SIZE-(unset)}" '
  # "DIR/env_1.log:gemm impl=bf16_f32c n=2048 threads=2 gflops=612.3 ..."
  function field(name,   i, kv) {
    for (i = 2; i <= NF; ++i) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
    return ""
  }
  function max(a, b) { return a > b ? a : b }
  {
    key = ($1 ~ /\/unset_[0-9]+\.log:gemm$/) ? "unset" : "env"
    impl = field("impl"); n = field("n")
    best[key, impl] = max(best[key, impl], field("gflops") + 0)
  }
  END {
    split("sgemm_openblas sgemm_onednn bf16_f32c bf16_bf16c", impls, " ")
    names["sgemm_openblas"] = "OpenBLAS sgemm (f32)"
    names["sgemm_onednn"] = "oneDNN sgemm (f32)"
    names["bf16_f32c"] = "sd gemmBF16, f32 C"
    names["bf16_bf16c"] = "sd gemmBF16, bf16 C"
    f32["env"] = max(best["env", "sgemm_openblas"], best["env", "sgemm_onednn"])
    f32["unset"] = max(best["unset", "sgemm_openblas"], best["unset", "sgemm_onednn"])
    top = max(f32["env"], f32["unset"])
    printf "| n = %s | GFLOP/s, OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s | / best f32 | GFLOP/s, both unset | / best f32 |\n", \
      n, coretype, l2
    print "|---|---:|---:|---:|---:|"
    for (i = 1; i <= 4; ++i) {
      im = impls[i]
      printf "| %s | %.1f | %.2fx | %.1f | %.2fx |\n", names[im], \
        best["env", im], best["env", im] / f32["env"], \
        best["unset", im], best["unset", im] / f32["unset"]
    }
    print ""
    printf "bf16 / the best f32 sgemm of either environment (%.1f GFLOP/s): f32 C %.2fx, bf16 C %.2fx\n", top, \
      max(best["env", "bf16_f32c"], best["unset", "bf16_f32c"]) / top, \
      max(best["env", "bf16_bf16c"], best["unset", "bf16_bf16c"]) / top
  }'

[[ $check_ok -eq 1 ]] || { echo "bf16_gemm.sh: the accuracy check failed: $check_line" >&2; exit 1; }
