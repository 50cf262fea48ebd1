"""What scripts/perf-table.py and scripts/bench-compare.py share about `dsatopk-audit bench` JSON:
a result's shape key, the order shapes are listed in, and the summary of per-shape ratios."""
import math


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
