#!/usr/bin/env bash
# Code bytes of each kernel of bitonic (kernels/backends/bitonic.cu and the kernels/bitonic/
# headers it includes) as built for sm_90 (the .text sections of a cubin), and with
# NVDISASM=path/to/nvdisasm the instructions of one kernel per source function and line
# (nvdisasm is not in Debian's CUDA packages; the pip wheel nvidia-cuda-nvdisasm has it). Why:
# the cluster kernel's code runs once per CTA, so it is fetched cold, and instruction fetch is
# its largest stall. With PROFILE_CSV=profile-...-source.csv (scripts/device-check.sh profile,
# the same sources) each instruction counts as often as warps executed it, beside its stall
# samples (scripts/sass-lines.py).
# Usage: scripts/kernel-codesize.sh [KERNEL_SYMBOL [-- NVCC_ARGS...]]
#   e.g. NVDISASM=/tmp/nvdisasm scripts/kernel-codesize.sh \
#            _Z14k_cluster_topkILj64ELj0ELb0EEv12topk_problemjj
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
python3 scripts/sass-lines.py "$work/all.sass" "$kernel" ${PROFILE_CSV:+--profile "$PROFILE_CSV"}
