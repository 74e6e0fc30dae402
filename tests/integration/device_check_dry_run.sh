#!/usr/bin/env bash
# bench/gpu/device-check.sh end to end without a GPU: the programs it carries are their builds
# against the fake CUDA runtime (tests/fake_cuda), sizes are small, and the script must end with
# exit 0 and a summary holding every step. Run by CTest (device_check_dry_run_on_fake_cuda).
# Then the nvcc-only fallback twice, with a stand-in nvcc that records its library path: it must
# be the host's, not the carry's; and without a host C++ compiler the step must say so and skip.
#
#   device_check_dry_run.sh DEVICE_CHECK KERNEL_TEST CUDA_BACKEND_TEST CUDA_BENCH \
#                           ARRAY_MODEL_CUDA_TEST GRAID_BENCH GRAID_DEMO
set -u
script=$1
shift
carry=$(mktemp -d)
out=$(mktemp -d)
trap 'rm -rf "$carry" "$out"' EXIT
mkdir -p "$carry/bin" "$carry/lib"
for name in kernel_test cuda_backend_test cuda_bench array_model_cuda_test graid-bench graid-demo; do
  ln -s "$1" "$carry/bin/$name"
  shift
done

# The caps are the device's; the fake device emulates each kernel on one core of a machine that
# CTest shares with other tests, so the steps get twice as long here (the caps' sum is checked
# as it is, below).
# Sizes and durations are what the fake device needs to run every step (the checks below look
# at which steps ran and what they printed, not at figures): 0.2 s graid-bench runs; cuda_bench
# keeps 200 MiB, which its 128 MiB end-to-end batches (the host-CPU ratios) need.
GRAID_CARRY=$carry GRAID_DEVICE_CHECK_ASSUME_GPU=1 GRAID_CUDA_BENCH_MIB=200 \
  GRAID_DEVICE_CHECK_CAP_SCALE=2 \
  GRAID_DEVICE_CHECK_MEMBER_SIZE=64M GRAID_DEVICE_CHECK_BENCH_SECONDS=0.2 \
  GRAID_DEVICE_CHECK_BENCH_ARGS="--benchmark_min_time=0.01 --benchmark_filter=^(baseline/|kernel/enc_pq/k:4/chunk:64K|kernel/rec2_pq(_bitserial)?/k:4/chunk:64K|e2e/[a-z_]+/enc_pq/|single/[a-z_]+/enc_pq/k:8/chunk:(4|64)K|latency/[a-z_]+/enc_pq/k:8/chunk:64K/batch:1$)" \
  bash "$script" "$out"
rc=$?
echo "---- summary.txt"
cat "$out/summary.txt"
echo "---- summary.json"
cat "$out/summary.json"

fail() {
  echo "device-check dry run: $*" >&2
  exit 1
}
((rc == 0)) || fail "device-check exited $rc"
grep -q '"exit_code": 0' "$out/summary.json" || fail "summary.json does not record exit 0"
grep -q '"carried_loader": "host glibc"' "$out/summary.json" || fail "loader not recorded"
grep -q '== cuda_bench summary' "$out/summary.txt" || fail "no cuda_bench summary"
grep -q 'ratio_d2d' "$out/summary.txt" || fail "no kernel ratio in the summary"
grep -q 'ratio_peak' "$out/summary.txt" || fail "no kernel ratio to peak bandwidth in the summary"
grep -q 'h2d cost per 64 KiB copy' "$out/summary.txt" || fail "no per-copy cost in the summary"
grep -q 'host CPU per GB, cpu / cuda' "$out/summary.txt" || fail "no host CPU ratio"
grep -q 'single-job latency crossover, cuda' "$out/summary.txt" || fail "no crossover line"
grep -q 'parity on the GPU' "$out/summary.txt" || fail "the demo did not run on the device"
grep -q 'demo OK' "$out/summary.txt" || fail "the demo did not pass"
grep -q 'verify 8k-randrw90: .* 0 mismatched' "$out/summary.txt" || fail "all-profile run incomplete"
for f in kernel_test.json cuda_backend_test.json cuda_bench.json array_model_cuda_test.json \
  suite/suite.json graid-bench-cuda-batcher.json; do
  [[ -s "$out/$f" ]] || fail "$f missing or empty"
