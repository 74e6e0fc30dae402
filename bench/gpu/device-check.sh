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
# Steps, each under its own timeout (the CAP_* values below; their sum, the worst case, is
# printed first and must stay under 5 minutes so that a rerun fits a 15-minute device window with
# start-up), and capped again so that the whole run ends within DEADLINE_S (280 s,
# GRAID_DEVICE_CHECK_DEADLINE_S) whatever happens:
#   1. GPU present? (nvidia-smi -L or /dev/nvidia0) else exit 77. nvidia-smi -q into the folder.
#   2. The carried binaries load? (LD_LIBRARY_PATH=carry/lib; --gtest_list_tests)  ~1 s
#      If not, again through the carried loader: carry/glibc/ld-linux-x86-64.so.2
#      --library-path carry/lib:carry/glibc (a GPU machine whose glibc is older)
#   3. kernel_test (host-run bodies + batcher on this CPU)
#   4. cuda_backend_test, gtest JSON; a skipped device test on a GPU machine is a failure
#   5. cuda_bench, Google Benchmark JSON + its summary table
#   5b. array_model_cuda_test (the engine model test on the cuda backend)
#       graid-demo (the README's main job; must say "parity on the GPU" and pass)
#       graid-bench suite --quick --level raid6 --backend cpu --backend cuda (the benchmark
#       report's rows: OUTDIR/suite/suite.json), then graid-bench RAID6 x6 --backend cuda
#       --batcher, 2 profiles (members in /dev/shm when it has room for them, else on disk)
#       graid-bench --backend cuda, every profile, --verify after each
#   6. Only if step 2 failed: build bench/gpu/fallback_check.cu with nvcc (the real kernel, no
#      other dependency; needs a host C++ compiler: CUDAHOSTCXX, else g++/c++/clang++, and skips
#      with that reason when there is none) and run it, both with this machine's own library path
#      (not the carry's): correctness of encode/reconstruct/verify and kernel-vs-copy ratios as
#      JSON lines
# Results: OUTDIR/summary.txt (short, human), OUTDIR/summary.json, and each step's own output
# (*.log, *.json).
#
# Testing this script without a GPU: GRAID_DEVICE_CHECK_ASSUME_GPU=1 skips step 1's detection, so
# the rest runs and must end with the binaries' own "no CUDA device" skips (exit 77);
# GRAID_DEVICE_CHECK_FORCE_LOADER=1 also takes step 2's second way (the carried loader and glibc).
# The whole script runs on any machine against the fake CUDA runtime: CTest's
# device_check_dry_run_on_fake_cuda (tests/integration/device_check_dry_run.sh) carries the
# fake-runtime builds of the programs, with GRAID_DEVICE_CHECK_BENCH_ARGS (extra cuda_bench
# arguments), GRAID_CUDA_BENCH_MIB, GRAID_DEVICE_CHECK_MEMBER_SIZE and
# GRAID_DEVICE_CHECK_BENCH_SECONDS (graid-bench's --seconds) making it small.
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
# Each step's own limit, in seconds. What they are sized for (an H200 machine with 16 cores):
# kernel_test takes ~10 s on one core; cuda_backend_test ~10 s; cuda_bench ~45-60 s (45 kernel
# cases at ~0.3 s, 27 end-to-end/single/latency cases at their MinTime, three 320 MiB pools
# filled and registered); each graid-bench run below is sized to under half its cap (printed).
CAP_SMI=5             # nvidia-smi -L, and again for nvidia-smi -q
CAP_LOADER=5          # one --gtest_list_tests; up to 4 (2 binaries, host then carried loader)
CAP_KERNEL_TEST=25
CAP_BACKEND_TEST=40
CAP_CUDA_BENCH=80
CAP_MODEL_TEST=25
CAP_DEMO=15
CAP_BENCH_VARIANT=15  # the graid-bench --batcher run
CAP_SUITE=30          # graid-bench suite: RAID6 on cpu and cuda, every state (the report's rows)
CAP_BENCH_ALL=30
CAP_FALLBACK_BUILD=60 # only when the carried binaries do not run (then 3..5b do not)
CAP_FALLBACK_RUN=30
CAPS_MAIN=$((2 * CAP_SMI + 4 * CAP_LOADER + CAP_KERNEL_TEST + CAP_BACKEND_TEST + CAP_CUDA_BENCH +
  CAP_MODEL_TEST + CAP_DEMO + CAP_BENCH_VARIANT + CAP_SUITE + CAP_BENCH_ALL))
