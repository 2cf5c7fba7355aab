#!/usr/bin/env bash
# Builds cuzk (release, the CUDA kernels included), installs the binary and an example
# configuration, and says which GPU architectures the binary carries.
#
#   scripts/install.sh [--prefix DIR] [--config-dir DIR] [--systemd] [--cpu-only]
#
#   --prefix DIR      the binary goes to DIR/bin/cuzk. Default: /usr/local as root,
#                     else ~/.local.
#   --config-dir DIR  cuzk.example.toml is copied there, and to cuzk.toml when that
#                     does not exist yet (an existing cuzk.toml is never replaced).
#                     Default: /etc/cuzk as root, else ${XDG_CONFIG_HOME:-~/.config}/cuzk.
#   --systemd         (root) also install deploy/systemd/cuzk.service as
#                     /etc/systemd/system/cuzk.service, with this prefix and
#                     configuration directory, and create the system user cuzk. The
#                     service is not enabled or started.
#   --cpu-only        build without CUDA kernels when no CUDA compiler can be found or
#                     installed (the binary then proves on the CPU only).
#
# The CUDA compiler: an existing one ($NVCC, $CUDA_PATH, $CUDA_HOME, PATH,
# /usr/local/cuda) is used as is; without one, scripts/install-cuda-toolchain.sh
# installs the pinned CUDA 13.0 compiler into ~/.cache/cuzk (python3 with pip needed).
# No GPU is needed to build. CUZK_CUDA_ARCHS (e.g. "90") narrows the architectures
# compiled; CARGO_TARGET_DIR is honoured.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" = 0 ]; then
  prefix=/usr/local
  config_dir=/etc/cuzk
else
  prefix=$HOME/.local
  config_dir=${XDG_CONFIG_HOME:-$HOME/.config}/cuzk
fi
systemd=0
cpu_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --config-dir) config_dir=${2:?--config-dir needs a directory}; shift 2 ;;
    --systemd) systemd=1; shift ;;
    --cpu-only) cpu_only=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (--help lists them)" >&2; exit 2 ;;
  esac
done
case $prefix in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
case $config_dir in /*) ;; *) config_dir=$(pwd)/$config_dir ;; esac
if [ $systemd = 1 ] && [ "$(id -u)" != 0 ]; then
  echo "install.sh: --systemd installs into /etc/systemd/system and creates a user: run it as root" >&2
  exit 2
fi
command -v cargo >/dev/null || { echo "install.sh: cargo not found; install a Rust toolchain (rustup) first" >&2; exit 1; }

# The same search as crates/cuzk-cuda/build.rs, so the build below compiles the kernels.
have_nvcc() {
  [ -n "${NVCC:-}" ] && [ -f "$NVCC" ] && return 0
  for d in ${CUDA_PATH:+"$CUDA_PATH"} ${CUDA_HOME:+"$CUDA_HOME"}; do [ -f "$d/bin/nvcc" ] && return 0; done
  command -v nvcc >/dev/null && return 0
  [ -f /usr/local/cuda/bin/nvcc ] && return 0
  [ -f "${CUZK_CUDA_TOOLCHAIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cuzk/cuda-13.0.88}/nvidia/cu13/bin/nvcc" ]
}
if ! have_nvcc; then
  echo "install.sh: no CUDA compiler found; installing the pinned one (scripts/install-cuda-toolchain.sh)" >&2
  if nvcc_path=$("$repo/scripts/install-cuda-toolchain.sh"); then
    export NVCC=$nvcc_path
  elif [ $cpu_only = 1 ]; then
    echo "install.sh: could not install the CUDA compiler; building for the CPU only (--cpu-only)" >&2
  else
    echo "install.sh: could not install the CUDA compiler (it needs python3 with pip); install a CUDA toolkit (nvcc) or pass --cpu-only" >&2
    exit 1
  fi
fi

target_dir=${CARGO_TARGET_DIR:-$repo/target}
echo "install.sh: building cuzk (release) in $target_dir" >&2
(cd "$repo" && cargo build --release --locked -p cuzk)
bin=$target_dir/release/cuzk

install -d "$prefix/bin"
# A new file renamed over the old one: a running daemon keeps its (deleted) binary.
install -m 0755 "$bin" "$prefix/bin/cuzk.new"
mv -f "$prefix/bin/cuzk.new" "$prefix/bin/cuzk"
echo "installed $prefix/bin/cuzk"

install -d "$config_dir"
install -m 0644 "$repo/cuzk.example.toml" "$config_dir/cuzk.example.toml"
if [ -e "$config_dir/cuzk.toml" ]; then
  echo "kept $config_dir/cuzk.toml (the new example is $config_dir/cuzk.example.toml)"
else
  install -m 0644 "$repo/cuzk.example.toml" "$config_dir/cuzk.toml"
  echo "installed $config_dir/cuzk.toml (from cuzk.example.toml)"
fi

if [ $systemd = 1 ]; then
  getent group cuzk >/dev/null || groupadd --system cuzk
  getent passwd cuzk >/dev/null || useradd --system --gid cuzk --home-dir /var/lib/cuzk --no-create-home --shell /usr/sbin/nologin cuzk
  sed -e "s#/usr/local/bin/cuzk#$prefix/bin/cuzk#g" -e "s#/etc/cuzk/#$config_dir/#g" \
    "$repo/deploy/systemd/cuzk.service" > /etc/systemd/system/cuzk.service.new
  mv -f /etc/systemd/system/cuzk.service.new /etc/systemd/system/cuzk.service
  command -v systemctl >/dev/null && systemctl daemon-reload 2>/dev/null || true
  echo "installed /etc/systemd/system/cuzk.service (user cuzk); start it with: systemctl enable --now cuzk"
fi

echo
# `cuzk info` names the version and the architectures compiled in (the cuda kernels line).
"$prefix/bin/cuzk" info
echo
if "$prefix/bin/cuzk" daemon --config "$config_dir/cuzk.toml" --check-config >/dev/null 2>&1; then
  echo "$config_dir/cuzk.toml: valid (cuzk daemon --config $config_dir/cuzk.toml --check-config prints the effective settings)"
else
  echo "$config_dir/cuzk.toml: NOT valid for this machine; run: cuzk daemon --config $config_dir/cuzk.toml --check-config" >&2
fi
case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "note: $prefix/bin is not in PATH" ;; esac
