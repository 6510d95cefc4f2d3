#!/usr/bin/env bash
# The installed package works for a program outside hotloop's tree: installs the build into a temporary
# prefix, configures and builds examples/custom_model against it with find_package(hotloop), runs it.
#   find_package.sh BUILD_DIR SOURCE_DIR CMAKE TORCH_PREFIX
set -euo pipefail
build=$1 source=$2 cmake=$3 torch_prefix=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cmake" --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/lib/cmake/hotloop/hotloopConfig.cmake"
test -f "$work/prefix/include/hotloop/train/trainer.h"
test -x "$work/prefix/bin/hotloop"
# LibTorch's CMake (CUDA build) wants the CUDA compiler and an arch list, and must not probe for a GPU.
cuda_flags=()
for nvcc in "${CUDACXX:-}" /usr/local/cuda/bin/nvcc "$(command -v nvcc || true)"; do
  if [ -n "$nvcc" ] && [ -x "$nvcc" ]; then cuda_flags=(-DCMAKE_CUDA_COMPILER="$nvcc"); break; fi
done
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-8.0;9.0}
"$cmake" -S "$source/examples/custom_model" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix;$torch_prefix" "${cuda_flags[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/build" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
"$work/build/custom_model" "$work/run"
