#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite: unit, command-line and GPU suites (the GPU
# suite skips with exit 77 where there is no CUDA device). Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh build || exit $?
meson test -C build --print-errorlogs --num-processes 2 "$@"
status=$?
python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
counts = {}
for line in open(sys.argv[1]):
    result = json.loads(line)["result"]
    counts[result] = counts.get(result, 0) + 1
passed = counts.get("OK", 0)
skipped = counts.get("SKIP", 0)
failed = sum(v for k, v in counts.items() if k not in ("OK", "SKIP"))
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