done
# The report's subset: RAID6 rows of both backends in every state, in the report's schema.
for want in '"schema": "graid-bench-report/1"' '"backend": "cpu"' '"backend": "cuda"' \
  '"state": "degraded"' '"state": "rebuilding"'; do
  grep -q "$want" "$out/suite/suite.json" || fail "suite.json lacks $want"
done
grep -q '"backend": "cuda+batcher"' "$out/graid-bench-cuda-batcher.json" ||
  fail "graid-bench --batcher JSON lacks its backend"
grep -q '"caps_sum_s": ' "$out/summary.json" || fail "no sum of step caps"
caps=$(sed -n 's/.*"caps_sum_s": \([0-9]*\).*/\1/p' "$out/summary.json")
((caps < 300)) || fail "the steps' caps add up to $caps s, not under 5 minutes"
echo "device-check dry run: main path OK (caps sum ${caps} s)"

# ---- the nvcc-only fallback: the carried binaries do not run -----------------------------------
fb_carry=$(mktemp -d)
fb_bin=$(mktemp -d)
trap 'rm -rf "$carry" "$out" "$fb_carry" "$fb_bin"' EXIT
mkdir -p "$fb_carry/bin" "$fb_carry/lib"
# A stand-in nvcc: records the library path it ran with and builds a "fallback_check" that
# records its own and prints one JSON line.
cat >"$fb_bin/nvcc" <<'NVCC'
#!/usr/bin/env bash
echo "nvcc LD_LIBRARY_PATH=${LD_LIBRARY_PATH-<unset>} args=$*" >>"$FB_LOG"
while [[ $# -gt 0 && $1 != -o ]]; do shift; done
cat >"$2" <<'RUN'
#!/usr/bin/env bash
echo "fallback_check LD_LIBRARY_PATH=${LD_LIBRARY_PATH-<unset>}" >>"$FB_LOG"
echo '{"check": "stand-in"}'
RUN
chmod +x "$2"
NVCC
chmod +x "$fb_bin/nvcc"
fb_out=$(mktemp -d)
export FB_LOG=$fb_out/env.log
PATH="$fb_bin:$PATH" LD_LIBRARY_PATH=/host/lib GRAID_CARRY=$fb_carry \
  GRAID_DEVICE_CHECK_ASSUME_GPU=1 bash "$script" "$fb_out/run" >/dev/null 2>&1
rc=$?
cat "$FB_LOG"
((rc == 0)) || fail "fallback run exited $rc: $(cat "$fb_out/run/summary.txt")"
grep -q "^nvcc LD_LIBRARY_PATH=/host/lib args=-ccbin " "$FB_LOG" ||
  fail "nvcc did not run with the host's library path and a host compiler"
grep -q "^fallback_check LD_LIBRARY_PATH=/host/lib$" "$FB_LOG" ||
  fail "fallback_check did not run with the host's library path"
env -u LD_LIBRARY_PATH PATH="$fb_bin:$PATH" GRAID_CARRY=$fb_carry \
  GRAID_DEVICE_CHECK_ASSUME_GPU=1 bash "$script" "$fb_out/run2" >/dev/null 2>&1
grep -q "^fallback_check LD_LIBRARY_PATH=<unset>$" "$FB_LOG" ||
  fail "without a host LD_LIBRARY_PATH the carry's stayed set for fallback_check"
# No host C++ compiler: a clear skip, and the run is not reported as a success.
PATH="$fb_bin:$PATH" CUDAHOSTCXX=/nonexistent/g++ GRAID_CARRY=$fb_carry \
  GRAID_DEVICE_CHECK_ASSUME_GPU=1 bash "$script" "$fb_out/run3" >/dev/null 2>&1
rc=$?
((rc == 1)) || fail "fallback without a host compiler exited $rc, not 1"
grep -q 'fallback: skipped: nvcc needs a host C++ compiler' "$fb_out/run3/summary.txt" ||
  fail "no clear skip without a host compiler"
rm -rf "$fb_out"
echo "device-check dry run: OK"
