#!/usr/bin/env bash
# Outputs are written, never clobbered (src/common/output_file.h): a character device given as
# the output of every writer stays a device (as root a rename would replace it with a regular
# file; the test uses a private device node, never the real /dev/null, when it runs as root); a
# FIFO output is written through to its reader; a symbolic link keeps pointing at its target,
# which gets the new content; an existing file keeps its mode (600, 444); a writer killed with
# SIGKILL in the middle of writing leaves the old file intact and no temporary file; a file-size
# limit (ulimit -f) rolls back like a full disk, in replace and append mode, with a message that
# names OUT and says "writing" (replace) or "appending" (append). Each command runs under timeout.
. "$(dirname "$0")/lib.sh"

LIMIT=60
T() { timeout "$LIMIT" "$@"; }
CAPTURE="$TMP/small.bin"
if T "$AUDIT" synth -f tie -b 4 -L 512 -k 16 --ties 8 -o "$CAPTURE" >"$TMP/synth.log" 2>&1 &&
    T "$AUDIT" run --quiet --reps 2 --out "$TMP/report.json" --baseline-out "$TMP/baseline.json" \
        "$CAPTURE" >"$TMP/run.log" 2>&1 &&
    T "$AUDIT" run --quiet --reps 1 --shard 0/1 --out "$TMP/shard.json" "$CAPTURE" >>"$TMP/run.log" 2>&1
then
    pass "a capture, a report, a shard report and a baseline"
else
    fail "fixtures"; cat "$TMP/synth.log" "$TMP/run.log"; finish; exit 1
fi
need_python_with_numpy
"$PYTHON" - "$TMP/scores.npy" <<'EOF'
import sys, numpy as np
np.save(sys.argv[1], np.arange(512, dtype=np.float32).reshape(2, 256))
EOF

