#!/usr/bin/env python3
"""torch.topk on the same shapes as `dsatopk-audit bench`, timed the same way: CUDA graph replay,
one input copy per launch, L2 overwritten before each replay, median per call over >= 100 replays.

Usage (on the GPU machine): scripts/bench_torch.py [--shapes 16x131072:2048,...] [--out FILE]
Writes the bench command's document (dsatopk-audit/bench version 3,
docs/schemas/bench-3.schema.json) with backend "torch.topk"; what this script does not measure
(the HBM floor, the driver version) is null. A shape torch.topk fails on (an exception from
torch: k above the length, out of memory, a CUDA error) is a result with status "error" and
the reason; after a CUDA error that leaves the context unusable, the shapes left are errors
naming it. The document is written either way; the exit status is then 1."""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
METHOD = ("CUDA graph replay of torch.topk; per-call time = replay time / launches in the graph; "
          "median over replays; inputs rotated over > 2 x L2, L2 overwritten before each replay")

DEFAULT_SHAPES = [(b, l, k) for b in (1, 4, 16, 64) for l in (8192, 32768, 65536, 131072)
                  for k in (512, 2048)]


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        rows_length, k = item.split(":")
        rows, length = rows_length.split("x")
        shapes.append((int(rows), int(length), int(k)))
    return shapes


def make_scores(family, rows, length, generator):
    scores = torch.randn(rows, length, device="cuda", generator=generator)
    if family == "relu":
        scores = torch.relu(scores - 1.28) * 11.3
    return scores


def time_shape(family, rows, length, k, replays, l2_bytes, generator):
    input_bytes = rows * length * 4
    copies = max(2, -(-(2 * l2_bytes + 1) // input_bytes))
    base = make_scores(family, rows, length, generator)
    inputs = [base.clone() for _ in range(copies)]
    flush = torch.empty(2 * l2_bytes, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        torch.topk(inputs[0], k, dim=-1)  # warm-up outside capture
        start.record()
        for i in range(5):
            torch.topk(inputs[i % copies], k, dim=-1)
        stop.record()
    stop.synchronize()
    eager_us = start.elapsed_time(stop) * 1e3 / 5
    # Same sizing as `dsatopk-audit bench`: one launch per copy, replays of about 5 ms at most,
    # at least 20 launches.
    launches = copies
    if launches * eager_us > 5000:
        launches = int(5000 / eager_us)
    launches = max(20, launches)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(launches):
            torch.topk(inputs[i % copies], k, dim=-1)
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    samples = []
    for replay in range(replays):
        flush.fill_(replay & 0xFF)  # overwrite the L2 before every replay, untimed
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3 / launches)
    samples.sort()
    del graph, inputs, flush
    torch.cuda.empty_cache()
    return {"median_us": statistics.median(samples), "min_us": samples[0],
            "max_us": samples[-1], "replays": replays, "launches_per_replay": launches,
            "input_copies": copies}


def project_version():
    """meson.build's project version and the git revision of this checkout (None when unknown)."""
    version = "unknown"
    try:
        with open(os.path.join(ROOT, "meson.build"), encoding="utf-8") as handle:
            match = re.search(r"version:\s*'([^']+)'", handle.read())
        version = match.group(1) if match else version
    except OSError:
        pass
    try:
        revision = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                                  capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        revision = None
    return version, revision


def cuda_version_text(text):
    """'12.4.1' -> '12.4', as the tool writes versions; None when unknown."""
    match = re.match(r"(\d+)\.(\d+)", text or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None


def cuda_version_number(text):
    """'12.4' -> 12040, as CUDA encodes versions; None when unknown."""
    match = re.match(r"(\d+)\.(\d+)", text or "")
    return int(match.group(1)) * 1000 + int(match.group(2)) * 10 if match else None


def document(properties, results):
    """The bench document: the context block every document opens with, the device, results."""
    version, revision = project_version()
    return {
        "schema": "dsatopk-audit/bench", "schema_version": 3,
        "context": {
            "tool_version": version, "git_revision": revision,
            "version_string": f"{version} ({revision or 'no revision'}), "
                              f"bench_torch.py with torch {torch.__version__}",
            "command_line": " ".join(sys.argv),
            "utc_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": socket.gethostname(),
            "device": {
                "name": properties.name,
                "compute_capability": f"{properties.major}.{properties.minor}",
                "sm_count": properties.multi_processor_count,
                "smem_per_sm_bytes": getattr(properties, "shared_memory_per_multiprocessor",
                                             None),
                "l2_bytes": getattr(properties, "L2_cache_size", None),
                "driver_version": None,
                "runtime_version": cuda_version_text(torch.version.cuda),
                "driver_version_number": None,
                "runtime_version_number": cuda_version_number(torch.version.cuda),
                "copy_bandwidth_bytes_per_s": None, "empty_kernel_us": None,
                "clusters_at_once": None,
            },
            "method": METHOD,
        },
        "results": results,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes")
    parser.add_argument("--families", default="random,relu")
    parser.add_argument("--replays", type=int, default=100)
    parser.add_argument("--out", default="torch-bench.json")
    args = parser.parse_args()
    shapes = parse_shapes(args.shapes) if args.shapes else DEFAULT_SHAPES
    properties = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(properties, "L2_cache_size", 50 << 20)
    generator = torch.Generator(device="cuda").manual_seed(1)
    results = []
    broken = None  # why the CUDA context can no longer be used, once a shape broke it
    for rows, length, k in shapes:
        for family in args.families.split(","):
            result = {"backend": "torch.topk", "family": family, "rows": rows,
                      "length": length, "k": k, "hbm_floor_us": None}
            if broken:
                result.update(status="error", reason=f"not timed: {broken}")
            else:
                try:
                    timing = time_shape(family, rows, length, k, args.replays, l2_bytes,
                                        generator)
                    result.update(status="ok", **timing, ratio_to_floor=None)
                except RuntimeError as exc:  # torch's errors, CUDA's and out of memory
                    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    result.update(status="error", reason=f"torch.topk failed: {first_line}")
                    try:
                        torch.cuda.synchronize()
                    except RuntimeError:
                        broken = (f"{family} {rows} x {length} k {k} left the CUDA context "
                                  f"unusable ({first_line})")
            results.append(result)
            shown = (f"{result['median_us']:10.2f}" if result["status"] == "ok"
                     else result["reason"])
            print(f"torch.topk    {family:7s} {rows:4d} x {length:<7d} {k:5d}  {shown}",
                  flush=True)
    with open(args.out, "w") as out:
        json.dump(document(properties, results), out, indent=1)
    return 1 if any(r["status"] != "ok" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
