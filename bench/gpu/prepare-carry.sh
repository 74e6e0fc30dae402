#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries on the build machine and gathers them, with the
# shared libraries they load (found with ldd), into one folder to carry to the GPU machine, which
# has CUDA, cmake and ninja but none of our Debian packages and no network.
#
#   bench/gpu/prepare-carry.sh                 # -> build/gpu-carry/ (ignored by git), prints size
#   BUILD=/tmp/b CARRY=/tmp/c JOBS=2 bench/gpu/prepare-carry.sh
#
# Built for Hopper only (-DCMAKE_CUDA_ARCHITECTURES=90: the H200) in Release, to keep nvcc time
# and the carry small. glibc (libc, libm, libpthread, libdl, librt, ld-linux) does not go into lib/:
# the binaries first run on the GPU machine's own; a copy of this machine's sits apart in glibc/
# as a second way to start them (below). The CUDA runtime is linked statically, so no
# libcudart.so; the driver (libcuda.so) is the GPU machine's. The carry must stay under 64 MiB.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-/tmp/build-gpu-carry}
CARRY=${CARRY:-$ROOT/build/gpu-carry}
JOBS=${JOBS:-2}
BINARIES=(tests/unit/cuda_backend_test tests/unit/kernel_test bench/micro/cuda_bench
  tests/integration/array_model_cuda_test bench/graid_bench/graid-bench bench/demo/graid-demo)
LIMIT_MIB=60

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRAID_WERROR=ON \
  -DGRAID_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGRAID_BUILD_TESTS=ON \
  -DGRAID_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target cuda_backend_test kernel_test cuda_bench \
  array_model_cuda_test graid-bench graid-demo

rm -rf "$CARRY"
mkdir -p "$CARRY/bin" "$CARRY/lib"
for b in "${BINARIES[@]}"; do
  cp "$BUILD/$b" "$CARRY/bin/"
  strip --strip-unneeded "$CARRY/bin/$(basename "$b")"
  # "libfoo.so.1 => /path/libfoo.so.1 (0x...)": copy the file the loader would use.
  ldd "$BUILD/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so*) ;;
      *) cp -L -n "$lib" "$CARRY/lib/" ;;
    esac
  done
done
# This machine's glibc, kept apart in glibc/ (never on LD_LIBRARY_PATH: the GPU machine's own
# loader must not meet a foreign libc). device-check.sh uses it only when the binaries do not
# start with the GPU machine's glibc (older than the one they were linked against): it then runs
# them through glibc/ld-linux-x86-64.so.2 --library-path lib:glibc.
mkdir -p "$CARRY/glibc"
libdir=$(dirname "$(ldd "$BUILD/tests/unit/kernel_test" | awk '$1 ~ /^libc\.so/ {print $3}')")
for lib in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1; do
  if [[ -e "$libdir/$lib" ]]; then cp -L "$libdir/$lib" "$CARRY/glibc/"; fi
done
cp -L "$(ldd "$BUILD/tests/unit/kernel_test" | awk '/ld-linux/ {print $1}')" "$CARRY/glibc/"

if ldd "$BUILD/tests/unit/cuda_backend_test" | grep -q libcudart; then
  echo "prepare-carry: cuda_backend_test links libcudart.so dynamically; expected static" >&2
  exit 1
fi
{
  echo "built $(date -u +%FT%TZ) on $(hostname) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "cuda archs: 90; build type: Release"
  ls -l "$CARRY/bin" "$CARRY/lib" "$CARRY/glibc"
} >"$CARRY/MANIFEST"

size_kib=$(du -sk "$CARRY" | cut -f1)
echo "prepare-carry: $CARRY holds $((size_kib / 1024)) MiB ($size_kib KiB):"
ls -1 "$CARRY/bin" "$CARRY/lib" "$CARRY/glibc" | sed 's/^/  /'
if ((size_kib > LIMIT_MIB * 1024)); then
  echo "prepare-carry: over ${LIMIT_MIB} MiB: too big to carry" >&2
  exit 1
fi
