#!/usr/bin/env python3
"""Turns `dsatopk-audit bench` JSON (and scripts/bench_torch.py JSON) into the markdown table of
docs/PERF.md: microseconds per call (median) per shape, family and backend, with the HBM floor,
and optionally ratios of two backends' medians with their geomean, best and worst.

Usage: scripts/perf-table.py [--ratio A/B ...] BENCH.json [MORE.json ...]
  e.g. scripts/perf-table.py --ratio bitonic/radix --ratio torch.topk/bitonic docs/bench/h200.json

Files are read in order: a backend measured in two files keeps the later file's figure, a shape
the HBM floor of the first result that has one."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_json import ratio_summary, shape_key, shape_order  # noqa: E402


def load(path):
    with open(path) as source:
        return json.load(source)["results"]


def parse_ratio(text):
    numerator, slash, denominator = text.partition("/")
    if not slash or not numerator or not denominator:
        raise argparse.ArgumentTypeError(f"'{text}': expected BACKEND/BACKEND")
    return numerator, denominator


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratio", action="append", type=parse_ratio, default=[],
                        help="add a column A / B of two backends' medians (repeatable)")
    parser.add_argument("files", nargs="+", help="bench JSON files")
    args = parser.parse_args()
    results = []
    try:
        for path in args.files:
            results += load(path)
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"perf-table: {error} (a `dsatopk-audit bench --out` file expected)")

    backends = []
    table = {}
    floors = {}
    for item in results:
        key = shape_key(item)
        if item["backend"] not in backends:
            backends.append(item["backend"])
        if item.get("hbm_floor_us") is not None:  # bench_torch.py does not measure it
            floors.setdefault(key, item["hbm_floor_us"])
        table.setdefault(key, {})[item["backend"]] = (
            item["median_us"] if item.get("status") == "ok" else item.get("status", "?"))
    for numerator, denominator in args.ratio:
        for name in (numerator, denominator):
            if name not in backends:
                sys.exit(f"perf-table: --ratio: no results for backend '{name}'")

    ratio_names = [f"{a} / {b}" for a, b in args.ratio]
    print("| family | B x L | k | HBM floor us | " + " | ".join(backends + ratio_names) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in backends + ratio_names) + " |")
    ratios = [[] for _ in args.ratio]
    for key in sorted(table, key=shape_order):
        family, rows, length, k = key
        floor = f"{floors[key]:.2f}" if key in floors else "-"
        row = table[key]
        cells = [f"{row[b]:.2f}" if isinstance(row.get(b), float) else str(row.get(b, "-"))
                 for b in backends]
        for i, (numerator, denominator) in enumerate(args.ratio):
            a, b = row.get(numerator), row.get(denominator)
            if isinstance(a, float) and isinstance(b, float):
                ratios[i].append((a / b, key))
                cells.append(f"{a / b:.3f}")
            else:
                cells.append("-")
        print(f"| {family} | {rows} x {length} | {k} | {floor} | " + " | ".join(cells) + " |")

    for name, pairs in zip(ratio_names, ratios):
        if not pairs:
            continue
        print(f"\n{name}: " + ratio_summary(pairs))


if __name__ == "__main__":
    main()
