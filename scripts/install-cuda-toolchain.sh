#!/usr/bin/env bash
# Installs the pinned CUDA 13.0 compiler from PyPI into a cache folder outside the
# clone (reused by later runs) and prints the path of its nvcc. The build finds it
# there without any environment variable; set CUZK_CUDA_TOOLCHAIN to use another folder.
set -euo pipefail
dir=${CUZK_CUDA_TOOLCHAIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cuzk/cuda-13.0.88}
nvcc="$dir/nvidia/cu13/bin/nvcc"
if [ ! -x "$nvcc" ]; then
  echo "installing the CUDA 13.0 compiler into $dir" >&2
  rm -rf "$dir.partial"
  python3 -m pip install --quiet --disable-pip-version-check --target "$dir.partial" \
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 'nvidia-nvvm==13.0.*' >&2
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
fi
"$nvcc" --version >&2
echo "$nvcc"
