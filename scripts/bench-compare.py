#!/usr/bin/env python3
"""Compares `dsatopk-audit bench` JSON files of one backend, shape by shape: each file's median
microseconds and its ratio to the first file's, then the geomean, best and worst ratio of each.
For A/B runs of two builds (scripts/device-check.sh bench-ab, docs/PERF.md): the first file is
the baseline. Shapes missing from the baseline, or not measured ("status" other than "ok"), are
listed apart and left out of the summary.

Usage: scripts/bench-compare.py [--backend NAME] BASELINE.json OTHER.json [OTHER.json ...]"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_json import ratio_summary, shape_key, shape_order  # noqa: E402


def load(path, backend):
    """(family, rows, length, k) -> median microseconds, or the status where not measured."""
    with open(path) as source:
        results = json.load(source)["results"]
    table = {}
    for item in results:
        if item.get("backend") != backend:
            continue
        table[shape_key(item)] = item["median_us"] if item.get("status") == "ok" else item.get("status", "?")
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="bitonic", help="backend to compare (bitonic)")
    parser.add_argument("files", nargs="+", help="bench JSON files, the baseline first")
    args = parser.parse_args()
    if len(args.files) < 2:
        parser.error("give a baseline and at least one file to compare with it")
    try:
        tables = [load(path, args.backend) for path in args.files]
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"bench-compare: {error} (a `dsatopk-audit bench --out` file expected)")
    names = [os.path.basename(path) for path in args.files]
    if not tables[0]:
        sys.exit(f"{args.files[0]}: no results for backend {args.backend}")

    print("| family | B x L | k | " + " | ".join(f"{n} us" for n in names) + " | " +
          " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in range(2 * len(names) - 1)) + " |")
    ratios = [[] for _ in names[1:]]
    skipped = []
    for key in sorted(tables[0], key=shape_order):
        values = [table.get(key, "missing") for table in tables]
        if not all(isinstance(v, float) for v in values):
            skipped.append((key, values))
            continue
        cells = [f"{v:.2f}" for v in values]
        for i, value in enumerate(values[1:]):
            ratios[i].append((value / values[0], key))
            cells.append(f"{value / values[0]:.3f}")
        family, rows, length, k = key
        print(f"| {family} | {rows} x {length} | {k} | " + " | ".join(cells) + " |")

    print()
    for name, pairs in zip(names[1:], ratios):
        if not pairs:
            print(f"{name}: no shape measured in both")
            continue
        print(f"{name} / {names[0]}: " + ratio_summary(pairs, "best", "worst"))
    for key, values in skipped:
        print(f"not compared: {key[0]} {key[1]} x {key[2]} k {key[3]}: {values}")


if __name__ == "__main__":
    main()
