#!/usr/bin/env bash
# The capture package (tools/python/, dsatopk-capture) against the C tool, both ways: it installs into
# a fresh virtual environment and its unittest suites pass there (tools/python/tests: the format, the
# hook, the SGLang and vLLM recipes); what CaptureHook writes (engine indices, row starts, a page
# table, zlib, zlib compressed in parallel chunks) is read by `inspect --verify` with the SHA-256
# that hashlib computes over the appended bytes and replayed by `run`; what `synth` writes is read by the package and encoded
# again byte for byte; kill -9 of a capturing process, repeated, leaves every earlier record
# readable, and the hook then refuses to append after the torn record (or cuts it when asked);
# two processes sharing one file through the fcntl lock leave a valid file (and, as the control
# showing the test can fail, interleave into a corrupt one without the lock).
#
# DSATOPK_REQUIRE_VENV=1 (set by .ci/run) fails instead of falling back to PYTHONPATH when no
# interpreter here can create the virtual environment.
. "$(dirname "$0")/lib.sh"
SOURCE=$PWD

# ---- install into a fresh virtual environment ---------------------------------------------------
# The first interpreter that has numpy, venv and a setuptools that can build a wheel (Debian's
# python3-setuptools needs python3-wheel for that); offline: numpy comes from the system site.
# The build runs on a copy, so the source tree gets no build/ or .egg-info.
cp -r "$SOURCE/tools/python" "$TMP/package"
rm -rf "$TMP/package/build" "$TMP/package"/*.egg-info
PY=""
: >"$TMP/venv.log"
for candidate in "${PYTHON:-python3}" /usr/bin/python3; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    "$candidate" -c 'import numpy, venv, ensurepip, setuptools' 2>>"$TMP/venv.log" || continue
    rm -rf "$TMP/venv"
    if "$candidate" -m venv --system-site-packages "$TMP/venv" >>"$TMP/venv.log" 2>&1 &&
        "$TMP/venv/bin/python" -m pip install --quiet --no-index --no-build-isolation \
            "$TMP/package" >>"$TMP/venv.log" 2>&1; then
        PY="$TMP/venv/bin/python"
        break
    fi
done
if [ -n "$PY" ]; then
    pass "pip install ./tools/python into a fresh virtual environment ($candidate, $("$PY" -c 'import sys; print(sys.version.split()[0])'))"
    (cd "$TMP" && "$PY" -c 'import dsatopk_capture, sys; print(dsatopk_capture.__file__)') >"$TMP/where.txt" 2>&1
    expect_grep "^$TMP/venv/.*/site-packages/dsatopk_capture/__init__.py$" "$TMP/where.txt" \
        "the installed package is imported, not the source tree"
elif [ "${DSATOPK_REQUIRE_VENV:-0}" = 1 ]; then
    fail "no interpreter could create a virtual environment and install ./tools/python"
    sed 's/^/    /' "$TMP/venv.log" 2>/dev/null | tail -20
    finish; exit 1
elif python3 -c 'import numpy' 2>/dev/null; then
    echo "# SKIP the install (no venv/ensurepip/setuptools here): the source tree on PYTHONPATH"
    PY=python3
    export PYTHONPATH="$SOURCE/tools/python${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "SKIP: numpy is not installed"
    exit 77
fi

# ---- the package's own suites, run against the installed copy -----------------------------------
if (cd "$TMP" && "$PY" -m unittest discover -s "$SOURCE/tools/python/tests" -t "$SOURCE/tools/python/tests") \
        >"$TMP/unittest.txt" 2>&1; then
    pass "tools/python/tests: $(grep -E '^Ran [0-9]+ tests' "$TMP/unittest.txt")"
else
    fail "tools/python/tests"; tail -40 "$TMP/unittest.txt" | sed 's/^/    /'
fi

# ---- the package writes, the C tool reads -------------------------------------------------------
cat >"$TMP/writer.py" <<'EOF'
import hashlib, json, sys
import numpy as np
from dsatopk_capture import CaptureHook

