#!/usr/bin/env bash
# Real-size Filecoin work on a GPU machine, from shape-true inputs (`cuzk fixture`) and
# timing parameters (`cuzk setup --timing-params`): nothing here is a real proof, and the
# daemon runs timing-only. With VALID=1 inputs, a setup of our own (`setup`) and
# PRODUCTION=1 the daemon proves in production mode instead: every check on, each proof
# verified by filecoin-proofs before it is returned. Run from the repository root, with
# the staged binary (.gpu/bin/cuzk, see ../shared/gpu/stage) or CUZK=path/to/cuzk.
#
#   bench/real-sizes.sh inputs CIRCUIT...        shape-true inputs, e.g. porep-32g snap-32g
#                                                 (VALID=1: valid ones, `cuzk fixture --valid`)
#   bench/real-sizes.sh params CIRCUIT           timing parameters under filecoin-proofs' names
#                                                 (SHAPES=file: counts from `cuzk circuits
#                                                 --json` instead of a count, minutes at 32 GiB)
#   bench/real-sizes.sh setup CIRCUIT            a real setup of our own (`cuzk setup
#                                                 --circuit`) from the compiled matrices
#                                                 (compiled first when missing), on the GPU
#   bench/real-sizes.sh compile CIRCUIT          the circuit's compiled constraint matrices,
#                                                 beside the parameters (minutes at 32 GiB)
#   bench/real-sizes.sh partition CIRCUIT [ARGS] one partition: count, synthesis, GPU proof
#                                                 (ARGS go to cuzk bench, e.g. --no-reference)
#   bench/real-sizes.sh daemon CIRCUIT JOBS CONCURRENCY [BUDGET]
#                                                 JOBS requests at once through a timing-only
#                                                 daemon synthesizing CONCURRENCY partitions
#                                                 at a time; the timeline (SVG, waits), the
#                                                 daemon's RSS and CPU time every 2 s;
#                                                 COMPILED=1: with compiled matrices
#                                                 (witness-only synthesis, a, b, c on the GPU);
#                                                 DEVICE_MEMORY=24GiB: gpus.device_memory_limit;
#                                                 GPU_WORKERS=2: gpus.gpu_workers_per_device;
#                                                 PRODUCTION=1: timing_only off; VERIFY=1:
#                                                 the returned proofs checked by the client;
#                                                 PRIORITY=critical: the jobs' priority;
#                                                 SINGLE=N: then N more jobs one at a time,
#                                                 each submitted once the last completed
#                                                 (the latency of one job on an idle daemon)
#   bench/real-sizes.sh underload BASE JOBS CONCURRENCY URGENT [BUDGET]
#                                                 deadlines under load: the daemon as for
#                                                 `daemon`, URGENT (e.g. winning-32g) proved
#                                                 alone first (its idle latency, its set loaded
#                                                 after BASE's), then JOBS BASE requests
#                                                 (NORMAL) at once and, once they fill the GPU,
#                                                 URGENT again ROUNDS=5 times, each submitted
#                                                 alone at its Curio priority (PRIORITY,
#                                                 default critical) EVERY=6 s apart: each one's
#                                                 latency from submission, and where it waited
#                                                 (URGENT_FIRST=1: its set loaded before BASE's)
#
# WORK (default /var/tmp/cuzk-real) holds the inputs and parameters (tens of GB: on
# disk, so the page cache can give the memory back); MATRICES (default WORK/params) the
# compiled matrices; logs go to OUT (default ./real-sizes-out).
set -euo pipefail
B=${CUZK:-.gpu/bin/cuzk}
W=${WORK:-/var/tmp/cuzk-real}
O=${OUT:-./real-sizes-out}
M=${MATRICES:-$W/params}
mkdir -p "$W/inputs" "$W/params" "$M" "$O"

kind_of() {
  case $1 in
    porep-*) echo porep ;;
    snap-*) echo snap ;;
    wpost-*) echo window-post ;;
    winning-*) echo winning-post ;;
    *) echo "unknown circuit $1" >&2; exit 2 ;;
  esac
}
size_of() { echo "${1##*-}"; }

