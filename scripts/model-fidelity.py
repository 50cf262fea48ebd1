#!/usr/bin/env python3
"""model-fidelity.py: our models of FlashInfer's top-k beside FlashInfer's own kernels, on the
shipped captures, the seed-harness captures and the SGLang #36807 shape (64 x 262144 random
rows, k 2048, in the seed captures), printed as the tables of docs/BACKENDS.md "Model fidelity".

Runs on a GPU machine, from the repository root (docs/BACKENDS.md says how; a few minutes of GPU
time):
  scripts/model-fidelity.py [--audit BINARY] [--seed-dir DIR] [--reps N] [--out DIR] [--no-order]

1. `scripts/make-seed-captures.sh SEED_DIR` when SEED_DIR holds no captures yet.
2. `run --reps N` with the models (radix, filtered, filtered-det) and the kernels (fi-auto,
   fi-det, fi-det-sorted, fi-graph-safe) on captures/ and SEED_DIR, under the default gemm noise:
   OUT/fidelity-report.json.
3. Unless --no-order: one more rep of each, no noise, with --dump-outputs, to see the order of
   backends that promise none (each non-paged row: index-ascending or not): OUT/dumps/.
4. `devices` for each record's shape: which path FlashInfer's heuristic takes on this device.
Prints, in markdown: per backend, what it showed over all records; per model and kernel pair,
the records where they behave differently; per record, each backend's distinct outputs, distinct
sets and wrong rows. Exit 0 when the tables were printed (the verdicts are data here), 2 when a
step could not run.

Words of the tables: tie rule, on records whose boundary ties straddle k (census
underdetermined rows) and without wrong rows: "smallest" (every rep selects the reference's set:
smallest indices win), "fixed" (one other set in every rep), "varies" (several sets). Order:
"canonical" (every rep equals the reference byte for byte), "index-ascending" (every row of the
dumped rep, non-paged records only), "other"."""
import argparse
import collections
import glob
import json
import os
import struct
import subprocess
import sys

MODELS = ["radix", "filtered", "filtered-det"]
KERNELS = ["fi-auto", "fi-det", "fi-det-sorted", "fi-graph-safe"]
# Which kernel each model stands for, and what they should share (docs/BACKENDS.md).
PAIRS = [("filtered", "fi-auto", "FilteredTopK, tie-break none"),
         ("filtered-det", "fi-graph-safe", "FilteredTopK, deterministic, tie-break small"),
         ("filtered-det", "fi-det-sorted", "the same set, sorted by value"),
         ("filtered-det", "fi-det", "deterministic, tie-break none")]


def run(command, allowed=(0, 1)):
    print("$ " + " ".join(command), file=sys.stderr, flush=True)
    completed = subprocess.run(command, stdout=sys.stderr)  # stdout is for the tables
    if completed.returncode not in allowed:
        sys.exit(f"model-fidelity: {command[0]} exited {completed.returncode}")


def record_key(record):
    return f"{os.path.basename(record['file'])}:{record['index']}"


def tie_rule(record, entry):
    census = record["census"]["census"][0]
    observed = entry.get("predicted_vs_observed") or {}
    wrong = observed.get("wrong_rows", 0)
    if census["underdetermined_rows"] == 0 or wrong or entry["status"] != "ok":
        return None
    reference = record["reference"]["set_sha256"]
    if all(h == reference for h in entry["set_sha256_per_rep"]):
        return "smallest"
    return "fixed" if entry["distinct_sets"] == 1 else "varies"


def ascending_rows(path, k):
    """Whether every row of a dumped output (int32 rows of k) is index-ascending before its -1
    padding."""
    with open(path, "rb") as handle:
        data = handle.read()
    count = len(data) // 4
    values = struct.unpack(f"<{count}i", data[:count * 4])
    for start in range(0, count, k):
        row = [v for v in values[start:start + k] if v >= 0]
        if any(a >= b for a, b in zip(row, row[1:])):
            return False
    return True


def order_of(record, entry, dumps):
    if entry["status"] != "ok":
        return None
    if entry["equals_reference_reps"] == entry["reps"] and entry["reps"]:
        return "canonical"
    if record["flags"]["page_table"]:
        return "-"
    stem = os.path.splitext(os.path.basename(record["file"]))[0]
    path = os.path.join(dumps, f"{stem}-r{record['index']}-{entry['name']}-rep00.bin")
    if not os.path.exists(path):
        return "?"
    return "index-ascending" if ascending_rows(path, record["k"]) else "other"