def canonical_topk(scores, starts, lengths, k):
    out = np.full((len(lengths), k), -1, np.int32)
    for b, (start, length) in enumerate(zip(starts, lengths)):
        window = scores[b, start:start + length]
        keys = window.view(np.int32).astype(np.int64)
        keys = np.where(keys < 0, -(keys & 0x7fffffff), keys)   # IEEE total order
        order = np.lexsort((np.arange(length), -keys))[:k]
        order = order[window[order] != -np.inf]
        out[b, :order.size] = order
    return out

path = sys.argv[1]
hook = CaptureHook(path, rank=0, metadata={"engine": "test", "model": "tiny"}, compress=False,
                   contract={"order": "sorted", "tie_break": "small"})
zhook_metadata = {"engine": "test"}
rng = np.random.default_rng(7)
scores = np.maximum(rng.standard_normal((4, 256)), 0).astype(np.float32)
lengths = np.array([256, 200, 17, 0])
hook.capture(scores, lengths, 16, engine_indices=canonical_topk(scores, [0] * 4, lengths, 16),
             layer=0, step=1)
starts = np.array([10, 0, 299])
half = rng.standard_normal((300, 3)).astype(np.float16).T          # a transposed view
wide = half.astype(np.float32)
lengths = np.array([100, 250, 1])
hook.capture(half, lengths, 8, row_starts=starts,
             engine_indices=canonical_topk(wide, starts, lengths, 8), layer=1)
