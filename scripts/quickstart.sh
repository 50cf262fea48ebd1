#!/usr/bin/env bash
# Sets up, builds, and runs the main job: `dsatopk-audit run` on the shipped captures.
# Without a GPU the census and the CPU reference hashes run and the GPU backends are reported
# unavailable with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh build
exec build/src/dsatopk-audit run --out dsatopk-report.json "$@"
