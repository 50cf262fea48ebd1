#!/usr/bin/env bash
# CI: the whole CPU test suite (suites unit and cli) under AddressSanitizer and
# UndefinedBehaviorSanitizer, in a second build directory (default build-asan). Any sanitizer
# report fails the test that triggered it (halt_on_error), and so this script.
#
#   scripts/ci-sanitize.sh [BUILD_DIR]
#
# Host code only: nvcc compiles the kernels' host side with the same flags, device code is not
# instrumented (compute-sanitizer covers it on a GPU machine, docs/RELIABILITY.md). The GPU
# suite is not run here.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${1:-build-asan}

if [ ! -f "$build/build.ninja" ]; then
    # -Dflashinfer=disabled: FlashInfer's translation unit compiles for over a minute, and the
    # main build's suites already test the fi entries as built.
    meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug \
        -Dflashinfer=disabled \
        >"$build.setup.log" 2>&1 || { cat "$build.setup.log" >&2; exit 2; }
    rm -f "$build.setup.log"
fi
ninja -C "$build" -j "${CI_BUILD_JOBS:-2}" || exit 2

# detect_leaks: leaks fail too. protect_shadow_gap=0: the CUDA driver maps memory where ASan
# keeps its shadow gap (only matters on a machine with a GPU, harmless elsewhere).
asan=detect_leaks=1:halt_on_error=1:abort_on_error=1:protect_shadow_gap=0:print_summary=1
ubsan=halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-$asan}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-$ubsan}
meson test -C "$build" --suite unit --suite cli --print-errorlogs \
    --num-processes "${CI_TEST_JOBS:-2}" --timeout-multiplier 3
status=$?
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {}
for line in open(sys.argv[1]):
    result = json.loads(line)["result"]
    counts[result] = counts.get(result, 0) + 1
failed = sum(v for k, v in counts.items() if k not in ("OK", "SKIP"))
print(f"sanitizers: {counts.get('OK', 0)} passed, {failed} failed, {counts.get('SKIP', 0)} skipped")
PY
exit $status