hook.close()
zipped = CaptureHook(path, rank=0, compress=True)
table = np.array([[3, 1, 2, 0], [7, 6, 5, 4]], np.int32)
paged = rng.standard_normal((2, 128)).astype(np.float32)
local = canonical_topk(paged, [0, 0], [128, 100], 8)
translated = np.where(local >= 0, table[np.arange(2)[:, None], local // 32] * 32 + local % 32, -1)
zipped.capture(paged, [128, 100], 8, page_table=table, page_size=32, engine_indices=translated,
               layer=2)
zipped.close()
data = open(path, "rb").read()
hashes, offset = [], 0
while offset < len(data):
    stored = int.from_bytes(data[offset + 16:offset + 24], "little")
    hashes.append(hashlib.sha256(data[offset + 72:offset + 72 + stored]).hexdigest())
    offset += 72 + stored
json.dump({"hashes": hashes}, open(sys.argv[2], "w"))
EOF
CAP="$TMP/hook.bin"
if "$PY" "$TMP/writer.py" "$CAP" "$TMP/expected.json" 2>"$TMP/writer.err"; then
    pass "CaptureHook wrote three records (fp16 transposed, row starts, page table, zlib)"
else
    fail "the writer failed"; sed 's/^/    /' "$TMP/writer.err"
fi
expect_exit 0 "inspect --verify reads the package's file" -- "$AUDIT" inspect --verify --format json -o "$TMP/inspect.json" "$CAP"
python3 - "$TMP/inspect.json" "$TMP/expected.json" >"$TMP/compare.txt" 2>&1 <<'EOF'
import json, sys
listing, expected = (json.load(open(p)) for p in sys.argv[1:3])
records = listing["files"][0]["records"]
assert [r["payload_sha256"] for r in records] == expected["hashes"], "payload hashes differ"
assert [(r["rows"], r["k"], r["row_starts"], r["page_size"], r["engine_indices"], r["compressed"])
        for r in records] == [(4, 16, False, 0, True, False), (3, 8, True, 0, True, False),
                              (2, 8, False, 32, True, True)], "shapes or flags differ"
meta = [r["metadata"] for r in records]
assert [(m["call"], m["record"], m["layer"]) for m in meta] == [(0, 0, 0), (1, 1, 1), (0, 0, 2)]
assert meta[0]["contract"] == {"order": "sorted", "tie_break": "small"}, meta[0]
print("hashes match")
EOF
expect_grep '^hashes match$' "$TMP/compare.txt" "inspect: hashlib's SHA-256 of the appended bytes, shapes, flags, metadata"
grep -v '^hashes match$' "$TMP/compare.txt" | sed 's/^/    /'
expect_exit 0 "run replays the package's records" -- "$AUDIT" run --quiet --reps 1 --out "$TMP/run.json" "$CAP"
json_check "$TMP/run.json" 'len(j["records"]) == 3 and j["input_errors"] == [] and all(r["flags"]["engine_indices"] for r in j["records"]) and j["records"][2]["flags"]["page_table"]' \
    "run: three records with engine indices, no input error"

# ---- zlib in parallel chunks: still one stream, which the C tool inflates -------------------------
cat >"$TMP/chunks.py" <<'EOF'
import hashlib, sys, zlib
import numpy as np
from dsatopk_capture import CaptureHook, encode_record, read_records
path = sys.argv[1]
scores = np.maximum(np.random.default_rng(3).standard_normal((3, 200000)), 0).astype(np.float32)
lengths = [200000, 150000, 7]
hook = CaptureHook(path, rank=0, compress=True, compress_threads=2, compress_level=1)
hook.capture(scores, lengths, 16, layer=5)
hook.close()
(record,) = read_records(path)
with open(path, "rb") as f:
    data = f.read()
single = encode_record(scores, lengths, 16, metadata=record.metadata, compress=True, level=1)
assert record.stored_bytes > 1 << 20 and data != single, "not a chunked stream"
assert zlib.decompress(data[72:]) == zlib.decompress(single[72:]), "payloads differ"
print(hashlib.sha256(data[72:]).hexdigest())
EOF
CHUNKS="$TMP/chunks.bin"
if "$PY" "$TMP/chunks.py" "$CHUNKS" >"$TMP/chunks.sha" 2>"$TMP/chunks.err"; then
    pass "CaptureHook compressed a 2.4 MB payload in chunks on two threads (not one zlib call's bytes)"
else
    fail "the chunked writer failed"; sed 's/^/    /' "$TMP/chunks.err"
fi
expect_exit 0 "inspect --verify inflates the chunked stream" -- "$AUDIT" inspect --verify --format json -o "$TMP/chunks.json" "$CHUNKS"
json_check "$TMP/chunks.json" 'j["files"][0]["records"][0]["compressed"] and j["files"][0]["records"][0]["payload_sha256"] == "'"$(cat "$TMP/chunks.sha")"'"' \
    "inspect: compressed, the SHA-256 of the stored bytes"
expect_exit 0 "run replays the chunked record" -- "$AUDIT" run --quiet --reps 1 --out "$TMP/chunks-run.json" "$CHUNKS"
json_check "$TMP/chunks-run.json" 'len(j["records"]) == 1 and j["input_errors"] == []' "run: one record, no input error"

# ---- the C tool writes, the package reads and encodes again -------------------------------------
SYN="$TMP/synth.bin"
{ "$AUDIT" synth -f tie -b 4 -L 512 -k 16 --ties 8 -o "$SYN" &&
    "$AUDIT" synth -f paged -b 3 -L 1000 -k 16 -a -o "$SYN" &&
    "$AUDIT" synth -f offsets -b 3 -L 700 -k 32 -z -a -o "$SYN" &&
    "$AUDIT" synth -f nan -b 2 -L 300 -k 20 -z -a -o "$SYN"; } >/dev/null ||
    fail "synth could not write the capture"
"$AUDIT" inspect --format json -o "$TMP/synth.json" "$SYN" >/dev/null 2>&1
"$PY" - "$SYN" "$TMP/synth.json" >"$TMP/synth.txt" 2>&1 <<'EOF'
import hashlib, json, sys
from dsatopk_capture import encode_record, read_records
path, listing = sys.argv[1], json.load(open(sys.argv[2]))
data = open(path, "rb").read()
records = list(read_records(path))
listed = listing["files"][0]["records"]
assert len(records) == len(listed) == 4, (len(records), len(listed))
for record, row in zip(records, listed):
    assert (record.rows, record.k, record.row_stride, record.offset) == \
        (row["rows"], row["k"], row["row_stride"], row["offset_bytes"]), row
    assert record.payload_sha256 == row["payload_sha256"] and record.metadata == row["metadata"]
    assert (record.row_starts is not None, record.page_size, record.compressed) == \
        (row["row_starts"], row["page_size"], row["compressed"]), row
    assert (int(record.lengths.min()), int(record.lengths.max())) == \
        (row["length_min"], row["length_max"]), row
    again = encode_record(record.scores, record.lengths, record.k, record.row_starts,
                          record.page_table, record.page_size, record.page_table_row_starts,
                          record.engine_indices, record.metadata, compress=record.compressed)
    original = data[record.offset:record.offset + 72 + record.stored_bytes]
    assert again == original, f"record {record.index}: encoded again, the bytes differ"
print("synth read")
EOF
expect_grep '^synth read$' "$TMP/synth.txt" "the package reads synth's records (as inspect lists them) and encodes each again byte for byte"
grep -v '^synth read$' "$TMP/synth.txt" | tail -5 | sed 's/^/    /'

# chunked.install(CHUNK, PAUSE): the writer appends in writes of CHUNK bytes, PAUSE s apart.
cat >"$TMP/chunked.py" <<'EOF'
import os, time
from dsatopk_capture import writer
def install(chunk, pause):
    def chunked(fd, *parts):
        view = memoryview(b"".join(parts))
        while view:
            time.sleep(pause)
            view = view[os.write(fd, view[:chunk]):]
    writer.write_all = chunked
EOF

# ---- kill -9 while capturing, three times -------------------------------------------------------
# capture.py FILE [slow]: 16 MiB records, uncompressed, one after another until killed; "slow"
# writes 64 KiB per write with a pause, so that the kill lands inside a record.
cat >"$TMP/capture.py" <<'EOF'
import sys
import numpy as np
import chunked
from dsatopk_capture import CaptureHook
if len(sys.argv) > 2:
    chunked.install(65536, 0.002)
hook = CaptureHook(sys.argv[1], rank=0, compress=False, block=True)
scores = np.random.default_rng(1).standard_normal((64, 65536)).astype(np.float32)
for call in range(1000):
    hook.capture(scores, np.full(64, 65536), 2048, layer=call)
EOF
for run in 1 2 3; do
    KILLED="$TMP/killed$run.bin"
    if [ "$run" = 3 ]; then "$PY" "$TMP/capture.py" "$KILLED" slow & else "$PY" "$TMP/capture.py" "$KILLED" & fi
    WRITER=$!
    # Past two whole records (about 16 MiB each); run 3 inside the third.
    WANT=$(( run == 3 ? 16777216 * 2 + 2000000 : 16777216 * 3 ))
    for _ in $(seq 1 400); do
        [ -f "$KILLED" ] && [ "$(stat -c %s "$KILLED")" -gt "$WANT" ] && break
        sleep 0.05
    done
    [ "$run" != 3 ] && sleep "0.0$((RANDOM % 10))"
    kill -9 "$WRITER"; wait "$WRITER" 2>/dev/null
    "$AUDIT" inspect --format json -o "$TMP/killed$run.json" "$KILLED" >/dev/null 2>&1
    "$PY" - "$KILLED" "$TMP/killed$run.json" "$run" >"$TMP/killed$run.txt" 2>&1 <<'EOF'
import json, os, sys
from dsatopk_capture import check_tail
path, listing, run = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
entry = listing["files"][0]
records = entry["records"]
tail = check_tail(path)
assert len(records) >= 2 and tail.records == len(records), (len(records), tail)
assert [r["metadata"]["record"] for r in records] == list(range(len(records)))
assert [r["metadata"]["layer"] for r in records] == list(range(len(records)))
assert entry["status"] in ("ok", "truncated"), entry["status"]
assert (entry["status"] == "truncated") == (not tail.clean), (entry["status"], tail)
assert not tail.clean or tail.good_bytes == os.path.getsize(path)
if run == 3:
    assert tail.torn and tail.good_bytes < os.path.getsize(path), tail
print(f"{len(records)} records readable, {entry['status']}")
EOF
    if grep -q 'records readable' "$TMP/killed$run.txt"; then
        pass "kill -9 while capturing (run $run): $(cat "$TMP/killed$run.txt")"
    else
        fail "kill -9 while capturing (run $run)"; sed 's/^/    /' "$TMP/killed$run.txt"
    fi
done
KILLED="$TMP/killed3.bin"
GOOD=$("$PY" -c 'import sys; from dsatopk_capture import check_tail; print(check_tail(sys.argv[1]).good_bytes)' "$KILLED")
expect_exit 3 "inspect --verify: exit 3 for the torn record" -- "$AUDIT" inspect --verify "$KILLED"
cat >"$TMP/append.py" <<'EOF'
import sys
import numpy as np
from dsatopk_capture import CaptureHook
hook = CaptureHook(sys.argv[1], rank=0, repair_tail=len(sys.argv) > 2)
hook.capture(np.ones((2, 64), np.float32), [64, 64], 4, layer=99)
hook.close()
EOF
expect_exit 1 "the hook refuses to append after the torn record" -- "$PY" "$TMP/append.py" "$KILLED"
expect_grep "refusing to append: $KILLED ends in a torn record at byte $GOOD \(.*truncate -s $GOOD $KILLED" "$TMP/err" \
    "the refusal names the file, the byte and the repair command"
expect_exit 0 "repair_tail=True cuts the torn record and appends" -- "$PY" "$TMP/append.py" "$KILLED" repair
expect_exit 0 "inspect --verify after the repair" -- "$AUDIT" inspect --verify --format json -o "$TMP/repaired.json" "$KILLED"
json_check "$TMP/repaired.json" 'j["files"][0]["records"][-1]["offset_bytes"] == '"$GOOD"' and j["files"][0]["records"][-1]["metadata"]["layer"] == 99' \
    "the new record starts where the torn one did"

# ---- several processes, one file ----------------------------------------------------------------
# Writes of 16 KiB with a pause between them, so that two unlocked writers interleave.
cat >"$TMP/shared.py" <<'EOF'
import os, sys, time
import numpy as np
import chunked
from dsatopk_capture import CaptureHook
path, writer, lock, barrier = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "lock", sys.argv[4]
chunked.install(16384, 0.005)
hook = CaptureHook(path, rank=writer, compress=False, lock=None if lock else False, block=True)
assert hook.lock == lock
open(f"{barrier}.ready{writer}", "w").close()   # both hooks checked the (empty) tail: go
while not os.path.exists(barrier):
    time.sleep(0.001)
for call in range(4):
    hook.capture(np.full((4, 8192), writer, dtype=np.float32), [8192] * 4, 16, writer=writer)
hook.close()
EOF
shared_writers() {
    rm -f "$TMP/$1.bin" "$TMP/$1.go"*
    "$PY" "$TMP/shared.py" "$TMP/$1.bin" 0 "$2" "$TMP/$1.go" & local first=$!
    "$PY" "$TMP/shared.py" "$TMP/$1.bin" 1 "$2" "$TMP/$1.go" & local second=$!
    for _ in $(seq 1 400); do
        [ -f "$TMP/$1.go.ready0" ] && [ -f "$TMP/$1.go.ready1" ] && break
        sleep 0.05
    done
    touch "$TMP/$1.go"
    wait "$first"; local status_first=$?
    wait "$second"; local status_second=$?
    [ "$status_first" -eq 0 ] && [ "$status_second" -eq 0 ]
}
if shared_writers locked lock; then pass "two processes appended to one shared file"; else fail "a shared writer failed"; fi
expect_exit 0 "the shared file verifies (fcntl lock)" -- "$AUDIT" inspect --verify --format json -o "$TMP/locked.json" "$TMP/locked.bin"
json_check "$TMP/locked.json" 'sorted(r["metadata"]["writer"] for r in j["files"][0]["records"]) == [0] * 4 + [1] * 4' \
    "8 whole records, 4 from each writer"
shared_writers unlocked nolock
expect_exit 3 "control: the same writers without the lock corrupt the file" -- "$AUDIT" inspect --verify "$TMP/unlocked.bin"

finish
