#!/usr/bin/env python3
"""torch.topk on the same shapes as `dsatopk-audit bench`, timed the same way: CUDA graph replay,
one input copy per launch, L2 overwritten before each replay, median per call over >= 100 replays.

Usage (on the GPU machine): scripts/bench_torch.py [--shapes 16x131072:2048,...] [--out FILE]
Writes JSON results with the schema of the bench command's (backend "torch.topk")."""
import argparse
import json
import statistics

import torch

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
    for rows, length, k in shapes:
        for family in args.families.split(","):
            timing = time_shape(family, rows, length, k, args.replays, l2_bytes, generator)
            results.append({"backend": "torch.topk", "family": family, "rows": rows,
                            "length": length, "k": k, "status": "ok", **timing})
            print(f"torch.topk    {family:7s} {rows:4d} x {length:<7d} {k:5d}  "
                  f"{timing['median_us']:10.2f}", flush=True)
    with open(args.out, "w") as out:
        json.dump({"schema": "dsatopk-audit/bench", "schema_version": 1,
                   "context": {"device": {"name": properties.name},
                               "torch_version": torch.__version__},
                   "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
