#!/usr/bin/env bash
# Appending never buries a record behind a damaged one, and no repair advice cuts a complete
# record (src/capture/capture_tail.h, docs/FORMAT.md "Writing"):
#   - synth --append / import --append to a file whose last record is torn, or followed by
#     garbage, exit 3 with the repair in the message and leave the file as it was; with
#     --repair-tail they cut the damage off first and the result verifies;
#   - a file with a complete record past its damage (what appending behind a torn record used to
#     make) is refused even with --repair-tail;
#   - inspect's advice, applied as printed, keeps every complete record: a complete record
#     followed by garbage, a torn last record, a torn record with a complete one behind it;
#   - appenders take the fcntl lock the Python hook takes: an append waits for a holder of the
#     lock, and eight concurrent appenders leave nine whole records.
. "$(dirname "$0")/lib.sh"
need_python_with_numpy

LIMIT=60
T() { timeout "$LIMIT" "$@"; }
synth_one() { # synth_one FILE SEED [options]: a 2-row record of ~4 KiB
    local file=$1 seed=$2
    shift 2
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --seed "$seed" "$@" -o "$file" >/dev/null
}
# complete_hashes FILE: the payload SHA-256 of every complete record, in file order, found by
# walking the headers and hashing each payload (Python, independent of the C reader).
cat >"$TMP/complete.py" <<'EOF'
import hashlib, struct, sys, zlib
data = open(sys.argv[1], "rb").read()
found, offset = [], 0
while True:
    at = data.find(b"DSATOPK\n", offset)
    if at < 0 or len(data) - at < 72:
        break
    header = data[at:at + 72]
    stored = struct.unpack_from("<Q", header, 16)[0]
    payload = data[at + 72:at + 72 + stored]
    if (struct.unpack_from("<I", header, 68)[0] == zlib.crc32(header[:68]) and len(payload) == stored
            and hashlib.sha256(payload).digest() == header[32:64]):
        found.append(hashlib.sha256(payload).hexdigest())
        offset = at + 72 + stored
    else:
        offset = at + 1
print(" ".join(found))
EOF
complete_hashes() { "$PYTHON" "$TMP/complete.py" "$1"; }
size_of() { stat -c %s "$1"; }

# Two complete records (A, B); torn.bin cuts B in its payload.
synth_one "$TMP/two.bin" 1
synth_one "$TMP/two.bin" 2 --append
ONE=$(($(size_of "$TMP/two.bin") / 2)) # the records are the same size
head -c $((ONE + 100)) "$TMP/two.bin" >"$TMP/torn.bin"
cp "$TMP/torn.bin" "$TMP/torn.orig"

# ---- a torn last record: refused, then repaired ------------------------------------------------
expect_exit 3 "synth --append after a torn record is refused" -- \
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --seed 3 --append -o "$TMP/torn.bin"
expect_grep "torn\.bin: record 1 at byte $ONE: truncated: header promises [0-9]+ payload bytes, 28 remain" \
    "$TMP/err" "the message names the file, the torn record and its offset"
expect_grep "\-\-repair-tail, or truncate -s $ONE .*torn\.bin" "$TMP/err" "the message gives the repair"
if cmp -s "$TMP/torn.bin" "$TMP/torn.orig"; then pass "the refused file is unchanged"
else fail "the refused append changed the file"; fi
"$PYTHON" - "$TMP/scores.npy" <<'EOF'
import sys, numpy as np
np.save(sys.argv[1], np.arange(32, dtype=np.float32).reshape(2, 16))
EOF
expect_exit 3 "import --append after a torn record is refused" -- \
    T "$AUDIT" import --scores "$TMP/scores.npy" --k 4 --append -o "$TMP/torn.bin"
expect_grep "torn\.bin: record 1 at byte $ONE: truncated" "$TMP/err" "import names the torn record"
expect_exit 2 "--repair-tail without --append is a usage error" -- \
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --repair-tail -o "$TMP/x.bin"

expect_exit 0 "synth --append --repair-tail" -- \
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --seed 3 --append --repair-tail -o "$TMP/torn.bin"
expect_grep "cut the damaged tail \(record 1 at byte $ONE: truncated.*\) back to 1 record, $ONE bytes" \
    "$TMP/out" "it says what it cut"
expect_exit 0 "the repaired file verifies" -- T "$AUDIT" inspect --verify "$TMP/torn.bin"
if [ "$(complete_hashes "$TMP/torn.bin" | wc -w)" -eq 2 ] &&
    [ "$(complete_hashes "$TMP/torn.bin" | cut -d' ' -f1)" = "$(complete_hashes "$TMP/two.bin" | cut -d' ' -f1)" ]; then
    pass "record A kept, the new record behind it"
else fail "the repaired file does not hold A and the new record"; fi
cp "$TMP/torn.orig" "$TMP/torn2.bin"
expect_exit 0 "import --append --repair-tail" -- \
    T "$AUDIT" import --scores "$TMP/scores.npy" --k 4 --append --repair-tail -o "$TMP/torn2.bin"
expect_exit 0 "... and that file verifies" -- T "$AUDIT" inspect --verify "$TMP/torn2.bin"

