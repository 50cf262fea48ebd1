#!/usr/bin/env bash
# Round trip of the capture hook (tools/dsatopk_hook.py, numpy path): records written by
# CaptureHook are read by `dsatopk-audit inspect --format json` with the payload SHA-256 that
# hashlib computes over the bytes the hook appended, and replayed by `run`; fp16 scores are
# widened exactly; a writer killed mid-append (half a write then _exit, and a real kill -9 during a
# slow write) leaves a file whose earlier records stay readable while `inspect --verify` exits 3;
# two processes sharing one file through the fcntl lock leave a valid file (and, as the control
# showing the test can fail, interleave into a corrupt one without the lock). With PyTorch
# installed, tensors (bf16 on the CPU) go through the same path.
. "$(dirname "$0")/lib.sh"

if ! python3 -c 'import numpy' 2>/dev/null; then
    echo "SKIP: numpy is not installed"
    exit 77
fi
export PYTHONPATH="$PWD/tools${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c 'import dsatopk_hook' 2>"$TMP/import.err"; then
    fail "tools/dsatopk_hook.py imports"; cat "$TMP/import.err"; finish; exit 1
fi

# ---- three records, hashes computed independently -----------------------------------------------
cat >"$TMP/writer.py" <<'EOF'
import hashlib, json, os, sys
import numpy as np
from dsatopk_hook import CaptureHook

hook = CaptureHook(os.path.join(sys.argv[1], "{rank}.bin"), metadata={"engine": "test", "model": "tiny"})
rng = np.random.default_rng(7)
hashes = []

def capture(**arguments):
    before = os.path.getsize(hook.path) if os.path.exists(hook.path) else 0
    written = hook.capture(**arguments)
    with open(hook.path, "rb") as capture_file:
        capture_file.seek(before)
        appended = capture_file.read()
    assert len(appended) == written, (len(appended), written)
    hashes.append(hashlib.sha256(appended[72:]).hexdigest())  # the stored payload's hash

scores = rng.standard_normal((4, 256)).astype(np.float32)
capture(scores=scores, lengths=np.array([256, 200, 17, 0]), k=16, layer=0, step=1)
# fp16 scores given as a non-contiguous view, int64 lengths, row starts.
half = rng.standard_normal((300, 3)).astype(np.float16)
capture(scores=half.T, lengths=np.array([100, 250, 1], dtype=np.int64), k=8,
        row_starts=np.array([10, 0, 299]), layer=1)
# A page table and what the engine selected; the caller's arrays are changed right after the
# call, as a fused kernel would: the record keeps what the call saw.
table = np.array([[3, 1, 2, 0], [7, 6, 5, 4]], dtype=np.int32)
selected = np.tile(np.arange(8, dtype=np.int32), (2, 1))
paged = rng.standard_normal((2, 128)).astype(np.float32)
capture(scores=paged, lengths=np.array([128, 100]), k=8, page_table=table, page_size=32,
        engine_indices=selected, layer=2)
paged[:] = 0
selected[:] = -1
json.dump({"path": hook.path, "rank": hook.rank, "lock": hook.lock, "hashes": hashes,
           "half": half.T.astype(np.float32).tolist()}, open(sys.argv[2], "w"))
EOF
mkdir -p "$TMP/caps"
if RANK=3 python3 "$TMP/writer.py" "$TMP/caps" "$TMP/expected.json" 2>"$TMP/writer.err"; then
    pass "CaptureHook wrote three records"
else
    fail "the writer failed"; sed 's/^/    /' "$TMP/writer.err"
fi
json_check "$TMP/expected.json" 'j["path"].endswith("/caps/3.bin") and j["rank"] == 3 and j["lock"] is False' \
    "one file per rank: RANK=3 -> caps/3.bin, no lock needed"
CAP="$TMP/caps/3.bin"
expect_exit 0 "inspect --verify reads the hook's file" -- "$AUDIT" inspect --verify --format json -o "$TMP/inspect.json" "$CAP"
python3 - "$TMP/inspect.json" "$TMP/expected.json" >"$TMP/compare.txt" 2>&1 <<'EOF'
import json, sys
listing, expected = (json.load(open(p)) for p in sys.argv[1:3])
records = listing["files"][0]["records"]
assert [r["payload_sha256"] for r in records] == expected["hashes"], "payload hashes differ"
assert [(r["rows"], r["k"], r["row_starts"], r["page_size"], r["engine_indices"], r["compressed"])
        for r in records] == [(4, 16, False, 0, False, True), (3, 8, True, 0, False, True),
                              (2, 8, False, 32, True, True)], "shapes or flags differ"