step=${1:?step: inputs, params, partition or daemon}; shift
case $step in
  inputs)
    for c in "$@"; do
      k=$(kind_of "$c") || exit 2
      rm -rf "${W:?}/inputs/$c"
      "$B" fixture "$k" --sector-size "$(size_of "$c")" --out "$W/inputs/$c" ${VALID:+--valid}
    done
    ;;
  params)
    c=${1:?circuit}
    "$B" setup --timing-params --circuit "$c" --out "$W/params" ${SHAPES:+--shapes "$SHAPES"}
    ;;
  setup)
    c=${1:?circuit}
    "$B" setup --circuit "$c" --out "$W/params" --matrices "$M"
    ;;
  compile)
    c=${1:?circuit}
    "$B" compile --circuit "$c" --dir "$M"
    ;;
  partition)
    c=${1:?circuit}; shift
    "$B" bench --input "$W/inputs/$c" --circuit "$c" --timing-only --param-dir "$W/params" --backend cuda "$@"
    ;;
  daemon|underload)
    c=${1:?circuit}; jobs=${2:?jobs}; conc=${3:?concurrency}
    if [ "$step" = underload ]; then urgent=${4:?urgent circuit}; budget=${5:-100GiB}; else budget=${4:-100GiB}; fi
    cat > "$W/daemon.toml" <<EOF
