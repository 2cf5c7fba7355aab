#!/usr/bin/env python3
"""Where each urgent job of a daemon run waited, from its timeline (`GET /timeline`).

For every job named on the command line, one line per partition: from the job's
queueing to its verification, split into the engine's stages:

  queue      Queued -> Dequeued            waiting for a synthesis worker
  admit      Dequeued -> Synthesis/Witness start   parameters and memory
  synth      synthesis (or witness) start -> end
  inputs     synthesis end -> InputsEnd    the kind's public inputs (0 where the
                                           timeline has no such span: before bfe9b8f)
  ready      inputs end -> the prover's start (host preparation start, else prove)
  prepare    PrepareStart -> PrepareEnd    host side, a staging slot taken
  device     PrepareEnd -> ProveStart      waiting for the device's turn
  prove      ProveStart -> ProveEnd        the compute region
  verify     ProveEnd -> Verified

usage: bench/urgent_waits.py TIMELINE.jsonl LABEL [LABEL ...]
       (LABEL: a job id or its first 8 hex digits, as `cuzk submit` prints them)
"""
import json
import sys


def main(path, labels):
    events = [json.loads(line) for line in open(path) if line.strip()]
    wanted = {label[:8] for label in labels}
    by_job = {}
    for e in events:
        if e["job"][:8] in wanted:
            by_job.setdefault(e["job"][:8], []).append(e)
    print("job       part  total_ms  queue  admit  synth inputs  ready prepare device  prove verify  lanes")
    for label in [label[:8] for label in labels]:
        evs = by_job.get(label)
        if not evs:
            print(f"{label}  (no events)")
            continue
        queued = min(e["t_us"] for e in evs if e["kind"] == "queued")
        parts = sorted({e["partition"] for e in evs if e.get("partition") is not None})
        for p in parts:
            pe = [e for e in evs if e.get("partition") == p]

            def at(*kinds):
                ts = [e["t_us"] for e in pe if e["kind"] in kinds]
                return min(ts) if ts else None

            marks = [
                queued,
                at("dequeued"),
                at("synthesis_start", "witness_start"),
                at("synthesis_end", "witness_end"),
                at("inputs_end") or at("synthesis_end", "witness_end"),
                at("prepare_start", "prove_start"),
                at("prepare_end") or at("prepare_start", "prove_start"),
                at("prove_start"),
                at("prove_end"),
                at("verified"),
            ]
            if any(m is None for m in marks):
                print(f"{label}  {p:4}  (incomplete: {[e['kind'] for e in pe]})")
                continue
            spans = [(b - a) / 1e3 for a, b in zip(marks, marks[1:])]
            lanes = ",".join(sorted({e["lane"] for e in pe if e["lane"]}))
            print(f"{label}  {p:4}  {(marks[-1] - marks[0]) / 1e3:8.1f} " + " ".join(f"{s:6.1f}" for s in spans) + f"  {lanes}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
