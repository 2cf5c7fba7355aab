#!/usr/bin/env python3
"""Per-device *kernel* busy time of an engine run, over windows of its steady state.

`cuzk timeline` measures GPU efficiency from the prover spans (the time a worker held
the device). A span can include waiting for its own uploads, so this script weighs
every span by the kernel time the engine logged for that partition ("proved ...
busy: ...", RUST_LOG=cuzk_engine=debug) and reports, per device, kernel time over
wall time for three windows ending at the last job's completion: from the first
prover start, from the second job's completion, and from the middle job's.

usage: bench/kernel_busy.py RESULT_DIR   (timeline.jsonl and daemon-proved.log.gz)
"""
import collections
import gzip
import json
import re
import sys


def main(d):
    events = [json.loads(l) for l in open(f"{d}/timeline.jsonl") if l.strip()]
    t0 = min(e["t_us"] for e in events)
    busy = {}
    for line in gzip.open(f"{d}/daemon-proved.log.gz", "rt"):
        m = re.search(r"proved job=(\S+) partition=(\d+).*busy: ([0-9.]+)(m?s)", line)
        if m:
            busy[(m[1], int(m[2]))] = float(m[3]) / (1000 if m[4] == "ms" else 1)
    # Without the daemon's token, GET /timeline shows each job by its label (the
    # first 8 hex digits of its id) while the log has the whole id.
    by_label = {(job[:8], p): b for (job, p), b in busy.items()}

    def busy_of(job, partition):
        return busy.get((job, partition), by_label.get((job, partition)))

    open_, spans = {}, collections.defaultdict(list)
    for e in sorted(events, key=lambda e: e["t_us"]):
        if e["kind"] not in ("prove_start", "prove_end"):
            continue
        key = (e["lane"], e["job"], e.get("partition"))
        if e["kind"] == "prove_start":
            open_[key] = e["t_us"]
        else:
            device = e["lane"].split("-")[1].split(".")[0]
            start = (open_.pop(key) - t0) / 1e6
            spans[device].append((start, (e["t_us"] - t0) / 1e6, busy_of(e["job"], e["partition"])))
    done = sorted((e["t_us"] - t0) / 1e6 for e in events if e["kind"] == "completed")
    first = min(s[0] for v in spans.values() for s in v)
    end = done[-1]
    for label, a in [("first prover start", first), ("second job done", done[1] if len(done) > 2 else done[0]),
                     ("middle job done", done[len(done) // 2])]:
        jobs = sum(1 for c in done if a < c <= end)
        per = {dev: 100 * sum(b * max(0, min(y, end) - max(x, a)) / (y - x) for x, y, b in v) / (end - a)
               for dev, v in sorted(spans.items())}
        shown = ", ".join(f"device {k}: {v:.1f} %" for k, v in per.items())
        print(f"from {label} ({a:.2f} s) to the last completion ({end:.2f} s): {end - a:.2f} s, "
              f"{jobs} jobs, {(end - a) / max(jobs, 1):.3f} s per job; kernel busy {shown}")


if __name__ == "__main__":
    main(sys.argv[1])
