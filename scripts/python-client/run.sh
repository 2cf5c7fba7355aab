#!/usr/bin/env bash
# Starts `cuzk daemon` on a Unix socket, then on TCP, and drives it with client.py (Python grpcio,
# stubs generated here from the same .proto). Python packages are installed once
# into a cache directory keyed by requirements.txt.
#   scripts/python-client/run.sh [path/to/cuzk]   (default: builds target/release/cuzk)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuzk=${1:-}
if [ -z "$cuzk" ]; then
  (cd "$root" && cargo build --release --bin cuzk --quiet)
  cuzk=$root/target/release/cuzk
fi
key=$(sha256sum "$here/requirements.txt" | cut -c1-16)
venv=${XDG_CACHE_HOME:-$HOME/.cache}/cuzk/python-client-$key
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv.tmp" && "$venv.tmp/bin/pip" install --quiet -r "$here/requirements.txt"
  rm -rf "$venv" && mv "$venv.tmp" "$venv"
fi
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
"$venv/bin/python" -m grpc_tools.protoc -I "$root/crates/cuzk-server/proto" --python_out="$work" \
  --grpc_python_out="$work" "$root/crates/cuzk-server/proto/cuzk/v1/proving.proto"
touch "$work/cuzk/__init__.py" "$work/cuzk/v1/__init__.py"
# Over the unix socket (with C-core's default :authority), then over TCP.
port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for target in "unix://$work/cuzk.sock" "127.0.0.1:$port"; do
  "$cuzk" daemon --listen "$target" 2> "$work/daemon.log" &
  pid=$!
  # Until it says it listens (3 minutes at most: a loaded 2-core machine, tests beside it),
  # or stops.
  for _ in $(seq 1800); do
    grep -q "cuzk daemon listening" "$work/daemon.log" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  grep -q "cuzk daemon listening" "$work/daemon.log" || { cat "$work/daemon.log"; echo "the daemon did not start (it stopped, or said nothing in 3 minutes)" >&2; exit 1; }
  echo "== $target"
  PYTHONPATH=$work "$venv/bin/python" "$here/client.py" "$target"
  kill -TERM $pid
  wait $pid
  grep -q "cuzk daemon stopped" "$work/daemon.log" || { cat "$work/daemon.log"; echo "no clean shutdown" >&2; exit 1; }
  echo "daemon stopped cleanly"
done
