#!/usr/bin/env bash
# Inputs that are not regular files: a FIFO without a writer given to every command that reads a
# file (captures, .npy / .safetensors arrays, reports, baselines, verdicts, policies, metadata
# @FILE, plugins) must be refused at once, exit 3, with a message naming the file and saying it is a FIFO
# (open() of a FIFO waits for a writer: each command runs under `timeout`, so a hang fails the
# test instead of stalling it). A directory and a character device are refused the same way.
. "$(dirname "$0")/lib.sh"

LIMIT=10
CAPTURE="$TMP/small.bin"
if "$AUDIT" synth -f tie -b 4 -L 512 -k 16 --ties 8 -o "$CAPTURE" >"$TMP/synth.log" 2>&1 &&
    "$AUDIT" run --quiet --reps 2 --out "$TMP/report.json" --baseline-out "$TMP/baseline.json" \
        "$CAPTURE" >"$TMP/run.log" 2>&1 &&
    "$AUDIT" gate --baseline "$TMP/baseline.json" --out "$TMP/verdict.json" "$TMP/report.json" \
        >"$TMP/gate.log" 2>&1
then
    pass "a capture, a report, a baseline and a verdict to pair with the FIFO"
else
    # gate may fail the CPU-only report (exit 1): the verdict is still written.
    if [ -s "$TMP/verdict.json" ] && [ -s "$TMP/baseline.json" ]; then
        pass "a capture, a report, a baseline and a verdict to pair with the FIFO"
    else
        fail "fixtures"; cat "$TMP/synth.log" "$TMP/run.log" "$TMP/gate.log"; finish; exit 1
    fi
fi
echo '{"schema": "dsatopk-audit/policy", "schema_version": 1}' >"$TMP/policy.json"
need_python_with_numpy
"$PYTHON" - "$TMP/scores.npy" <<'EOF'
import sys, numpy as np
np.save(sys.argv[1], np.arange(32, dtype=np.float32).reshape(2, 16))
EOF

FIFO="$TMP/fifo"
mkfifo "$FIFO"

# refused DESCRIPTION KIND-PATTERN -- command...: exit 3 within $LIMIT s, stderr names the file
# and what it is.
refused() {
    local what=$1 kind=$2
    shift 3
    timeout "$LIMIT" "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    if [ "$got" -eq 124 ]; then
        fail "$what: still waiting after ${LIMIT}s (killed)"
    elif [ "$got" -ne 3 ]; then
        fail "$what: exit $got, wanted 3"; sed 's/^/    stderr: /' "$TMP/err" | head -5
    elif ! grep -qE -- "$kind" "$TMP/err"; then
        fail "$what: stderr does not say /$kind/"; sed 's/^/    stderr: /' "$TMP/err" | head -5
    else
        pass "$what (exit 3, $(grep -oE -- "$kind" "$TMP/err" | head -1))"
    fi
}

F="fifo: is a FIFO, not a regular file"
refused "inspect --verify FIFO" "$F" -- "$AUDIT" inspect --verify "$FIFO"
refused "census FIFO" "$F" -- "$AUDIT" census -o "$TMP/census.json" "$FIFO"
refused "diff FIFO CAPTURE" "$F" -- "$AUDIT" diff "$FIFO" "$CAPTURE"
refused "diff CAPTURE FIFO" "$F" -- "$AUDIT" diff "$CAPTURE" "$FIFO"
refused "extract FIFO" "$F" -- "$AUDIT" extract "$FIFO" --records 0 -o "$TMP/x.bin"
refused "extract --from-report FIFO" "$F" -- \
    "$AUDIT" extract "$CAPTURE" --from-report "$FIFO" -o "$TMP/x.bin"
refused "run FIFO" "$F" -- "$AUDIT" run --quiet --reps 1 --out "$TMP/r.json" "$FIFO"
refused "run --plugin FIFO" "$F" -- \
    "$AUDIT" run --quiet --reps 1 --plugin "$FIFO" --out "$TMP/r.json" "$CAPTURE"
refused "gate --baseline FIFO" "$F" -- "$AUDIT" gate --baseline "$FIFO" "$TMP/report.json"
refused "gate with a FIFO as report" "$F" -- \
    "$AUDIT" gate --baseline "$TMP/baseline.json" "$FIFO"
refused "gate --policy FIFO" "$F" -- \
    "$AUDIT" gate --baseline "$TMP/baseline.json" --policy "$FIFO" "$TMP/report.json"
refused "merge FIFO" "$F" -- "$AUDIT" merge -o "$TMP/merged.json" "$FIFO" "$TMP/report.json"
refused "report FIFO" "$F" -- "$AUDIT" report -o "$TMP/page.html" "$FIFO"
refused "report --gate FIFO" "$F" -- \
    "$AUDIT" report --gate "$FIFO" -o "$TMP/page.html" "$TMP/report.json"
refused "import --scores FIFO" "$F" -- "$AUDIT" import --scores "$FIFO" --k 4 -o "$TMP/i.bin"
refused "import --lengths FIFO" "$F" -- \
    "$AUDIT" import --scores "$TMP/scores.npy" --lengths "$FIFO" --k 4 -o "$TMP/i.bin"
refused "import --metadata @FIFO" "$F" -- \
    "$AUDIT" import --scores "$TMP/scores.npy" --metadata "@$FIFO" --k 4 -o "$TMP/i.bin"

# ---- other files that are not files -------------------------------------------------------------
mkdir "$TMP/dir"
refused "inspect of a directory" "dir: is a directory, not a regular file" -- \
    "$AUDIT" inspect "$TMP/dir"
refused "report of a directory" "dir: is a directory, not a regular file" -- \
    "$AUDIT" report -o "$TMP/page.html" "$TMP/dir"
refused "inspect of a character device" "/dev/null: is a character device" -- \
    "$AUDIT" inspect --verify /dev/null
refused "gate --baseline of a character device" "/dev/null: is a character device" -- \
    "$AUDIT" gate --baseline /dev/null "$TMP/report.json"
refused "import --scores of a character device" "/dev/zero: is a character device" -- \
    "$AUDIT" import --scores /dev/zero --k 4 -o "$TMP/i.bin"

# Nothing was written by the refused commands that write all or nothing (census and run record
# the unreadable input in their documents).
LEFT=$(cd "$TMP" && ls -d x.bin merged.json page.html i.bin 2>/dev/null)
if [ -z "$LEFT" ]; then pass "no refused command left an output behind"
else fail "refused commands wrote: $LEFT"; fi

finish
