#!/usr/bin/env bash
# One prepared GPU run: the `gpu` tests and the GPU benchmarks, results into one folder.
#
#   bench/gpu/device-check.sh OUTDIR          # or: OUT=/path bench/gpu/device-check.sh
#
# Exit: 0 every check passed; 1 something failed (see OUTDIR/summary.txt); 2 usage;
#       77 no GPU here (nothing was run).
#
# Preparing the carry (on the build machine, which has the Debian packages the GPU machine lacks):
#   bench/gpu/prepare-carry.sh     # builds with -DCMAKE_CUDA_ARCHITECTURES=90 (Release) and copies
#                                  # cuda_backend_test, kernel_test, cuda_bench and the shared
#                                  # libraries ldd names (not glibc, no libcudart: static) into
#                                  # build/gpu-carry/{bin,lib}; prints the size (must be < 64 MiB)
# then run this script on the GPU machine with build/gpu-carry carried along (GRAID_CARRY points
# elsewhere). The GPU machine has CUDA 13, cmake and ninja but no Debian packages and no network.
#
# Steps, each under its own timeout, capped so that the whole run ends within DEADLINE_S (450 s,
# GRAID_DEVICE_CHECK_DEADLINE_S) whatever happens:
#   1. GPU present? (nvidia-smi -L or /dev/nvidia0) else exit 77. nvidia-smi -q into the folder.
#   2. The carried binaries load? (LD_LIBRARY_PATH=carry/lib; --gtest_list_tests)  ~1 s
#      If not, again through the carried loader: carry/glibc/ld-linux-x86-64.so.2
#      --library-path carry/lib:carry/glibc (a GPU machine whose glibc is older)
#   3. kernel_test (host-run bodies + batcher on this CPU)                          <= 45 s
#   4. cuda_backend_test, gtest JSON; a skipped device test on a GPU machine is a failure <= 100 s
#   5. cuda_bench, Google Benchmark JSON + its summary table                       <= 130 s
#   5b. array_model_cuda_test (the engine model test on the cuda backend)            <= 45 s
#       graid-demo (the README's main job; must say "parity on the GPU" and pass)    <= 60 s
#       graid-bench RAID6 x6, --backend cpu, cuda, cuda --batcher, 2 profiles     <= 3 x 30 s
#       graid-bench --backend cuda, every profile, --verify after each            <= 60 s
#   6. Only if step 2 failed: build bench/gpu/fallback_check.cu with nvcc (the real kernel, no
#      other dependency) and run it: correctness of encode/reconstruct/verify and
#      kernel-vs-memcpy ratios as JSON lines                                        <= 90 s
# Results: OUTDIR/summary.txt (short, human), OUTDIR/summary.json, and each step's own output
# (*.log, *.json).
#
# Testing this script without a GPU: GRAID_DEVICE_CHECK_ASSUME_GPU=1 skips step 1's detection, so
# the rest runs and must end with the binaries' own "no CUDA device" skips (exit 77);
# GRAID_DEVICE_CHECK_FORCE_LOADER=1 also takes step 2's second way (the carried loader and glibc).
# The whole script runs on any machine against the fake CUDA runtime: CTest's
# device_check_dry_run_on_fake_cuda (tests/integration/device_check_dry_run.sh) carries the
# fake-runtime builds of the programs, with GRAID_DEVICE_CHECK_BENCH_ARGS (extra cuda_bench
# arguments), GRAID_CUDA_BENCH_MIB and GRAID_DEVICE_CHECK_MEMBER_SIZE making it small.
set -u

OUTDIR=${1:-${OUT:-}}
if [[ -z "$OUTDIR" ]]; then
  echo "usage: $0 OUTDIR   (or set OUT)" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=${GRAID_CARRY:-$ROOT/build/gpu-carry}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
START=$(date +%s)

