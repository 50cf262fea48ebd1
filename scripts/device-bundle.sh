#!/usr/bin/env bash
# Bundles what the GPU machine needs into device-bundle/ (ignored by git): the binary (with
# FlashInfer's kernels compiled in where its headers were found), its phase-timing twin, the
# GPU test programs and plugins, benchmarks and Debian's libcjson.so.1 (the GPU machine has no
# cJSON; libsodium is linked statically). Prints the `carry` list for the device tool.
# Usage: [DEVICE_VARIANTS="..."] scripts/device-bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
ninja -C "$build_dir" >/dev/null
rm -rf device-bundle
mkdir -p device-bundle/bin device-bundle/lib
cp "$build_dir/src/dsatopk-audit" device-bundle/bin/
# FlashInfer's kernels (fi-*) are compiled into the binary: the GPU machine needs no flashinfer
# package, but the build here needs its headers (docs/BACKENDS.md "FlashInfer's own kernels").
if "$build_dir/src/dsatopk-audit" devices --format json 2>/dev/null | python3 -c 'import json, sys
sys.exit(0 if any("not built" in b["limits"] for b in json.load(sys.stdin)["backends"]) else 1)'; then
    echo "device-bundle.sh: $build_dir has no FlashInfer kernels (fi-* not built): pip install" \
         "flashinfer-python, then meson setup --reconfigure $build_dir" >&2
fi
# The same with bitonic's phase timing (docs/PERF.md "Method"), for `device-check.sh phases`:
# built where the build directory has the option (meson configure BUILD_DIR -Dphase_timing=true).
if [ -f "$build_dir/src/dsatopk-audit-phases" ]; then
    cp "$build_dir/src/dsatopk-audit-phases" device-bundle/bin/
else
    echo "device-bundle.sh: no dsatopk-audit-phases in $build_dir (-Dphase_timing=true builds it)" >&2
fi
for program in "$build_dir"/tests/test_gpu_* "$build_dir"/tests/bench_* \
               "$build_dir"/tests/plugins/test_gpu_plugins; do
    [ -x "$program" ] && [ -f "$program" ] && cp "$program" device-bundle/bin/
done
# Experiment builds with kernel constants set by -D, named in DEVICE_VARIANTS (e.g. "s2" after
# meson setup build-s2 -Dcuda_args=-DCLUSTER_DIRECT_PARTS=4u), carried as dsatopk-audit-s2 and,
# so that a variant's kernels can be checked before they are timed, test_gpu_backends-s2.
for variant in ${DEVICE_VARIANTS:-}; do
    ninja -C "build-$variant" src/dsatopk-audit tests/test_gpu_backends >/dev/null
    cp "build-$variant/src/dsatopk-audit" "device-bundle/bin/dsatopk-audit-$variant"
    cp "build-$variant/tests/test_gpu_backends" "device-bundle/bin/test_gpu_backends-$variant"
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
# The device tool carries at most 64 MiB with the working tree, and the binaries with FlashInfer's
# kernels pass that: they travel as one xz archive (about a third of the size), unpacked there
# first: `tar -xJf device-pack/device-bundle.tar.xz && scripts/device-check.sh ...`.
rm -rf device-pack
mkdir -p device-pack
tar -cf - device-bundle | xz -T0 -6 >device-pack/device-bundle.tar.xz
du -sh device-pack >&2
echo '["device-pack"]'