assert [(r["metadata"]["rank"], r["metadata"]["call"], r["metadata"]["layer"], r["metadata"]["engine"])
        for r in records] == [(3, 0, 0, "test"), (3, 1, 1, "test"), (3, 2, 2, "test")], "metadata differs"
print("hashes match")
EOF
expect_grep '^hashes match$' "$TMP/compare.txt" "inspect's payload SHA-256 = hashlib's over the appended bytes; shapes and metadata kept"
cat "$TMP/compare.txt" | grep -v '^hashes match$' | sed 's/^/    /'
python3 - "$CAP" "$TMP/expected.json" >"$TMP/values.txt" 2>&1 <<'EOF'
import json, sys
import numpy as np
from dsatopk_capture import read_records
records = list(read_records(sys.argv[1]))
expected = json.load(open(sys.argv[2]))
assert np.array_equal(records[1].scores, np.array(expected["half"], dtype=np.float32)), "fp16 scores"
assert records[2].scores.any() and (records[2].engine_indices[0] == np.arange(8)).all(), "copied"
assert (records[2].page_table == [[3, 1, 2, 0], [7, 6, 5, 4]]).all()
print("values ok")
EOF
expect_grep '^values ok$' "$TMP/values.txt" "fp16 widened exactly; the arrays as they were at the call"
expect_exit 0 "run replays the hook's records" -- "$AUDIT" run --quiet --reps 1 --out "$TMP/run.json" "$CAP"
json_check "$TMP/run.json" 'len(j["records"]) == 3 and j["input_errors"] == [] and j["records"][2]["flags"]["page_table"]' \
    "run: three records, no input error"

# ---- a writer killed in the middle of an append -------------------------------------------------
cat >"$TMP/killed.py" <<'EOF'
import json, os, sys
import numpy as np
from dsatopk_hook import CaptureHook
hook = CaptureHook(sys.argv[1], rank=0)
rng = np.random.default_rng(1)
for layer in range(2):
    hook.capture(rng.standard_normal((2, 64)).astype(np.float32), [64, 64], 4, layer=layer)
