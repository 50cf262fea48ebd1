#!/usr/bin/env bash
# CI: a short, bounded run of every fuzz harness (scripts/fuzz.sh): 20 seconds or 200000
# executions each, whichever comes first, starting from the seed corpus and the regressions of
# tests/fuzz/. Needs clang (libFuzzer, ASan, UBSan). Fails on any crash, leak, sanitizer
# report or broken harness promise; the offending inputs stay in BUILD/fuzz-artifacts/.
#
#   scripts/ci-fuzz.sh [BUILD_DIR]        (default build-fuzz)
#
# FUZZ_SECONDS and FUZZ_RUNS override the bounds; the long campaign of docs/RELIABILITY.md is
# scripts/fuzz.sh -t 600.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
if ! command -v "${CC:-clang}" >/dev/null; then
    echo "ci-fuzz.sh: ${CC:-clang} not found (apt-get install clang)" >&2
    exit 2
fi
exec scripts/fuzz.sh -t "${FUZZ_SECONDS:-20}" -r "${FUZZ_RUNS:-200000}" -b "${1:-build-fuzz}"
