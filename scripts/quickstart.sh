#!/usr/bin/env bash
# Sets up, builds, prints the census of the shipped captures, and runs the main job:
# `dsatopk-audit run` on them (JSON report and its HTML page).
# Without a GPU the census and the CPU reference hashes run and the GPU backends are reported
# unavailable with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh build
# What the scores alone say (no GPU needed): tie sets, plateaus, predicted staging overflow.
build/src/dsatopk-audit census --format table
# The audit: every backend replayed under a noisy sibling stream, checked against the reference.
exec build/src/dsatopk-audit run --out dsatopk-report.json --html dsatopk-report.html "$@"
