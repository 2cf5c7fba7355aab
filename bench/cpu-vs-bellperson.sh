#!/usr/bin/env bash
# cuzk's CPU prover against bellperson 0.26's, plus `cuzk bench` per-stage timings,
# on the same synthetic C2-shaped circuits. Raw output goes to bench/results/.
#   bench/cpu-vs-bellperson.sh [LOG_SIZES] [REPS]     (default 16,18,20 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${1:-16,18,20}
reps=${2:-3}
out="bench/results/$(date -u +%Y-%m-%d)-cpu-vs-bellperson-$(git rev-parse --short HEAD).txt"
cargo build --release -p cuzk --quiet
cargo bench -p cuzk-groth16 --bench vs_bellperson --no-run --quiet
{
  echo "# date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit:  $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (dirty)')"
  echo "# device:  $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
  echo "# command: bench/cpu-vs-bellperson.sh $sizes $reps"
  echo
  echo "## cargo bench -p cuzk-groth16 --bench vs_bellperson -- $sizes $reps"
  cargo bench -p cuzk-groth16 --bench vs_bellperson --quiet -- "$sizes" "$reps" 2>&1
  echo
  echo "## target/release/cuzk bench --backend cpu --log-sizes $sizes --reps $reps"
  target/release/cuzk bench --backend cpu --log-sizes "$sizes" --reps "$reps" 2>&1
} | tee "$out"
echo "wrote $out"