CAPS_FALLBACK=$((2 * CAP_SMI + 4 * CAP_LOADER + CAP_FALLBACK_BUILD + CAP_FALLBACK_RUN))
CAPS_SUM=$((CAPS_MAIN > CAPS_FALLBACK ? CAPS_MAIN : CAPS_FALLBACK))
# The whole run must end within 5 minutes: every step's timeout is also capped by what is left of
# DEADLINE_S (a step with under 5 s left gets 1 s and fails, recorded as a timeout).
DEADLINE_S=${GRAID_DEVICE_CHECK_DEADLINE_S:-280}
# graid-bench member files: 6 of them, in /dev/shm when it has room (see bench_dir).
MEMBER_SIZE=${GRAID_DEVICE_CHECK_MEMBER_SIZE:-256M}
BENCH_MEMBERS=6
# GRAID_DEVICE_CHECK_CAP_SCALE=N multiplies the step caps (not their recorded sum): for the dry
# run on the fake CUDA runtime, whose "device" emulates every kernel on one host core.
CAP_SCALE=${GRAID_DEVICE_CHECK_CAP_SCALE:-1}
cap() {
  local want=$(($1 * CAP_SCALE)) left=$((DEADLINE_S - ($(date +%s) - START)))
  ((left < 5)) && left=1
  echo $((want < left ? want : left))
}

say "worst case (sum of step caps): ${CAPS_SUM} s; deadline ${DEADLINE_S} s"
record caps_sum_s "$CAPS_SUM"
record deadline_s "$DEADLINE_S"

# Bytes in a size such as 256M, 1G, 4096K or 65536.
to_bytes() {
  local v=$1 n=${1%[KkMmGg]}
  case "$v" in
    *[Kk]) echo $((n << 10)) ;;
    *[Mm]) echo $((n << 20)) ;;
    *[Gg]) echo $((n << 30)) ;;
    *) echo "$v" ;;
  esac
}
# A fresh folder for graid-bench's members: /dev/shm (GRAID_DEVICE_CHECK_SHM) when its free space
# holds them with 10 % to spare (containers often give /dev/shm only 64 MiB), else a folder on
# disk (TMPDIR, else /var/tmp) with the same check. Prints the folder, or nothing when neither
# has room.
bench_dir() {
  local need_kib=$(($(to_bytes "$MEMBER_SIZE") * BENCH_MEMBERS / 1024 * 11 / 10)) where free
  for where in "${GRAID_DEVICE_CHECK_SHM:-/dev/shm}" "${TMPDIR:-/var/tmp}"; do
    [[ -d "$where" && -w "$where" ]] || continue
    free=$(df -Pk "$where" 2>/dev/null | awk 'NR == 2 {print $4}')
    if [[ -n "$free" ]] && ((free >= need_kib)); then
      mktemp -d "$where/graid-bench-XXXXXX" && return 0
    fi
    echo "[device-check] $where: $((${free:-0} / 1024)) MiB free, members need $((need_kib / 1024)) MiB" >&2
  done
  return 1
}
# graid-bench's own run time with these arguments: per profile, rounds x (raw + array phase) x
# (warm-up + seconds / rounds), plus, without --raw-qd (sweep 1), the raw queue-depth sweep's four
# probes of min(warm-up, 0.1) + min(seconds / rounds / 4, 0.5) s; set-up and --verify come on top
# (hence a cap of twice this).
bench_estimate() {
  local profiles=$1 seconds=$2 rounds=$3 warmup=$4 sweep=$5
  awk -v p="$profiles" -v s="$seconds" -v r="$rounds" -v w="$warmup" -v sw="$sweep" \
    'BEGIN { pw = w < 0.1 ? w : 0.1; ps = s / r / 4; if (ps > 0.5) ps = 0.5;
             printf "%.1f", p * (r * 2 * (w + s / r) + sw * 4 * (pw + ps)) }'
}

# ---- 1. is there a GPU? ------------------------------------------------------------------------
gpu_line=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_line=$(timeout "$CAP_SMI" nvidia-smi -L 2>/dev/null | head -1)
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
  timeout "$CAP_SMI" nvidia-smi -q >"$OUTDIR/nvidia-smi.txt" 2>&1 || true
