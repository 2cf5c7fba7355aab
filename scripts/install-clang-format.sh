#!/usr/bin/env bash
# Installs the pinned clang-format (the kernels' formatter, see .clang-format) from the
# Python package registry into a cache folder outside the clone and prints its path.
set -euo pipefail
version=19.1.7
dir=${XDG_CACHE_HOME:-$HOME/.cache}/cuzk/clang-format-$version
bin="$dir/clang_format/data/bin/clang-format"
if [ ! -x "$bin" ]; then
  echo "installing clang-format $version into $dir" >&2
  rm -rf "$dir.partial"
  python3 -m pip install --quiet --disable-pip-version-check --target "$dir.partial" "clang-format==$version" >&2
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
fi
echo "$bin"