# Every writer, given OUT: "NAME|command line with OUT" (eval'ed with OUT set).
WRITERS=(
    "synth|\"\$AUDIT\" synth -f random -b 2 -L 256 -k 4 -o \"\$OUT\""
    "import|\"\$AUDIT\" import --scores \"$TMP/scores.npy\" --k 4 -o \"\$OUT\""
    "extract|\"\$AUDIT\" extract \"$CAPTURE\" --records 0 --rows 0 -o \"\$OUT\""
    "inspect -o|\"\$AUDIT\" inspect --format json -o \"\$OUT\" \"$CAPTURE\""
    "census -o|\"\$AUDIT\" census -o \"\$OUT\" \"$CAPTURE\""
    "diff -o|\"\$AUDIT\" diff --format json -o \"\$OUT\" \"$CAPTURE\" \"$CAPTURE\""
    "run --out|\"\$AUDIT\" run --quiet --reps 1 --out \"\$OUT\" \"$CAPTURE\""
    "run --baseline-out|\"\$AUDIT\" run --quiet --reps 1 --out \"$TMP/r2.json\" --baseline-out \"\$OUT\" \"$CAPTURE\""
    "run --html|\"\$AUDIT\" run --quiet --reps 1 --out \"$TMP/r3.json\" --html \"\$OUT\" \"$CAPTURE\""
    "gate --out|\"\$AUDIT\" gate --baseline \"$TMP/baseline.json\" --out \"\$OUT\" \"$TMP/report.json\""
    "merge -o|\"\$AUDIT\" merge -o \"\$OUT\" \"$TMP/shard.json\""
    "report -o|\"\$AUDIT\" report -o \"\$OUT\" \"$TMP/report.json\""
    "compare -o|\"\$AUDIT\" compare --format json -o \"\$OUT\" \"$CAPTURE\" \"$CAPTURE\""
    "compare --html|\"\$AUDIT\" compare -o /dev/null --html \"\$OUT\" \"$CAPTURE\" \"$CAPTURE\""
)
# run_writer ENTRY OUT: runs the writer (exit 0, or 1 for gate, whose verdict may fail on a
# CPU-only report: the output is what counts).
run_writer() {
    local name=${1%%|*} command=${1#*|}
    OUT=$2
    T bash -c "AUDIT='$AUDIT'; OUT='$OUT'; $command" >"$TMP/out" 2>"$TMP/err"
}

# ---- a character device stays a device --------------------------------------------------------
if [ "$(id -u)" -eq 0 ] && mknod "$TMP/null" c 1 3 2>/dev/null; then
    DEVICE="$TMP/null"
else
    DEVICE=/dev/null # not root: nobody can replace it, the write-through is still checked
fi
for entry in "${WRITERS[@]}"; do
    name=${entry%%|*}
    run_writer "$entry" "$DEVICE"
    status=$?
    kind=$(stat -c %F "$DEVICE")
    if [ "$kind" = "character special file" ] && { [ "$status" -eq 0 ] || [ "$status" -eq 1 ]; }; then
        pass "$name to a character device: still a device (exit $status)"
    else
        fail "$name to a character device: now a $kind (exit $status)"; head -3 "$TMP/err"
        rm -f "$DEVICE"; [ "$DEVICE" = "$TMP/null" ] && mknod "$DEVICE" c 1 3
    fi
done

# ---- a FIFO gets the bytes --------------------------------------------------------------------
mkfifo "$TMP/fifo"
T cat "$TMP/fifo" >"$TMP/from_fifo.bin" &
reader=$!
run_writer "${WRITERS[0]}" "$TMP/fifo"
wait "$reader"
if [ -p "$TMP/fifo" ] && T "$AUDIT" inspect --verify "$TMP/from_fifo.bin" >/dev/null 2>&1; then
    pass "synth to a FIFO: the reader got a capture that verifies, the FIFO is still a FIFO"
else
    fail "synth to a FIFO"; ls -la "$TMP/fifo"; head -3 "$TMP/err"
fi
T cat "$TMP/fifo" >"$TMP/from_fifo.json" &
reader=$!
run_writer "${WRITERS[4]}" "$TMP/fifo"
wait "$reader"
json_check "$TMP/from_fifo.json" 'j["schema"] == "dsatopk-audit/census"' "census -o FIFO: the reader got the document"

# ---- a symbolic link is followed ---------------------------------------------------------------
mkdir "$TMP/real" "$TMP/links"
for entry in "${WRITERS[0]}" "${WRITERS[4]}" "${WRITERS[11]}"; do
    name=${entry%%|*}
    echo old >"$TMP/real/target"
    rm -f "$TMP/links/out"
    ln -s ../real/target "$TMP/links/out"
    run_writer "$entry" "$TMP/links/out"
    if [ -L "$TMP/links/out" ] && [ "$(readlink "$TMP/links/out")" = "../real/target" ] &&
        ! grep -qx old "$TMP/real/target" && [ -s "$TMP/real/target" ]; then
        pass "$name through a relative symbolic link: link kept, target replaced"
    else
        fail "$name through a symbolic link"; ls -la "$TMP/links" "$TMP/real"; head -3 "$TMP/err"
    fi
done
rm -f "$TMP/real/new" "$TMP/links/dangling"
ln -s "$TMP/real/new" "$TMP/links/dangling"
run_writer "${WRITERS[4]}" "$TMP/links/dangling"
if [ -L "$TMP/links/dangling" ] && [ -s "$TMP/real/new" ]; then
    pass "a dangling symbolic link: its target is created, the link kept"
else
    fail "a dangling symbolic link"; ls -la "$TMP/links" "$TMP/real"
fi

# ---- the mode of an existing file is kept -----------------------------------------------------
for mode in 600 444 640; do
    for entry in "${WRITERS[0]}" "${WRITERS[4]}"; do
        name=${entry%%|*}
        echo old >"$TMP/moded"
        chmod "$mode" "$TMP/moded"
        run_writer "$entry" "$TMP/moded"
        got=$(stat -c %a "$TMP/moded")
        if [ "$got" = "$mode" ] && ! grep -qx old "$TMP/moded"; then
            pass "$name over a mode $mode file: replaced, mode $got kept"
        else
            fail "$name over a mode $mode file: mode $got"; head -3 "$TMP/err"
        fi
    done
done

# ---- SIGKILL in the middle of a replacement ----------------------------------------------------
# A large record (64 MiB) makes the write and fsync long enough to be caught: the writer is killed
# as soon as it holds a file open in the output's directory other than the old file.
mkdir "$TMP/kill"
OLD="$TMP/kill/out.bin"
T "$AUDIT" synth -f random -b 2 -L 64 -k 4 -o "$OLD" >/dev/null 2>&1
cp "$OLD" "$TMP/old.bin"
caught=0
for attempt in 1 2 3; do
    "$AUDIT" synth -f random -b 64 -L 262144 -k 4 -o "$OLD" >/dev/null 2>&1 &
    writer=$!
    for _ in $(seq 1 4000); do
        open=$(ls -l "/proc/$writer/fd" 2>/dev/null | grep -F "$TMP/kill/" | grep -vF -- "-> $OLD" || true)
        [ -n "$open" ] && break
        kill -0 "$writer" 2>/dev/null || break
        sleep 0.005
    done
    kill -9 "$writer" 2>/dev/null
    wait "$writer" 2>/dev/null
    if [ -n "$open" ]; then caught=1; break; fi
    cp "$TMP/old.bin" "$OLD"
done
left=$(ls -A "$TMP/kill")
if [ "$caught" -eq 1 ] && [ "$left" = "out.bin" ] && cmp -s "$OLD" "$TMP/old.bin"; then
    pass "kill -9 while writing: the old file intact, nothing else in the directory"
elif [ "$caught" -eq 0 ]; then
    fail "the writer was never caught with its temporary open"
else
    fail "kill -9 while writing left: $left (old file intact: $(cmp -s "$OLD" "$TMP/old.bin" && echo yes || echo no))"
    echo "    the writer had open: $open"
fi

# ---- ulimit -f rolls back -----------------------------------------------------------------------
cp "$TMP/old.bin" "$TMP/limited.bin"
(ulimit -f 64; T "$AUDIT" synth -f random -b 4 -L 65536 -k 4 -o "$TMP/limited.bin") >"$TMP/out" 2>"$TMP/err"
status=$?
if [ "$status" -eq 3 ] && cmp -s "$TMP/limited.bin" "$TMP/old.bin" &&
    grep -qE "limited\.bin: writing failed after [0-9]+ bytes: File too large; the file is unchanged" "$TMP/err" &&
    ! grep -q '\.tmp' "$TMP/err" && [ "$(ls -A "$TMP" | grep -c '\.tmp')" -eq 0 ]; then
    pass "ulimit -f while replacing: exit 3, old file intact, message names OUT and says writing"
else
    fail "ulimit -f while replacing: exit $status"; sed 's/^/    stderr: /' "$TMP/err"
fi
(ulimit -f 64; T "$AUDIT" synth -f random -b 4 -L 65536 -k 4 --append -o "$TMP/limited.bin") >"$TMP/out" 2>"$TMP/err"
status=$?
if [ "$status" -eq 3 ] && cmp -s "$TMP/limited.bin" "$TMP/old.bin" &&
    grep -qE "limited\.bin: appending failed after [0-9]+ of [0-9]+ bytes: File too large; the file is back to its [0-9]+ bytes" "$TMP/err"; then
    pass "ulimit -f while appending: exit 3, the partial record taken back"
else
    fail "ulimit -f while appending: exit $status"; sed 's/^/    stderr: /' "$TMP/err"
    T "$AUDIT" inspect "$TMP/limited.bin" 2>&1 | tail -2 | sed 's/^/    /'
fi
(ulimit -f 1; T "$AUDIT" census -o "$TMP/census.json" "$CAPTURE") >"$TMP/out" 2>"$TMP/err"
status=$?
if [ "$status" -ne 0 ] && [ ! -e "$TMP/census.json" ] && grep -q "census.json: writing failed" "$TMP/err"; then
    pass "ulimit -f on a JSON writer: exit $status, no partial document"
else
    fail "ulimit -f on a JSON writer: exit $status"; sed 's/^/    stderr: /' "$TMP/err"
fi

# Every writer in replace mode, its output over a 1 KiB file-size limit (ulimit -f 1): exit 3, the old file
# as it was, and a message that names the file written (OUT, or the run's report written before
# it) with "writing", never a temporary name or "appending".
for entry in "${WRITERS[@]}"; do
    name=${entry%%|*}
    printf 'old\n' >"$TMP/limited.out"
    (ulimit -f 1; run_writer "$entry" "$TMP/limited.out")
    status=$?
    if [ "$status" -eq 3 ] && [ "$(cat "$TMP/limited.out")" = old ] &&
        grep -qE "(limited\.out|r[23]\.json): writing failed after [0-9]+ bytes: File too large" "$TMP/err" &&
        ! grep -qE '\.tmp|appending' "$TMP/err"; then
        pass "$name over ulimit -f: exit 3, the old file kept, the message names it and says writing"
    else
        fail "$name over ulimit -f: exit $status, $(stat -c %s "$TMP/limited.out") bytes now"
        sed 's/^/    stderr: /' "$TMP/err" | head -5
    fi
done
if [ "$(ls -A "$TMP" | grep -c '\.tmp')" -eq 0 ]; then pass "no temporary file left by the limited writers"; else
    fail "temporary files left: $(ls -A "$TMP" | grep '\.tmp')"; fi

# ---- refused outputs ---------------------------------------------------------------------------
mkdir "$TMP/adir"
expect_exit 3 "a directory as output is refused" -- "$AUDIT" census -o "$TMP/adir" "$CAPTURE"
expect_grep "adir: is a directory; refusing to write over it" "$TMP/err" "the message says what it is"

finish