json.dump({"size": os.path.getsize(sys.argv[1])}, open(sys.argv[2], "w"))
real_write = os.write
def half_then_die(fd, data):
    real_write(fd, bytes(data[:len(data) // 2]))
    os._exit(9)
os.write = half_then_die
hook.capture(rng.standard_normal((8, 4096)).astype(np.float32), [4096] * 8, 64, layer=2)
EOF
python3 "$TMP/killed.py" "$TMP/killed.bin" "$TMP/killed.json" 2>"$TMP/killed.err"
STATUS=$?
if [ "$STATUS" -eq 9 ]; then pass "the writer died mid-append (exit 9)"; else fail "writer exit $STATUS, wanted 9"; cat "$TMP/killed.err"; fi
GOOD=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["size"])' "$TMP/killed.json")
SIZE=$(stat -c %s "$TMP/killed.bin")
if [ "$SIZE" -gt "$GOOD" ]; then pass "half a record was appended ($GOOD -> $SIZE bytes)"; else fail "nothing appended"; fi
expect_exit 0 "inspect (no --verify) lists the readable records" -- "$AUDIT" inspect --format json -o "$TMP/killed_list.json" "$TMP/killed.bin"
json_check "$TMP/killed_list.json" 'j["files"][0]["status"] == "truncated" and [r["index"] for r in j["files"][0]["records"]] == [0, 1]' \
    "records 0 and 1 readable, the file reported truncated"
expect_exit 3 "inspect --verify: exit 3 for the truncated record" -- "$AUDIT" inspect --verify "$TMP/killed.bin"
expect_grep 'record 2' "$TMP/err" "inspect --verify names the truncated record 2"
expect_exit 0 "inspect --verify on the intact records (cut at the last good one)" -- \
    sh -c "head -c $GOOD '$TMP/killed.bin' >'$TMP/intact.bin' && '$AUDIT' inspect --verify '$TMP/intact.bin'"

# A real kill -9 while a large record is being written slowly (64 KiB per write).
cat >"$TMP/slow.py" <<'EOF'
import os, sys, time
import numpy as np
from dsatopk_hook import CaptureHook
hook = CaptureHook(sys.argv[1], rank=0, compress=False)
hook.capture(np.ones((2, 64), dtype=np.float32), [64, 64], 4, layer=0)
real_write = os.write
def slow_write(fd, data):
    time.sleep(0.02)
    return real_write(fd, bytes(data[:65536]))
os.write = slow_write
hook.capture(np.ones((64, 65536), dtype=np.float32), [65536] * 64, 2048, layer=1)
EOF
python3 "$TMP/slow.py" "$TMP/slow.bin" &
WRITER=$!
FIRST=0
for _ in $(seq 1 300); do
    if [ -f "$TMP/slow.bin" ]; then
        SIZE=$(stat -c %s "$TMP/slow.bin")
        [ "$FIRST" -eq 0 ] && [ "$SIZE" -gt 0 ] && FIRST=$SIZE
        [ "$FIRST" -gt 0 ] && [ "$SIZE" -gt $((FIRST + 200000)) ] && break
    fi
    sleep 0.05
done
{ kill -9 "$WRITER" && wait "$WRITER"; } 2>/dev/null
SIZE=$(stat -c %s "$TMP/slow.bin")
if [ "$SIZE" -gt $((FIRST + 200000)) ] && [ "$SIZE" -lt $((FIRST + 16 * 1048576)) ]; then
    pass "kill -9 in the middle of a 16 MiB append ($SIZE bytes on disk)"
else
    fail "the slow writer was not caught mid-append (first record $FIRST bytes, file $SIZE bytes)"
fi
expect_exit 3 "inspect --verify after kill -9" -- "$AUDIT" inspect --verify --format json -o "$TMP/slow.json" "$TMP/slow.bin"
json_check "$TMP/slow.json" 'j["files"][0]["status"] == "truncated" and len(j["files"][0]["records"]) == 1 and j["files"][0]["records"][0]["metadata"]["layer"] == 0' \
    "after kill -9: record 0 readable, the file truncated"

# ---- several processes, one file ----------------------------------------------------------------
# Writes of 16 KiB with a pause between them, so that two unlocked writers interleave.
cat >"$TMP/shared.py" <<'EOF'
import os, sys, time
import numpy as np
from dsatopk_hook import CaptureHook
path, writer, lock, barrier = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "lock", sys.argv[4]
hook = CaptureHook(path, rank=writer, compress=False, lock=None if lock else False)
assert hook.lock == lock
real_write = os.write
def chunked_write(fd, data):
    time.sleep(0.005)
    return real_write(fd, bytes(data[:16384]))
os.write = chunked_write
while not os.path.exists(barrier):
    time.sleep(0.001)
for call in range(4):
    hook.capture(np.full((4, 8192), writer, dtype=np.float32), [8192] * 4, 16, writer=writer)
EOF
shared_writers() {
    rm -f "$TMP/$1.bin" "$TMP/$1.go"
    python3 "$TMP/shared.py" "$TMP/$1.bin" 0 "$2" "$TMP/$1.go" & local first=$!
    python3 "$TMP/shared.py" "$TMP/$1.bin" 1 "$2" "$TMP/$1.go" & local second=$!
    sleep 0.5
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

# ---- errors and PyTorch --------------------------------------------------------------------------
python3 - "$TMP/err.bin" >"$TMP/errors.txt" 2>&1 <<'EOF'
import sys
import numpy as np
from dsatopk_hook import CaptureHook
hook = CaptureHook(sys.argv[1] + ".{pid}", rank=0)
assert hook.path != sys.argv[1] + ".{pid}" and not hook.lock
for arguments, wanted in (((np.zeros((2, 8)), [8, 8], 4), "float64"),
                          ((np.zeros((2, 8), np.float32), [8, 9], 4), "ends past row_stride")):
    try:
        hook.capture(*arguments)
        print("no error for", wanted)
    except ValueError as error:
        assert wanted in str(error), error
try:
    CaptureHook(sys.argv[1], metadata=["not", "a dict"])
    print("no error for metadata")
except ValueError:
    pass
print("errors ok", hook.records_written)
EOF
expect_grep '^errors ok 0$' "$TMP/errors.txt" "float64 scores, a window past the stride and list metadata are refused"
if python3 -c 'import torch' 2>/dev/null; then
    python3 - "$TMP/torch.bin" >"$TMP/torch.txt" 2>&1 <<'EOF'
import sys
import numpy as np
import torch
from dsatopk_hook import CaptureHook
from dsatopk_capture import read_records
scores = torch.randn(3, 64).to(torch.bfloat16)
lengths = torch.tensor([64, 10, 0], dtype=torch.int64)
hook = CaptureHook(sys.argv[1], rank=0)
hook.capture(scores, lengths, 8, engine_indices=torch.zeros(3, 8, dtype=torch.int32))
scores.fill_(0)
record = next(read_records(sys.argv[1]))
assert record.scores.any() and record.scores.dtype == np.float32
print("torch ok")
EOF
    expect_grep '^torch ok$' "$TMP/torch.txt" "PyTorch bf16 tensors: copied, widened exactly"
    expect_exit 0 "inspect --verify on the tensor capture" -- "$AUDIT" inspect --verify "$TMP/torch.bin"
else
    echo "# SKIP the PyTorch path: torch is not installed"
fi

finish