say() { echo "[device-check] $*" | tee -a "$SUMMARY"; }
# JSON results, one "key": value per step, assembled at the end (no python or jq needed).
declare -a JSON=()
record() { JSON+=("\"$1\": $2"); }
finish() {
  local rc=$1
  record elapsed_s "$(( $(date +%s) - START ))"
  record exit_code "$rc"
  { echo "{"; local i; for ((i = 0; i < ${#JSON[@]}; i++)); do
      printf '  %s%s\n' "${JSON[$i]}" "$([[ $i -lt $((${#JSON[@]} - 1)) ]] && echo ,)"; done
    echo "}"; } >"$OUTDIR/summary.json"
  say "done in $(( $(date +%s) - START )) s, exit $rc; results in $OUTDIR"
  exit "$rc"
}
quote() { printf '"%s"' "$(echo "$1" | tr -d '"\\' | tr '\n' ' ')"; }
# The whole run must end within 8 minutes: every step's timeout is capped by what is left of
# DEADLINE_S (a step with under 5 s left gets 1 s and fails, recorded as a timeout).
DEADLINE_S=${GRAID_DEVICE_CHECK_DEADLINE_S:-450}
MEMBER_SIZE=${GRAID_DEVICE_CHECK_MEMBER_SIZE:-512M}  # graid-bench member files (tmpfs)
cap() {
  local want=$1 left=$((DEADLINE_S - ($(date +%s) - START)))
  ((left < 5)) && left=1
  echo $((want < left ? want : left))
}

# ---- 1. is there a GPU? ------------------------------------------------------------------------
gpu_line=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_line=$(timeout 30 nvidia-smi -L 2>/dev/null | head -1)
fi
if [[ -z "$gpu_line" && -e /dev/nvidia0 ]]; then gpu_line="/dev/nvidia0 present (no nvidia-smi)"; fi
if [[ -z "$gpu_line" ]]; then
  if [[ "${GRAID_DEVICE_CHECK_ASSUME_GPU:-0}" != 1 ]]; then
    say "no GPU: nvidia-smi lists no device and /dev/nvidia0 is absent; nothing was run"
    record gpu '"none"'
    finish 77
  fi
  gpu_line="(assumed by GRAID_DEVICE_CHECK_ASSUME_GPU=1)"
fi
say "GPU: $gpu_line"
record gpu "$(quote "$gpu_line")"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi -q >"$OUTDIR/nvidia-smi.txt" 2>&1 || true
fi
command -v nvcc >/dev/null 2>&1 || export PATH="$PATH:/usr/local/cuda/bin"

failed=0
skipped_on_gpu=0

# ---- 2. do the carried binaries load? ----------------------------------------------------------
# First with this machine's glibc; if they do not start (a glibc older than the build machine's),
# through the carried loader and glibc. RUN is the prefix every carried binary is started with.
HOST_LD_PATH=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH="$CARRY/lib${HOST_LD_PATH:+:$HOST_LD_PATH}"
RUN=()
carried_ok=1
for b in kernel_test cuda_backend_test cuda_bench; do
  if [[ ! -x "$CARRY/bin/$b" ]]; then
    say "carry: $CARRY/bin/$b missing (run bench/gpu/prepare-carry.sh on the build machine)"
    carried_ok=0
  fi
done
binaries_start() {
  timeout 30 ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/kernel_test" --gtest_list_tests \
    >>"$OUTDIR/loader.log" 2>&1 &&
    timeout 30 ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/cuda_backend_test" --gtest_list_tests \
      >>"$OUTDIR/loader.log" 2>&1
}
if ((carried_ok)); then
  : >"$OUTDIR/loader.log"
  if [[ "${GRAID_DEVICE_CHECK_FORCE_LOADER:-0}" == 1 ]] || ! binaries_start; then
    loader="$CARRY/glibc/ld-linux-x86-64.so.2"
    if [[ -x "$loader" ]]; then
      say "carry: binaries do not start with this machine's glibc; trying the carried loader"
      RUN=("$loader" --library-path "$CARRY/lib:$CARRY/glibc${HOST_LD_PATH:+:$HOST_LD_PATH}")
      binaries_start || carried_ok=0
    else
      carried_ok=0
    fi
    if ((carried_ok == 0)); then
      say "carry: binaries do not run here: $(tail -2 "$OUTDIR/loader.log" | tr '\n' ' ')"
    fi
  fi
fi
record carried_loader "$([[ ${#RUN[@]} -gt 0 ]] && echo '"carried glibc"' || echo '"host glibc"')"
record carried_binaries_run "$([[ $carried_ok == 1 ]] && echo true || echo false)"

# Runs a gtest binary; records passed/failed/skipped counts from its output.
run_gtest() {
  local name=$1 limit=$2
  shift 2
  timeout "$(cap "$limit")" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/$name" \
    --gtest_output="json:$OUTDIR/$name.json" "$@" \
    >"$OUTDIR/$name.log" 2>&1
  local rc=$?
  local passed skipped failed_n
  passed=$(grep -c '^\[       OK \]' "$OUTDIR/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$OUTDIR/$name.log")
  failed_n=$(grep -c '^\[  FAILED  \] .*(' "$OUTDIR/$name.log")
  record "$name" "{\"rc\": $rc, \"passed\": $passed, \"skipped\": $skipped, \"failed\": $failed_n}"
  say "$name: rc $rc, $passed passed, $skipped skipped, $failed_n failed"
  if ((rc == 124)); then say "$name: timed out after ${limit} s"; fi
  if ((rc != 0)); then failed=1; fi
  LAST_SKIPPED=$skipped
}

if ((carried_ok)); then
  # ---- 3. host-run bodies and batcher on this machine's CPU ------------------------------------
  run_gtest kernel_test 45
  # ---- 4. the gpu tests --------------------------------------------------------------------------
  run_gtest cuda_backend_test 100
  if ((LAST_SKIPPED > 0)); then
    reason=$(grep -m1 'GPU test skipped' "$OUTDIR/cuda_backend_test.log")
    say "cuda_backend_test: device tests skipped: ${reason:-see log}"
    skipped_on_gpu=1
  fi
  grep -h '^\[   INFO   \]\|^\[   NOTE   \]' "$OUTDIR/cuda_backend_test.log" | tee -a "$SUMMARY"
  # ---- 5. benchmarks -----------------------------------------------------------------------------
  if ((skipped_on_gpu == 0)); then
    # shellcheck disable=SC2086 # GRAID_DEVICE_CHECK_BENCH_ARGS is a list of words on purpose
    timeout "$(cap 130)" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/cuda_bench" \
      ${GRAID_DEVICE_CHECK_BENCH_ARGS:-} --benchmark_out="$OUTDIR/cuda_bench.json" \
      --benchmark_out_format=json >"$OUTDIR/cuda_bench.log" 2>&1
    rc=$?
    record cuda_bench "{\"rc\": $rc}"
    say "cuda_bench: rc $rc"
    sed -n '/== cuda_bench summary/,$p' "$OUTDIR/cuda_bench.log" | tee -a "$SUMMARY"
    if ((rc == 77)); then skipped_on_gpu=1; elif ((rc != 0)); then failed=1; fi
  fi
  # ---- 5b. the engine on the gpu: model test and graid-bench with --backend cuda ---------------
  if ((skipped_on_gpu == 0)) && [[ -x "$CARRY/bin/array_model_cuda_test" ]]; then
    run_gtest array_model_cuda_test 45
    # The README's main job on the GPU: the demo must pick the cuda backend and pass.
    if [[ -x "$CARRY/bin/graid-demo" ]]; then
      timeout "$(cap 60)" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/graid-demo" >"$OUTDIR/graid-demo.log" 2>&1
      rc=$?
      head -1 "$OUTDIR/graid-demo.log" | tee -a "$SUMMARY"
      tail -1 "$OUTDIR/graid-demo.log" | tee -a "$SUMMARY"
      on_gpu=$(head -1 "$OUTDIR/graid-demo.log" | grep -c 'parity on the GPU')
      record graid_demo "{\"rc\": $rc, \"on_gpu\": $on_gpu}"
      if ((rc != 0 || on_gpu != 1)); then failed=1; fi
    fi
    benchdir=$(mktemp -d /dev/shm/graid-bench-XXXXXX 2>/dev/null || mktemp -d)
    for variant in cpu cuda cuda-batcher; do
      args=(--backend "${variant%-batcher}")
      [[ $variant == *-batcher ]] && args+=(--batcher)
      timeout "$(cap 30)" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/graid-bench" --level 6 --members 6 \
        --strip 64K --dir "$benchdir" \
        --member-size "$MEMBER_SIZE" --profile 4k-randwrite,1m-seqwrite --qd 32 --threads 4 \
        --seconds 2 \
        "${args[@]}" --format json >"$OUTDIR/graid-bench-$variant.json" \
        2>"$OUTDIR/graid-bench-$variant.log"
      rc=$?
      record "graid_bench_${variant//-/_}" "{\"rc\": $rc}"
      say "graid-bench ${args[*]}: rc $rc"
      if ((rc != 0)); then failed=1; fi
    done
    # Every profile through the cuda backend, each followed by a write + read-back check.
    timeout "$(cap 60)" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/graid-bench" --level 6 --members 6 \
      --strip 64K --dir "$benchdir" \
      --member-size "$MEMBER_SIZE" --profile all --qd 32 --threads 4 --seconds 1 --rounds 1 \
      --backend cuda --verify --verify-bytes 32M >"$OUTDIR/graid-bench-cuda-all.txt" \
      2>"$OUTDIR/graid-bench-cuda-all.log"
    rc=$?
    record graid_bench_cuda_all_profiles "{\"rc\": $rc}"
    say "graid-bench --backend cuda --profile all --verify: rc $rc"
    tee -a "$SUMMARY" <"$OUTDIR/graid-bench-cuda-all.txt"
    if ((rc != 0)); then failed=1; fi
    rm -rf "$benchdir"
  fi
else
  # ---- 6. fallback: the kernel alone, built here -------------------------------------------------
  tmp=$(mktemp -d)
  say "fallback: building bench/gpu/fallback_check.cu with $(command -v nvcc || echo 'no nvcc')"
  if timeout "$(cap 60)" nvcc -std=c++17 -O3 -arch=sm_90 -I"$ROOT" "$ROOT/bench/gpu/fallback_check.cu" \
       -o "$tmp/fallback_check" >"$OUTDIR/fallback_build.log" 2>&1; then
    timeout "$(cap 30)" "$tmp/fallback_check" >"$OUTDIR/fallback_check.jsonl" 2>&1
    rc=$?
    record fallback_check "{\"rc\": $rc}"
    say "fallback_check: rc $rc"
    tee -a "$SUMMARY" <"$OUTDIR/fallback_check.jsonl"
    if ((rc == 77)); then skipped_on_gpu=1; elif ((rc != 0)); then failed=1; fi
  else
    say "fallback: nvcc build failed: $(tail -3 "$OUTDIR/fallback_build.log" | tr '\n' ' ')"
    record fallback_check '{"rc": "build failed"}'
    failed=1
  fi
  rm -rf "$tmp"
fi

if ((failed)); then finish 1; fi
if ((skipped_on_gpu)); then
  say "the device tests skipped although a GPU was detected: no GPU figure was measured"
  finish 77
fi
finish 0
