#!/usr/bin/env bash
# Builds sppark-msm (release, kernels for CUZK_CUDA_ARCHS, default 90) with the pinned
# nvcc, plus the one thing sppark needs beyond it: CUDA's C++ core library (CCCL, for
# cooperative groups), from PyPI into the same cache outside the clone. Copies the
# stripped binary to .gpu/bin/sppark-msm, beside the staged cuzk.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=$("$root/scripts/install-cuda-toolchain.sh")
cccl=${XDG_CACHE_HOME:-$HOME/.cache}/cuzk/cccl-13.0.85
if [ ! -d "$cccl/nvidia/cu13/include/cccl" ]; then
  echo "installing CUDA's C++ core library into $cccl" >&2
  rm -rf "$cccl.partial"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$cccl.partial" nvidia-cuda-cccl==13.0.85 >&2
  rm -rf "$cccl"
  mv "$cccl.partial" "$cccl"
fi
export NVCC=$nvcc CUZK_CCCL_INCLUDE=$cccl/nvidia/cu13/include CUZK_CUDA_ARCHS=${CUZK_CUDA_ARCHS:-90}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target/sppark-msm}
cd "$root/bench/sppark-msm"
cargo build --release --locked
mkdir -p "$root/.gpu/bin"
strip --strip-debug -o "$root/.gpu/bin/sppark-msm" "$CARGO_TARGET_DIR/release/sppark-msm"
echo "$root/.gpu/bin/sppark-msm"
