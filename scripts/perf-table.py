#!/usr/bin/env python3
"""Turns `dsatopk-audit bench` JSON (and scripts/bench_torch.py JSON) into the markdown table of
docs/PERF.md: microseconds per call (median) per shape, family and backend, with the HBM floor.

Usage: scripts/perf-table.py BENCH.json [TORCH.json]"""
import json
import sys


def load(path):
    with open(path) as source:
        return json.load(source)["results"]


def main():
    results = load(sys.argv[1])
    if len(sys.argv) > 2:
        results += load(sys.argv[2])
    backends = []
    table = {}
    floors = {}
    for item in results:
        key = (item["family"], item["rows"], item["length"], item["k"])
        if item["backend"] not in backends:
            backends.append(item["backend"])
        if "hbm_floor_us" in item:
            floors[key] = item["hbm_floor_us"]
        table.setdefault(key, {})[item["backend"]] = (
            f'{item["median_us"]:.1f}' if item.get("status") == "ok" else item.get("status", "?"))
    print("| family | B x L | k | HBM floor us | " + " | ".join(backends) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in backends) + " |")
    for key in sorted(table, key=lambda k: (k[0], k[1] * k[2], k[1], k[3])):
        family, rows, length, k = key
        floor = f"{floors[key]:.2f}" if key in floors else "-"
        cells = [table[key].get(backend, "-") for backend in backends]
        print(f"| {family} | {rows} x {length} | {k} | {floor} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
