#!/usr/bin/env python3
"""Instructions of one kernel per source function and line, from `nvdisasm -g` (line info).

Static (how many instructions each line compiled to: code size, fetched cold once per CTA), or
with --profile the SASS source page of `scripts/device-check.sh profile` (ncu's CSV): each
instruction weighted by how often warps executed it, beside its share of the stall samples.
The listing must be of the profiled build: an instruction that differs at the same offset
stops it (exit 2). scripts/kernel-codesize.sh calls it on the cubin it builds.

Usage: scripts/sass-lines.py SASS KERNEL_SYMBOL [--profile CSV] [--top N]
Exit: 0 printed, 2 bad input (named on stderr).
"""
import argparse
import collections
import csv
import re
import sys

LINE_INFO = re.compile(r'//## File "([^"]+)", line (\d+)')
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


class BadInput(Exception):
    pass


def mnemonic(text):
    """The opcode of an instruction's text, after its predicate (`@P0`, `@!PT`)."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def kernel_instructions(path, kernel):
    """(offset, text, (file, line) or None) for each instruction of `kernel` in the listing."""
    try:
        sass = open(path).read()
    except OSError as error:
        raise BadInput(f"{path}: {error.strerror}")
    start = sass.find(".text.%s:" % kernel)
    if start < 0:
        raise BadInput(f"{path}: no kernel {kernel} (nvdisasm -g of the cubin that has it)")
    end = sass.find("\t.section", start + 10)
    where, out = None, []
    for text in sass[start:end if end > 0 else len(sass)].split("\n"):
        match = LINE_INFO.search(text)
        if match:
            where = (match.group(1), int(match.group(2)))
            continue
        match = INSTRUCTION.search(text)
        if match:
            out.append((int(match.group(1), 16), match.group(2), where))
    if not out:
        raise BadInput(f"{path}: kernel {kernel} has no instructions")
    return out


def profile_weights(path):
    """offset -> (executed, stall samples, text) from ncu's SASS source page CSV."""
    try:
        rows = list(csv.reader(open(path, newline="")))
    except OSError as error:
        raise BadInput(f"{path}: {error.strerror}")
    header = next((i for i, row in enumerate(rows[:3]) if row[:2] == ["Address", "Source"]), None)
    if header is None:
        raise BadInput(f"{path}: no 'Address','Source' header (ncu --page source --csv "
                       "--print-source sass)")
    names = rows[header]
    try:
        executed = names.index("Instructions Executed")
        samples = names.index("Warp Stall Sampling (All Samples)")
    except ValueError as error:
        raise BadInput(f"{path}: column missing: {error} (collect --section SourceCounters)")
    weights, base = {}, None
    for number, row in enumerate(rows[header + 1:], header + 2):
        try:
            address = int(row[0], 16)
            counts = tuple(int(row[i].replace(",", "") or 0) for i in (executed, samples))
        except (ValueError, IndexError):
            raise BadInput(f"{path}: line {number}: not an instruction row")
        base = address if base is None else base
        weights[address - base] = counts + (row[1].strip(),)
    if not weights:
        raise BadInput(f"{path}: no instruction rows")
    return weights


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sass")
    parser.add_argument("kernel")
    parser.add_argument("--profile", help="ncu's SASS source page as CSV")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    try:
        instructions = kernel_instructions(args.sass, args.kernel)
        weights = profile_weights(args.profile) if args.profile else None
    except BadInput as error:
        print(f"sass-lines: {error}", file=sys.stderr)
        return 2

    sources, starts = {}, {}

    def source_of(path):
        """The lines of a kernels/ file named by the line info (by its path below kernels/)."""
        if path not in sources:
            try:
                sources[path] = open("kernels/" + path.split("kernels/")[-1]).read().split("\n")
            except OSError:
                sources[path] = []
            starts[path] = [(i, m.group(1)) for i, line in enumerate(sources[path], 1)
                            if re.match(r"static (__device__|__global__)|^k_\w+\(", line)
                            for m in [re.search(r"(\w+)\(", line)] if m]
        return sources[path]

    def function_of(path, line):
        best = "?"
        for first, name in starts[path]:
            if first <= line:
                best = name
        return best

    functions, lines, stalls = collections.Counter(), collections.Counter(), collections.Counter()
    for offset, text, where in instructions:
        count, sampled = 1, 0
        if weights is not None:
            if offset not in weights or mnemonic(weights[offset][2]) != mnemonic(text):
                found = weights[offset][2] if offset in weights else "nothing"
                print(f"sass-lines: {args.profile}: offset {offset:#x} holds {found!r}, the "
                      f"listing {text!r}: the profile is of another build", file=sys.stderr)
                return 2
            count, sampled = weights[offset][:2]
        if where and "kernels/" in where[0] and source_of(where[0]):
            functions[function_of(where[0], where[1])] += count
            lines[where] += count
            stalls[where] += sampled
        else:
            name = where[0].split("/")[-1] if where else "?"
            functions[name] += count
            lines[(name, where[1] if where else 0)] += count
            stalls[(name, where[1] if where else 0)] += sampled
    total, total_stalls = sum(functions.values()), sum(stalls.values())
    what = "warp instructions executed" if weights is not None else "instructions"
    print(f"{total} {what} in {args.kernel}")
    for name, count in functions.most_common(args.top):
        print(f"{count:11d} {100 * count / total:5.1f}%  {name}")
    print("lines with the most " + what + (" (and their share of the stall samples)"
                                            if weights is not None else "") + ":")
    for (path, line), count in lines.most_common(args.top):
        name = path.split("kernels/")[-1]
        text = source_of(path)[line - 1].strip()[:60] if "kernels/" in path and \
            line <= len(source_of(path)) else ""
        stall = (f" {100 * stalls[(path, line)] / max(total_stalls, 1):5.1f}%"
                 if weights is not None else "")
        print(f"{count:11d} {100 * count / total:5.1f}%{stall}  {name}:{line}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
