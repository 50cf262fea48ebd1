#!/usr/bin/env bash
# Code bytes of each kernel of bitonic (kernels/backends/bitonic.cu and the kernels/bitonic/
# headers it includes) as built for sm_90 (the .text sections of a cubin), and with
# NVDISASM=path/to/nvdisasm the instructions of one kernel per source function and line
# (nvdisasm is not in Debian's CUDA packages; the pip wheel nvidia-cuda-nvdisasm has it). Why:
# the cluster kernel's code runs once per CTA, so it is fetched cold, and instruction fetch is
# its largest stall.
# Usage: scripts/kernel-codesize.sh [KERNEL_SYMBOL [-- NVCC_ARGS...]]
#   e.g. NVDISASM=/tmp/nvdisasm scripts/kernel-codesize.sh \
#            _Z14k_cluster_topkILj64ELj0EEv12topk_problemjj
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=${1:-}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nvcc -DNDEBUG -O3 '-DDSATOPK_VERSION="codesize"' -gencode arch=compute_90,code=sm_90 \
    --expt-relaxed-constexpr -Ikernels/include -Ikernels -lineinfo -cubin \
    -o "$work/bitonic.cubin" kernels/backends/bitonic.cu "$@"
python3 - "$work/bitonic.cubin" <<'PY'
import subprocess, sys
out = subprocess.run(["readelf", "-S", "-W", sys.argv[1]], capture_output=True, text=True).stdout
for line in out.splitlines():
    fields = line.replace("[ ", "[").split()
    for i, field in enumerate(fields):
        if field.startswith(".text."):
            print(f"{int(fields[i + 4], 16):8d} bytes  {field[6:]}")
PY
[ -n "$kernel" ] && [ -n "${NVDISASM:-}" ] || exit 0
"$NVDISASM" -g "$work/bitonic.cubin" >"$work/all.sass"
python3 - "$work/all.sass" "$kernel" <<'PY'
import collections, re, sys
sass = open(sys.argv[1]).read()
start = sass.index(".text.%s:" % sys.argv[2])
end = sass.find("//---------------------", start + 10)
sources, starts = {}, {}
def source_of(path):
    """The lines of a kernels/ file named by the line info (by its path below kernels/)."""
    if path not in sources:
        below = path.split("kernels/")[-1]
        try:
            sources[path] = open("kernels/" + below).read().split("\n")
        except OSError:
            sources[path] = []
        starts[path] = [(i, m.group(1)) for i, l in enumerate(sources[path], 1)
                        if re.match(r"static (__device__|__global__)|^k_\w+\(", l)
                        for m in [re.search(r"(\w+)\(", l)] if m]
    return sources[path]
def function_of(path, line):
    source_of(path)
    best = "?"
    for first, name in starts[path]:
        if first <= line:
            best = name
    return best
where, functions, lines = None, collections.Counter(), collections.Counter()
for text in sass[start:end].split("\n"):
    m = re.search(r'//## File "([^"]+)", line (\d+)', text)
    if m:
        where = (m.group(1), int(m.group(2)))
    elif re.search(r"/\*[0-9a-f]{4,}\*/", text):
        if where and "kernels/" in where[0] and source_of(where[0]):
            functions[function_of(where[0], where[1])] += 1
            lines[where] += 1
        else:
            functions[where[0].split("/")[-1] if where else "?"] += 1
print(f"{sum(functions.values())} instructions in {sys.argv[2]}")
for name, count in functions.most_common(20):
    print(f"{count:7d}  {name}")
print("lines with the most instructions:")
for (path, line), count in lines.most_common(20):
    name = path.split("kernels/")[-1]
    print(f"{count:7d}  {name}:{line}  {source_of(path)[line - 1].strip()[:70]}")
PY