def fi_paths(audit, report):
    """FlashInfer's path per (rows, row stride, k), from `devices` on this device."""
    paths = {}
    for record in report["records"]:
        key = (record["rows"], record["row_stride"], record["k"])
        if key in paths:
            continue
        out = subprocess.run([audit, "devices", "--format", "json", "--rows", str(key[0]),
                              "--length", str(key[1]), "--k", str(key[2])],
                             capture_output=True, text=True)
        reasons = {}
        try:
            device = json.loads(out.stdout)["devices"][0]
            for backend in device["backends"]:
                reason = backend["decisions"][0]["reason"]
                reasons[backend["name"]] = ("FilteredTopK" if "FilteredTopK" in reason
                                            else "radix" if "radix" in reason else "refused")
        except (ValueError, KeyError, IndexError):
            pass
        paths[key] = reasons
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--audit", default=None)
    parser.add_argument("--seed-dir", default="/tmp/seed")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", default="/tmp/model-fidelity")
    parser.add_argument("--no-order", action="store_true")
    args = parser.parse_args()
    audit = args.audit or next((p for p in ("device-bundle/bin/dsatopk-audit",
                                            "build/src/dsatopk-audit") if os.path.exists(p)),
                               "dsatopk-audit")
    os.makedirs(args.out, exist_ok=True)
    if not glob.glob(os.path.join(args.seed_dir, "*.bin")):
        run(["scripts/make-seed-captures.sh", args.seed_dir, audit], allowed=(0,))
    backends = ",".join(MODELS + KERNELS)
    inputs = ["captures", args.seed_dir]
    report_path = os.path.join(args.out, "fidelity-report.json")
    run([audit, "run", "--quiet", "--reps", str(args.reps), "--backends", backends,
         "--out", report_path] + inputs)
    dumps = os.path.join(args.out, "dumps")
    if not args.no_order:
        os.makedirs(dumps, exist_ok=True)
        run([audit, "run", "--quiet", "--reps", "1", "--noise", "none", "--backends", backends,
             "--dump-outputs", dumps, "--out", os.path.join(args.out, "order-report.json")]
            + inputs)
    with open(report_path) as handle:
        report = json.load(handle)
    paths = fi_paths(audit, report)

    names = MODELS + KERNELS
    per_backend = {name: collections.Counter() for name in names}
    ties = {name: collections.Counter() for name in names}
    orders = {name: collections.Counter() for name in names}
    refusals = {name: collections.Counter() for name in names}
    rows = []
    entries = {}
    for record in report["records"]:
        key = record_key(record)
        census = record["census"]["census"][0]
        cells = []
        for entry in record["backends"]:
            name = entry["name"]
            entries[(key, name)] = entry
            counts = per_backend[name]
            if entry["status"] != "ok":
                refusals[name][entry["status"] + ": " + (entry["reason"] or "")[:90]] += 1
                counts["not run"] += 1
                cells.append(entry["status"])
                continue
            wrong = entry["predicted_vs_observed"]["wrong_rows"]
            counts["records"] += 1
            counts["outputs flap"] += entry["distinct_outputs"] > 1
            counts["sets flap"] += entry["distinct_sets"] > 1
            counts["wrong-set records"] += wrong > 0
            counts["wrong rows"] += wrong
            counts["fail"] += entry["verdict"] == "fail"
            rule = tie_rule(record, entry)
            if rule:
                ties[name][rule] += 1
            order = order_of(record, entry, dumps)
            if order:
                orders[name][order] += 1
            cells.append(f"{entry['distinct_outputs']}/{entry['distinct_sets']}/{wrong}"
                         + (" F" if entry["verdict"] == "fail" else ""))
        shape = (record["rows"], record["row_stride"], record["k"])
        path = paths.get(shape, {}).get("fi-auto", "?")
        rows.append(f"| {key} | {record['rows']} x {record['max_length']} | "
                    f"{census['underdetermined_rows']} | {path} | " + " | ".join(cells) + " |")

    device = report["context"]["device"] or {}
    print(f"Device: {device.get('name', 'none')}; {args.reps} reps under gemm noise; "
          f"{len(report['records'])} records.\n")
    print("| backend | records run | outputs flap | sets flap | wrong-set records (rows) | "
          "tie rule (underdetermined records) | order | fail | not run |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        c = per_backend[name]
        tie = ", ".join(f"{r} {n}" for r, n in ties[name].most_common()) or "-"
        order = ", ".join(f"{o} {n}" for o, n in orders[name].most_common()) or "-"
        print(f"| {name} | {c['records']} | {c['outputs flap']} | {c['sets flap']} | "
              f"{c['wrong-set records']} ({c['wrong rows']}) | {tie} | {order} | {c['fail']} | "
              f"{c['not run']} |")

    print("\nModel against kernel, record by record (same set: every rep of both selects one "
          "index set):\n")
    print("| model | kernel | what they share | records both ran | same set | same output | "
          "model flaps, kernel not | kernel flaps, model not | differing records |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, kernel, what in PAIRS:
        both = same_set = same_output = model_only = kernel_only = 0
        differing = []
        for record in report["records"]:
            key = record_key(record)
            a, b = entries.get((key, model)), entries.get((key, kernel))
            if not a or not b or a["status"] != "ok" or b["status"] != "ok":
                continue
            both += 1
            sets = set(a["set_sha256_per_rep"]) | set(b["set_sha256_per_rep"])
            outputs = set(a["output_sha256_per_rep"]) | set(b["output_sha256_per_rep"])
            same_set += len(sets) == 1
            same_output += len(outputs) == 1
            model_only += a["distinct_sets"] > 1 and b["distinct_sets"] == 1
            kernel_only += b["distinct_sets"] > 1 and a["distinct_sets"] == 1
            if len(sets) > 1 and len(differing) < 6:
                differing.append(key)
        print(f"| {model} | {kernel} | {what} | {both} | {same_set} | {same_output} | "
              f"{model_only} | {kernel_only} | {', '.join(differing) or '-'} |")

    print("\nPer record: distinct outputs / distinct sets / wrong rows (F: verdict fail); path: "
          "FlashInfer's choice for fi-auto on this device.\n")
    print("| record | shape | underdetermined rows | fi-auto path | " + " | ".join(names) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in names) + " |")
    print("\n".join(rows))

    print("\nRefusals and failures to run:")
    for name in names:
        for reason, count in refusals[name].most_common():
            print(f"- {name}: {count} record(s): {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
