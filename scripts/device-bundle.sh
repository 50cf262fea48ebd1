#!/usr/bin/env bash
# Bundles what the GPU machine needs into device-bundle/ (ignored by git): the binary, the GPU
# test programs and plugins, benchmarks and Debian's libcjson.so.1 (the GPU machine has no cJSON; libsodium
# is linked statically). Prints the `carry` list for the device tool.
# Usage: scripts/device-bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
ninja -C "$build_dir" >/dev/null
rm -rf device-bundle
mkdir -p device-bundle/bin device-bundle/lib
cp "$build_dir/src/dsatopk-audit" device-bundle/bin/
for program in "$build_dir"/tests/test_gpu_* "$build_dir"/tests/bench_* \
               "$build_dir"/tests/plugins/test_gpu_plugins; do
    [ -x "$program" ] && [ -f "$program" ] && cp "$program" device-bundle/bin/
done
# A measurement build with the bitonic kernels' phase timing (kernels/phase_timing.cuh), when
# one was set up: meson setup build-phases -Dc_args=-DDSATOPK_PHASE_TIMING \
#   -Dcuda_args=-DDSATOPK_PHASE_TIMING
if [ -d build-phases ]; then
    ninja -C build-phases src/dsatopk-audit >/dev/null
    cp build-phases/src/dsatopk-audit device-bundle/bin/dsatopk-audit-phases
fi
# Experiment builds (kernel constants set with -D), when set up, e.g. build-s2:
# meson setup build-s2 -Dcuda_args=-DCLUSTER_SCATTER_PARTS=2u
for variant in s2; do
    if [ -d "build-$variant" ]; then
        ninja -C "build-$variant" src/dsatopk-audit >/dev/null
        cp "build-$variant/src/dsatopk-audit" "device-bundle/bin/dsatopk-audit-$variant"
    fi
done
mkdir -p device-bundle/plugins
cp "$build_dir"/tests/plugins/*.so device-bundle/plugins/
cjson=$(ldconfig -p | awk '/libcjson.so.1 /{found = $NF} END {print found}')
cp -L "$cjson" device-bundle/lib/libcjson.so.1
cat > device-bundle/env.sh <<'ENV'
# Source on the GPU machine from the repository root.
export LD_LIBRARY_PATH="$PWD/device-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PWD/device-bundle/bin:$PATH"
ENV
du -sh device-bundle >&2
echo '["device-bundle"]'