# ---- garbage after the last complete record --------------------------------------------------
cp "$TMP/two.bin" "$TMP/garbage.bin"
printf 'this is not a record, it is a line of text that follows the last one\n' >>"$TMP/garbage.bin"
expect_exit 3 "append after garbage is refused" -- \
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --seed 3 --append -o "$TMP/garbage.bin"
expect_grep "record 2 at byte $((2 * ONE)): corrupt: no record magic" "$TMP/err" "the garbage is named"
cp "$TMP/garbage.bin" "$TMP/garbage2.bin"
expect_exit 0 "--repair-tail cuts the garbage" -- \
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --seed 3 --append --repair-tail -o "$TMP/garbage2.bin"
if [ "$(complete_hashes "$TMP/garbage2.bin" | wc -w)" -eq 3 ]; then pass "A, B and the new record"
else fail "after cutting the garbage: $(complete_hashes "$TMP/garbage2.bin" | wc -w) records"; fi

# ---- a complete record past the damage --------------------------------------------------------
# What appending behind a torn record made: A, torn B, then a whole record C.
cp "$TMP/torn.orig" "$TMP/buried.bin"
synth_one "$TMP/c.bin" 9
cat "$TMP/c.bin" >>"$TMP/buried.bin"
cp "$TMP/buried.bin" "$TMP/buried.orig"
expect_exit 3 "append to a file with a complete record past its damage is refused" -- \
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --seed 3 --append -o "$TMP/buried.bin"
expect_exit 3 "... even with --repair-tail" -- \
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --seed 3 --append --repair-tail -o "$TMP/buried.bin"
expect_grep "a complete record starts at byte $((ONE + 100)) past it" "$TMP/err" "the buried record is named"
if cmp -s "$TMP/buried.bin" "$TMP/buried.orig"; then pass "the file is unchanged"
else fail "the refused append changed the file"; fi

# ---- inspect's advice keeps every complete record --------------------------------------------
# apply_advice FILE: runs inspect, then the "repair" command of its JSON as printed.
apply_advice() {
    T "$AUDIT" inspect --format json -o "$TMP/advice.json" "$1" 2>"$TMP/advice.err"
    local command
    command=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["files"][0]["error"]["repair"] or "")' \
        "$TMP/advice.json" 2>/dev/null)
    if [ -z "$command" ]; then echo "no advice"; return 1; fi
    sh -c "$command"
}
for case in garbage torn buried; do
    cp "$TMP/$case.orig" "$TMP/$case.fix" 2>/dev/null || cp "$TMP/$case.bin" "$TMP/$case.fix"
    before=$(complete_hashes "$TMP/$case.fix")
    if apply_advice "$TMP/$case.fix" >"$TMP/apply.log" 2>&1 &&
        T "$AUDIT" inspect --verify "$TMP/$case.fix" >/dev/null 2>&1 &&
        [ "$(complete_hashes "$TMP/$case.fix")" = "$before" ]; then
        pass "$case: inspect's advice, applied, leaves a file that verifies with all $(echo "$before" | wc -w) complete records"
    else
        fail "$case: the advice lost a record or left damage"; cat "$TMP/apply.log" "$TMP/advice.err" | sed 's/^/    /'
        echo "    before: $before"; echo "    after:  $(complete_hashes "$TMP/$case.fix")"
    fi
done
expect_grep "a complete record starts at byte $((ONE + 100)) past the damage at byte $ONE" \
    "$TMP/advice.err" "inspect says why it does not cut the buried file back"

# ---- the append lock ---------------------------------------------------------------------------
# A holder takes the lock the Python hook takes (fcntl.lockf), waits, appends its own record
# through the locked descriptor and releases. An append started while it holds the lock must wait:
# its record comes after the holder's.
synth_one "$TMP/locked.bin" 1
cat >"$TMP/holder.py" <<'EOF'
import fcntl, os, sys, time
import numpy as np
from dsatopk_capture import encode_record
path, ready = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
fcntl.lockf(fd, fcntl.LOCK_EX)
open(ready, "w").close()
time.sleep(1.5)
os.write(fd, encode_record(np.zeros((1, 8), np.float32), [8], 2, metadata={"writer": "holder"}))
os.fsync(fd)
os.close(fd)
EOF
"$PYTHON" "$TMP/holder.py" "$TMP/locked.bin" "$TMP/ready" &
holder=$!
for _ in $(seq 1 500); do [ -e "$TMP/ready" ] && break; sleep 0.01; done
expect_exit 0 "synth --append while another process holds the lock" -- \
    T "$AUDIT" synth -f random -b 2 -L 512 -k 8 --seed 5 --append -o "$TMP/locked.bin"
wait "$holder"
T "$AUDIT" inspect --verify --format json -o "$TMP/locked.json" "$TMP/locked.bin"
json_check "$TMP/locked.json" '[r["metadata"].get("writer", r["metadata"].get("seed")) for r in j["files"][0]["records"]] == [1, "holder", 5]' \
    "the append waited for the lock: the holder's record first, then synth's"

# Eight appenders at once, 4 MiB records: every one waits its turn, none sees another's record
# half-written (which the tail check would refuse).
synth_one "$TMP/crowd.bin" 0
pids=()
for seed in 1 2 3 4 5 6 7 8; do
    T "$AUDIT" synth -f random -b 16 -L 65536 -k 8 --seed "$seed" --append -o "$TMP/crowd.bin" \
        >"$TMP/crowd.$seed.log" 2>&1 &
    pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
if [ "$failed" -eq 0 ]; then pass "eight concurrent appenders all succeeded"
else fail "$failed of eight concurrent appenders failed"; cat "$TMP"/crowd.*.log | head -5; fi
T "$AUDIT" inspect --verify --format json -o "$TMP/crowd.json" "$TMP/crowd.bin"
json_check "$TMP/crowd.json" 'sorted(r["metadata"]["seed"] for r in j["files"][0]["records"]) == list(range(9))' \
    "nine whole records, one from each appender"

finish
