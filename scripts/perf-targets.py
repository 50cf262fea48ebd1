#!/usr/bin/env python3
"""Checks `bitonic`'s standing speed targets (docs/PERF.md "Against the targets") on
`dsatopk-audit bench` JSON and scripts/bench_torch.py JSON of one run: prints, per target, met or
not, how many shapes meet it and the worst ones, then tables of the worst ratio per row count and
per row length.

The targets, each over every shape the files hold where both sides were measured:
  floor      bitonic's median within --floor-ratio (2) of the HBM floor, on shapes whose floor is
             at least --floor-min-us (4) microseconds;
  flashinfer the fastest FlashInfer mode measured on the shape (the least median of the fi-*
             backends) at least --flashinfer-ratio (2) times bitonic's median;
  torch      torch.topk at least --torch-ratio (5) times bitonic's median;
  small      bitonic at 16 x 131072 k 2048 within --small-us (10) microseconds.
Exit status: 0 when every target with shapes is met, 1 when one is not, 2 on unreadable input.

Usage: scripts/perf-targets.py BENCH.json [MORE.json ...]"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_json import describe, shape_key, shape_order  # noqa: E402

SMALL_SHAPE = (16, 131072, 2048)
WORST_LISTED = 3


def load(paths):
    """(family, rows, length, k) -> {backend: median_us}, and -> hbm_floor_us."""
    medians, floors = {}, {}
    for path in paths:
        with open(path) as source:
            results = json.load(source)["results"]
        for item in results:
            key = shape_key(item)
            if item.get("hbm_floor_us") is not None:
                floors.setdefault(key, item["hbm_floor_us"])
            if item.get("status") == "ok":
                medians.setdefault(key, {})[item["backend"]] = item["median_us"]
    return medians, floors


def fastest_flashinfer(row):
    times = [us for backend, us in row.items() if backend.startswith("fi-")]
    return min(times) if times else None


def evaluate(medians, floors, args):
    """[(name, rule text, [(value, key, met)])] for every target, values in its own unit."""
    floor, flashinfer, torch, small = [], [], [], []
    for key, row in medians.items():
        ours = row.get("bitonic")
        if ours is None:
            continue
        if floors.get(key, 0) >= args.floor_min_us:
            ratio = ours / floors[key]
            floor.append((ratio, key, ratio <= args.floor_ratio))
        fastest = fastest_flashinfer(row)
        if fastest is not None:
            flashinfer.append((fastest / ours, key, fastest / ours >= args.flashinfer_ratio))
        if "torch.topk" in row:
            ratio = row["torch.topk"] / ours
            torch.append((ratio, key, ratio >= args.torch_ratio))
        if key[1:] == SMALL_SHAPE:
            small.append((ours, key, ours <= args.small_us))
    rows, length, k = SMALL_SHAPE
    return [
        ("floor", f"bitonic / HBM floor <= {args.floor_ratio:g} where the floor is >= "
                  f"{args.floor_min_us:g} us", floor, max),
        ("flashinfer", f"fastest fi-* / bitonic >= {args.flashinfer_ratio:g}", flashinfer, min),
        ("torch", f"torch.topk / bitonic >= {args.torch_ratio:g}", torch, min),
        ("small", f"bitonic at {rows} x {length} k {k} <= {args.small_us:g} us", small, max),
    ]


def report(targets):
    """Prints the verdict of each target; returns whether all with shapes are met."""
    all_met = True
    for name, rule, values, worst in targets:
        if not values:
            print(f"- {name} ({rule}): no shapes measured")
            continue
        met = sum(1 for _, _, ok in values if ok)
        ok = met == len(values)
        all_met &= ok
        failing = sorted((v for v in values if not v[2]), key=lambda v: v[0],
                         reverse=worst is max)
        extreme = worst(values, key=lambda v: v[0])
        line = (f"- {name} ({rule}): {'met' if ok else 'NOT met'}, {met} of {len(values)} "
                f"shapes; worst {extreme[0]:.2f} ({describe(extreme[1])})")
        if failing:
            line += "; failing: " + ", ".join(f"{describe(key)} {value:.2f}"
                                              for value, key, _ in failing[:WORST_LISTED])
            if len(failing) > WORST_LISTED:
                line += f" and {len(failing) - WORST_LISTED} more"
        print(line)
    return all_met


def table_by(targets, field, title):
    """The worst value of the ratio targets per row count (field 1) or row length (field 2),
    over both families and every other dimension."""
    ratio_targets = [t for t in targets if t[0] != "small" and t[2]]
    groups = {}
    for name, _, values, worst in ratio_targets:
        for value, key, ok in values:
            cell = groups.setdefault(key[field], {}).setdefault(name, [None, 0, 0])
            cell[0] = value if cell[0] is None else worst(cell[0], value)
            cell[1] += ok
            cell[2] += 1
    if not groups:
        return
    names = [t[0] for t in ratio_targets]
    print(f"\n| {title} | " + " | ".join(f"{n}: worst (met / shapes)" for n in names) + " |")
    print("| --- | " + " | ".join("---" for _ in names) + " |")
    for group in sorted(groups):
        cells = []
        for name in names:
            cell = groups[group].get(name)
            cells.append("-" if cell is None else f"{cell[0]:.2f} ({cell[1]} / {cell[2]})")
        print(f"| {group} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floor-ratio", type=float, default=2.0)
    parser.add_argument("--floor-min-us", type=float, default=4.0)
    parser.add_argument("--flashinfer-ratio", type=float, default=2.0)
    parser.add_argument("--torch-ratio", type=float, default=5.0)
    parser.add_argument("--small-us", type=float, default=10.0)
    parser.add_argument("files", nargs="+", help="bench JSON files of one run")
    args = parser.parse_args()
    try:
        medians, floors = load(args.files)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"perf-targets: {error} (a `dsatopk-audit bench --out` file expected)",
              file=sys.stderr)
        sys.exit(2)
    families = sorted({key[0] for key in medians})
    shapes = sorted(medians, key=shape_order)
    print(f"{len(shapes)} shapes x families ({', '.join(families)}) in {len(args.files)} file(s)")
    targets = evaluate(medians, floors, args)
    all_met = report(targets)
    table_by(targets, 1, "B")
    table_by(targets, 2, "L")
    sys.exit(0 if all_met else 1)


if __name__ == "__main__":
    main()