fi
command -v nvcc >/dev/null 2>&1 || export PATH="$PATH:/usr/local/cuda/bin"

failed=0
skipped_on_gpu=0

# ---- 2. do the carried binaries load? ----------------------------------------------------------
# First with this machine's glibc; if they do not start (a glibc older than the build machine's),
# through the carried loader and glibc. RUN is the prefix every carried binary is started with.
HOST_LD_PATH=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH="$CARRY/lib${HOST_LD_PATH:+:$HOST_LD_PATH}"
# The prefix for commands that must run with this machine's own library path: the carry's
# libraries (Debian's libstdc++ and libgcc_s) must not reach the host's nvcc, cudafe++, ptxas or
# what they build, on a machine whose older glibc is why the fallback runs at all.
if [[ -n "$HOST_LD_PATH" ]]; then
  HOST_ENV=(env LD_LIBRARY_PATH="$HOST_LD_PATH")
else
  HOST_ENV=(env -u LD_LIBRARY_PATH)
fi
RUN=()
carried_ok=1
for b in kernel_test cuda_backend_test cuda_bench; do
  if [[ ! -x "$CARRY/bin/$b" ]]; then
    say "carry: $CARRY/bin/$b missing (run bench/gpu/prepare-carry.sh on the build machine)"
    carried_ok=0
  fi
