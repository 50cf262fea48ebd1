#!/usr/bin/env bash
# CI: the unit tests of the code that runs on several threads (src/common/host_threads.c, the host
# work of new outputs in src/replay/output_tally.c with the checks and hashes it calls, its thread beside the
# reps in src/replay/tally_queue.c, and the rows of the CPU reference and the census in src/reference/reference.c
# and src/reference/census.c) under ThreadSanitizer, in a clang build directory (default build-tsan). Any
# data race fails the test that showed it (halt_on_error), and so this script.
#
#   scripts/ci-tsan.sh [BUILD_DIR]
#
# Host code only, like scripts/ci-sanitize.sh; only the tests named below are built and run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${1:-build-tsan}
tests=(host_threads report tally_queue checks hash reference census)

if [ ! -f "$build/build.ninja" ]; then
    CC=${CC:-clang} meson setup "$build" -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug \
        >"$build.setup.log" 2>&1 || { cat "$build.setup.log" >&2; exit 2; }
    rm -f "$build.setup.log"
fi
ninja -C "$build" -j "${CI_BUILD_JOBS:-2}" "${tests[@]/#/tests/test_}" || exit 2

export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:print_summary=1}
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes "${CI_TEST_JOBS:-2}" \
    --timeout-multiplier 3 "${tests[@]}"
