"""What scripts/perf-table.py, bench-compare.py and perf-targets.py share about `dsatopk-audit
bench` JSON: a result's shape key, the order shapes are listed in, and the summary of per-shape
ratios; run as a script, it merges the documents of one run's parts (`merge OUT PART...`)."""
import json
import math
import sys


def shape_key(item):
    """(family, rows, length, k) of one result."""
    return (item["family"], item["rows"], item["length"], item["k"])


def shape_order(key):
    """Sort key: by family, then by elements per call, rows and k."""
    family, rows, length, k = key
    return (family, rows * length, rows, k)


def describe(key):
    family, rows, length, k = key
    return f"{family} {rows} x {length} k {k}"


def ratio_summary(pairs, low_word="lowest", high_word="highest"):
    """'geomean G over N shapes, lowest R (shape), highest R (shape)' of (ratio, key) pairs."""
    geomean = math.exp(sum(math.log(r) for r, _ in pairs) / len(pairs))
    low, high = min(pairs), max(pairs)
    return (f"geomean {geomean:.3f} over {len(pairs)} shapes, "
            f"{low_word} {low[0]:.3f} ({describe(low[1])}), "
            f"{high_word} {high[0]:.3f} ({describe(high[1])})")


def merge(out_path, paths):
    """One document of several of one run (the parts of scripts/device-check.sh grid): the first
    file's schema and context, every file's results in order. Writes OUT, which must not exist."""
    documents = []
    for path in paths:
        with open(path) as source:
            documents.append(json.load(source))
    merged = dict(documents[0])
    merged["results"] = [item for document in documents for item in document["results"]]
    with open(out_path, "x") as sink:
        json.dump(merged, sink, indent=1)
        sink.write("\n")
    return len(merged["results"])


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "merge":
        sys.exit("usage: scripts/bench_json.py merge OUT.json PART.json [PART.json ...]")
    try:
        count = merge(sys.argv[2], sys.argv[3:])
    except (OSError, ValueError, KeyError, IndexError) as error:
        sys.exit(f"bench_json.py merge: {error}")
    print(f"{sys.argv[2]}: {count} results from {len(sys.argv) - 3} file(s)")