done
binaries_start() {
  timeout "$CAP_LOADER" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/kernel_test" --gtest_list_tests \
    >>"$OUTDIR/loader.log" 2>&1 &&
    timeout "$CAP_LOADER" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/cuda_backend_test" --gtest_list_tests \
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

# Runs a gtest binary; records passed/failed/skipped counts and its seconds from its output.
run_gtest() {
  local name=$1 limit=$2 t0
  shift 2
  t0=$(date +%s)
  timeout "$(cap "$limit")" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/$name" \
    --gtest_output="json:$OUTDIR/$name.json" "$@" \
    >"$OUTDIR/$name.log" 2>&1
  local rc=$?
  local passed skipped failed_n
  passed=$(grep -c '^\[       OK \]' "$OUTDIR/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$OUTDIR/$name.log")
  failed_n=$(grep -c '^\[  FAILED  \] .*(' "$OUTDIR/$name.log")
  record "$name" "{\"rc\": $rc, \"passed\": $passed, \"skipped\": $skipped, \"failed\": $failed_n, \"s\": $(($(date +%s) - t0))}"
  say "$name: rc $rc, $passed passed, $skipped skipped, $failed_n failed, $(($(date +%s) - t0)) s"
  if ((rc == 124)); then say "$name: timed out after ${limit} s"; fi
  if ((rc != 0)); then failed=1; fi
  LAST_SKIPPED=$skipped
}

if ((carried_ok)); then
  # ---- 3. host-run bodies and batcher on this machine's CPU ------------------------------------
  run_gtest kernel_test "$CAP_KERNEL_TEST"
  # ---- 4. the gpu tests --------------------------------------------------------------------------
  run_gtest cuda_backend_test "$CAP_BACKEND_TEST"
  if ((LAST_SKIPPED > 0)); then
    reason=$(grep -m1 'GPU test skipped' "$OUTDIR/cuda_backend_test.log")
    say "cuda_backend_test: device tests skipped: ${reason:-see log}"
    skipped_on_gpu=1
  fi
  grep -h '^\[   INFO   \]\|^\[   NOTE   \]' "$OUTDIR/cuda_backend_test.log" | tee -a "$SUMMARY"
  # ---- 5. benchmarks -----------------------------------------------------------------------------
  if ((skipped_on_gpu == 0)); then
    t0=$(date +%s)
    # shellcheck disable=SC2086 # GRAID_DEVICE_CHECK_BENCH_ARGS is a list of words on purpose
    timeout "$(cap "$CAP_CUDA_BENCH")" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/cuda_bench" \
      ${GRAID_DEVICE_CHECK_BENCH_ARGS:-} --benchmark_out="$OUTDIR/cuda_bench.json" \
      --benchmark_out_format=json >"$OUTDIR/cuda_bench.log" 2>&1
    rc=$?
    record cuda_bench "{\"rc\": $rc, \"s\": $(($(date +%s) - t0))}"
    say "cuda_bench: rc $rc, $(($(date +%s) - t0)) s"
    sed -n '/== cuda_bench summary/,$p' "$OUTDIR/cuda_bench.log" | tee -a "$SUMMARY"
    if ((rc == 77)); then skipped_on_gpu=1; elif ((rc != 0)); then failed=1; fi
  fi
  # ---- 5b. the engine on the gpu: model test and graid-bench with --backend cuda ---------------
  if ((skipped_on_gpu == 0)) && [[ -x "$CARRY/bin/array_model_cuda_test" ]]; then
    run_gtest array_model_cuda_test "$CAP_MODEL_TEST"
    # The README's main job on the GPU: the demo must pick the cuda backend and pass.
    if [[ -x "$CARRY/bin/graid-demo" ]]; then
      timeout "$(cap "$CAP_DEMO")" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/graid-demo" >"$OUTDIR/graid-demo.log" 2>&1
      rc=$?
      head -1 "$OUTDIR/graid-demo.log" | tee -a "$SUMMARY"
      tail -1 "$OUTDIR/graid-demo.log" | tee -a "$SUMMARY"
      on_gpu=$(head -1 "$OUTDIR/graid-demo.log" | grep -c 'parity on the GPU')
      record graid_demo "{\"rc\": $rc, \"on_gpu\": $on_gpu}"
      if ((rc != 0 || on_gpu != 1)); then failed=1; fi
    fi
    # Sized so that each run's own time (bench_estimate) is under half its cap: the rest is
    # member set-up, array creation and, for the last run, the read-back checks.
    # The variants' raw limit is swept to saturation; the every-profile run is a check of the
    # data (--verify), so its raw baseline keeps one depth (--raw-qd) to stay inside its cap.
    variant_timing=(--seconds 1 --rounds 1 --warmup 0.2)
    all_timing=(--seconds 0.5 --rounds 1 --warmup 0.1 --raw-qd 128)
    # The dry run on the fake runtime (tests/integration/device_check_dry_run.sh) runs the same
    # steps shorter: GRAID_DEVICE_CHECK_BENCH_SECONDS replaces both --seconds (and the warm-up).
    if [[ -n "${GRAID_DEVICE_CHECK_BENCH_SECONDS:-}" ]]; then
      variant_timing=(--seconds "$GRAID_DEVICE_CHECK_BENCH_SECONDS" --rounds 1 --warmup 0.05)
      all_timing=(--seconds "$GRAID_DEVICE_CHECK_BENCH_SECONDS" --rounds 1 --warmup 0.05
        --raw-qd 128)
    fi
    say "graid-bench: ~$(bench_estimate 2 1 1 0.2 1) s for the --batcher run (cap ${CAP_BENCH_VARIANT} s)," \
      "~$(bench_estimate 10 0.5 1 0.1 0) s for every profile (cap ${CAP_BENCH_ALL} s), plus set-up"
    benchdir=$(bench_dir 2>"$OUTDIR/graid-bench-dir.log")
    bench_dir_rc=$?
    tee -a "$SUMMARY" <"$OUTDIR/graid-bench-dir.log"
    if ((bench_dir_rc != 0)); then
      say "graid-bench: no room for $BENCH_MEMBERS members of $MEMBER_SIZE in /dev/shm or on disk"
      record graid_bench '{"rc": "no room for the members"}'
      failed=1
    else
      say "graid-bench: members in $benchdir"
      record graid_bench_members "$(quote "$benchdir")"
      # The benchmark report's subset (docs/benchmarks.md): RAID6 on the cpu and cuda backends,
      # optimal (against the members' limit), degraded and rebuilding, one suite run; its
      # suite.json joins the report as it is (graid_report.py), its host and device fields saying
      # where and when it ran.
      suite_seconds=${GRAID_DEVICE_CHECK_BENCH_SECONDS:-0.2}
      t0=$(date +%s)
      timeout "$(cap "$CAP_SUITE")" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/graid-bench" suite --quick \
        --level raid6 --backend cpu --backend cuda --threads 4 --dir "$benchdir" \
        --member-size "$MEMBER_SIZE" --seconds "$suite_seconds" --no-nbd --no-plots \
        --out "$OUTDIR/suite" >"$OUTDIR/suite.log" 2>"$OUTDIR/suite.err"
      rc=$?
      record graid_bench_suite "{\"rc\": $rc, \"s\": $(($(date +%s) - t0))}"
      say "graid-bench suite --level raid6 --backend cpu --backend cuda: rc $rc, $(($(date +%s) - t0)) s"
      grep -E '^raid6 ' "$OUTDIR/suite.log" | tee -a "$SUMMARY"
      if ((rc != 0)); then failed=1; fi
      for variant in cuda-batcher; do
        args=(--backend "${variant%-batcher}")
        [[ $variant == *-batcher ]] && args+=(--batcher)
        t0=$(date +%s)
        timeout "$(cap "$CAP_BENCH_VARIANT")" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/graid-bench" \
          --level 6 --members "$BENCH_MEMBERS" --strip 64K --dir "$benchdir" \
          --member-size "$MEMBER_SIZE" --profile 4k-randwrite,1m-seqwrite --qd 32 --threads 4 \
          "${variant_timing[@]}" "${args[@]}" --format json \
          >"$OUTDIR/graid-bench-$variant.json" 2>"$OUTDIR/graid-bench-$variant.log"
        rc=$?
        record "graid_bench_${variant//-/_}" "{\"rc\": $rc, \"s\": $(($(date +%s) - t0))}"
        say "graid-bench ${args[*]}: rc $rc, $(($(date +%s) - t0)) s"
        if ((rc != 0)); then failed=1; fi
      done
      # Every profile through the cuda backend, each followed by a write + read-back check.
      t0=$(date +%s)
      timeout "$(cap "$CAP_BENCH_ALL")" ${RUN[@]+"${RUN[@]}"} "$CARRY/bin/graid-bench" \
        --level 6 --members "$BENCH_MEMBERS" --strip 64K --dir "$benchdir" \
        --member-size "$MEMBER_SIZE" --profile all --qd 32 --threads 4 "${all_timing[@]}" \
        --backend cuda --verify --verify-bytes 16M >"$OUTDIR/graid-bench-cuda-all.txt" \
        2>"$OUTDIR/graid-bench-cuda-all.log"
      rc=$?
      record graid_bench_cuda_all_profiles "{\"rc\": $rc, \"s\": $(($(date +%s) - t0))}"
      say "graid-bench --backend cuda --profile all --verify: rc $rc, $(($(date +%s) - t0)) s"
      tee -a "$SUMMARY" <"$OUTDIR/graid-bench-cuda-all.txt"
      if ((rc != 0)); then failed=1; fi
      rm -rf "$benchdir"
    fi
  fi
else
  # ---- 6. fallback: the kernel alone, built here -------------------------------------------------
  # nvcc compiles the host code with a host C++ compiler: CUDAHOSTCXX when set, else the first
  # of g++, c++, clang++ on the PATH.
  host_cxx=""
  if [[ -n "${CUDAHOSTCXX:-}" ]]; then
    host_cxx=$(command -v "$CUDAHOSTCXX" 2>/dev/null)
  else
    for c in g++ c++ clang++; do
      host_cxx=$(command -v "$c" 2>/dev/null) && break
    done
  fi
  if [[ -z "$host_cxx" ]]; then
    say "fallback: skipped: nvcc needs a host C++ compiler (g++, c++ or clang++ on the PATH, or" \
      "CUDAHOSTCXX) and there is none here${CUDAHOSTCXX:+ (CUDAHOSTCXX=$CUDAHOSTCXX not found)}"
    record fallback_check '{"rc": "skipped", "why": "no host C++ compiler"}'
    failed=1
  else
    tmp=$(mktemp -d)
    say "fallback: building bench/gpu/fallback_check.cu with $(command -v nvcc || echo 'no nvcc')" \
      "(host compiler $host_cxx)"
    if timeout "$(cap "$CAP_FALLBACK_BUILD")" "${HOST_ENV[@]}" nvcc -ccbin "$host_cxx" -std=c++17 \
      -O3 -arch=sm_90 -I"$ROOT" "$ROOT/bench/gpu/fallback_check.cu" -o "$tmp/fallback_check" \
      >"$OUTDIR/fallback_build.log" 2>&1; then
      timeout "$(cap "$CAP_FALLBACK_RUN")" "${HOST_ENV[@]}" "$tmp/fallback_check" \
        >"$OUTDIR/fallback_check.jsonl" 2>&1
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
fi

if ((failed)); then finish 1; fi
if ((skipped_on_gpu)); then
  say "the device tests skipped although a GPU was detected: no GPU figure was measured"
  finish 77
fi
finish 0