[daemon]
listen = "127.0.0.1:9820"
status_listen = "127.0.0.1:9821"
timing_only = $([ "${PRODUCTION:-0}" = 1 ] && echo false || echo true)
[srs]
param_cache = "$W/params"
[memory]
total_budget = "$budget"
[pipeline]
synthesis_concurrency = $conc
synthesis_lookahead = 2
EOF
    if [ -n "${DEVICE_MEMORY:-}${GPU_WORKERS:-}" ]; then
      echo '[gpus]' >> "$W/daemon.toml"
      [ -z "${DEVICE_MEMORY:-}" ] || printf 'device_memory_limit = "%s"\n' "$DEVICE_MEMORY" >> "$W/daemon.toml"
      [ -z "${GPU_WORKERS:-}" ] || printf 'gpu_workers_per_device = %s\n' "$GPU_WORKERS" >> "$W/daemon.toml"
    fi
    if [ "${COMPILED:-0}" = 1 ]; then
      printf '[synthesis]\ncompiled_matrices = true\nmatrices_dir = "%s"\n' "$M" >> "$W/daemon.toml"
    fi
    "$B" daemon --config "$W/daemon.toml" > "$O/daemon-$c.log" 2>&1 &
    pid=$!
    # The daemon goes with this script however it ends. Stopped (a timeout's TERM), it is
    # killed outright: a TERM would let it drain its jobs first, holding the port and the
    # GPU memory the next run needs.
    trap 'kill $pid 2>/dev/null || true' EXIT
    trap 'kill -9 $pid 2>/dev/null; exit 143' TERM INT
    fetch() { python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:9821$1').read().decode())"; }
    for _ in $(seq 120); do
      fetch /status >/dev/null 2>&1 && break
      kill -0 "$pid" 2>/dev/null || { echo "the daemon stopped:" >&2; cat "$O/daemon-$c.log" >&2; exit 1; }
      sleep 1
    done
    # Resident memory (kB) and CPU seconds of the daemon every 2 s, and the bytes in use
    # inside the GPUs' memory pools now and at most (a leak inside the pool shows there;
    # nvidia-smi sees the pool whole from the first proof on).
    (
      tick=$(getconf CLK_TCK 2>/dev/null || echo 100)
      while kill -0 "$pid" 2>/dev/null; do
        rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        cpu=$(awk -v t="$tick" '{sub(/^.*\) /, ""); print ($12 + $13) / t}' "/proc/$pid/stat" 2>/dev/null || echo 0)
        pool=$(fetch /metrics 2>/dev/null | awk '/^cuzk_device_pool_used_bytes/ {u += $2} /^cuzk_device_pool_used_high_bytes/ {h += $2} END {printf "pool_used=%d pool_high=%d", u, h}')
        echo "$(date +%s.%N) rss_kb=$rss cpu_s=$cpu $pool"
        sleep 2
      done
    ) > "$O/host-$c.txt" &
    if [ "$step" = underload ]; then
      sub() { FIL_PROOFS_PARAMETER_CACHE="$W/params" "$B" submit --to http://127.0.0.1:9820 "$@"; }
      u=$O/urgent-$urgent.txt
      # Alone: with BASE's set loaded first (as a PoRep host has it), URGENT's then
      # (URGENT_FIRST=1: URGENT's first).
      first=$c; [ "${URGENT_FIRST:-0}" = 1 ] && first=$urgent
      echo "== $urgent alone, $first's set loaded first" | tee "$u"
      sub --preload "$first" --request "$W/inputs/$urgent" --jobs 1 --priority "${PRIORITY:-critical}" 2>&1 | tee -a "$u"
      for i in 1 2 3; do
        echo "== $urgent alone, $i" | tee -a "$u"
        sub --request "$W/inputs/$urgent" --jobs 1 --priority "${PRIORITY:-critical}" $([ "${VERIFY:-0}" = 1 ] && echo --verify) 2>&1 | tee -a "$u"
      done
      sub --request "$W/inputs/$c" --jobs "$jobs" $([ "${VERIFY:-0}" = 1 ] && echo --verify) > "$O/submit-$c.txt" 2>&1 &
      base=$!
      # Until the first BASE partition is proved (a prove_end of a job that is not one
      # of the urgent ones above): the GPU is then saturated.
      for _ in $(seq 600); do
        fetch /timeline 2>/dev/null | python3 -c 'import json, sys
urgent = set(sys.argv[1:])
sys.exit(0 if any(e["kind"] == "prove_end" and e["job"][:8] not in urgent for e in map(json.loads, sys.stdin)) else 1)' \
          $(sed -n 's/^job 0 (\([0-9a-f]\{8\}\).*/\1/p' "$u") && break
        sleep 0.5
      done
      for i in $(seq "${ROUNDS:-5}"); do
        echo "== $urgent under load ($jobs $c jobs submitted), $i, at $(date +%s.%N)" | tee -a "$u"
        sub --request "$W/inputs/$urgent" --jobs 1 --priority "${PRIORITY:-critical}" $([ "${VERIFY:-0}" = 1 ] && echo --verify) 2>&1 | tee -a "$u"
        sleep "${EVERY:-6}"
      done
      wait $base || echo "the $c jobs failed" | tee -a "$u"
      cat "$O/submit-$c.txt"
    else
    # VERIFY=1: every returned proof checked again by the client with filecoin-proofs'
    # verifier (the .vk files of WORK/params), after the last job.
    FIL_PROOFS_PARAMETER_CACHE="$W/params" "$B" submit --to http://127.0.0.1:9820 --request "$W/inputs/$c" --jobs "$jobs" --preload "$c" \
      --priority "${PRIORITY:-normal}" $([ "${VERIFY:-0}" = 1 ] && echo --verify) 2>&1 | tee "$O/submit-$c.txt"
    for i in $(seq "${SINGLE:-0}"); do
      echo "== single job $i of ${SINGLE}, on an idle daemon" | tee -a "$O/submit-$c.txt"
      FIL_PROOFS_PARAMETER_CACHE="$W/params" "$B" submit --to http://127.0.0.1:9820 --request "$W/inputs/$c" --jobs 1 \
        --priority "${PRIORITY:-normal}" $([ "${VERIFY:-0}" = 1 ] && echo --verify) 2>&1 | tee -a "$O/submit-$c.txt"
    done
    fi
    fetch /timeline > "$O/timeline-$c.jsonl"
    # Memory and aux-vector reuse (aux_vectors_reused / aux_vectors_fresh) after the jobs.
    fetch /status > "$O/status-$c.json"
    # Bytes over the bus per partition (cuzk_device_bytes_up_total / _partitions_total).
    fetch /metrics > "$O/metrics-$c.txt"
    awk '/^cuzk_device_bytes_up_total/ {u += $2} /^cuzk_device_partitions_total/ {p += $2} END {if (p) printf "bytes up per partition %.2f GB (%d partitions)\n", u / p / 1e9, p}' "$O/metrics-$c.txt" | tee -a "$O/submit-$c.txt"
    { grep -h "device plan\|staging slot allocated\|parameter set loaded" "$O/daemon-$c.log" || true; } | sed 's/\x1b\[[0-9;]*m//g' | head -5 | tee -a "$O/submit-$c.txt"
    # CPU time per daemon thread, then again 10 s later: an idle daemon's threads must not
    # move (aac1ef1 on the H200: none did).
    for t in 0 10; do sleep "$t"; echo "== threads, ${t} s after the last job"; ps -L -o tid=,comm=,time= -p "$pid" | sort -k3 -r | head -12; done > "$O/threads-$c.txt" 2>&1 || true
    "$B" timeline "$O/timeline-$c.jsonl" --svg "$O/timeline-$c.svg" 2>&1 | tee "$O/timeline-$c.txt"
    if [ "$step" = underload ]; then
      # Where each urgent job waited (its ids as the client printed them).
      python3 bench/urgent_waits.py "$O/timeline-$c.jsonl" $(sed -n 's/^job 0 (\([0-9a-f]*\)).*/\1/p' "$u") | tee -a "$u"
    fi
    awk '{split($2, r, "="); if (r[2] > m) m = r[2]} END {printf "daemon peak RSS %.2f GB\n", m * 1024 / 1e9}' "$O/host-$c.txt" | tee -a "$O/timeline-$c.txt"
    ;;
  *)
    echo "unknown step $step" >&2; exit 2 ;;
esac
