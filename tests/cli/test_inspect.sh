#!/usr/bin/env bash
# inspect on captures written by the dsatopk_capture package (tools/python/): the JSON listing against what Python
# knows about each record (hashlib's SHA-256 of the stored payload bytes), and the exit codes for
# truncated, corrupt and missing files and bad options.
. "$(dirname "$0")/lib.sh"

need_python_with_numpy

# Three records in a.bin (plain; every optional section, compressed; empty rows and a padded
# stride) and one in b.bin.
"$PYTHON" - "$TMP/a.bin" "$TMP/b.bin" <<'EOF' || fail "writing captures with the dsatopk_capture package (tools/python/)"
import sys
import numpy as np
from dsatopk_capture import append_record

a, b = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
scores = rng.standard_normal((4, 300)).astype(np.float32)
append_record(a, scores, [300, 300, 17, 0], k=64,
              metadata={"engine": "sglang", "model": "DeepSeek-V3.2", "layer": 3, "step": 11})
append_record(a, scores, [200, 150, 64, 0], k=16, row_starts=[0, 100, 236, 300],
              page_table=np.arange(4 * 5).reshape(4, 5), page_size=64,
              page_table_row_starts=[0, 1, 1, 0],
              engine_indices=np.full((4, 16), -1), metadata={"note": "caf\u00e9"}, compress=True)
padded = np.zeros((2, 1000), dtype=np.float32)
append_record(a, padded, [0, 999], k=2048)
append_record(b, scores[:1], [300], k=1, compress=True)
EOF

# What Python knows about each record: walk the 72-byte headers and hash the stored payloads.
cat >"$TMP/expect.py" <<'EOF'
import hashlib, json, struct, sys

def records(path):
    data = open(path, "rb").read()
    offset, out = 0, []
    while offset + 72 <= len(data):
        flags, stored, raw = struct.unpack_from("<IQQ", data, offset + 12)
        if offset + 72 + stored > len(data):
            break
        payload = data[offset + 72:offset + 72 + stored]
        out.append({"offset_bytes": offset, "stored_bytes": stored, "raw_bytes": raw,
                    "compressed": bool(flags & 1),
                    "payload_sha256": hashlib.sha256(payload).hexdigest()})
        offset += 72 + stored
    return out

json.dump({path: records(path) for path in sys.argv[1:]}, sys.stdout)
EOF
"$PYTHON" "$TMP/expect.py" "$TMP/a.bin" "$TMP/b.bin" >"$TMP/expect.json"

expect_exit 0 "inspect --format json on two files" -- \
    "$AUDIT" inspect --format json -o "$TMP/list.json" "$TMP/a.bin" "$TMP/b.bin"
[ -s "$TMP/out" ] && fail "-o FILE still printed to stdout" || pass "-o FILE leaves stdout empty"
json_check "$TMP/list.json" 'j["schema"] == "dsatopk-audit/inspect" and j["schema_version"] == 2' \
    "schema id and version"
json_check "$TMP/list.json" '"inspect" in j["context"]["command_line"] and j["context"]["utc_time"].endswith("Z")' \
    "context block"
json_check "$TMP/list.json" '[f["record_count"] for f in j["files"]] == [3, 1] and j["summary"]["records"] == 4' \
    "record counts"
json_check "$TMP/list.json" 'all(f["status"] == "ok" and f["error"] is None for f in j["files"])' \
    "every file ok"
json_check "$TMP/list.json" '(lambda e: all([{x: r[x] for x in e[f["path"]][0]} for r in f["records"]] == e[f["path"]] for f in j["files"]))(json.load(open("'"$TMP/expect.json"'")))' \
    "offsets, stored/raw bytes, zlib flags and SHA-256 of the stored payloads match Python's"
json_check "$TMP/list.json" '[(r["index"], r["rows"], r["k"], r["row_stride"], r["length_min"], r["length_max"]) for r in j["files"][0]["records"]] == [(0, 4, 64, 300, 0, 300), (1, 4, 16, 300, 0, 200), (2, 2, 2048, 1000, 0, 999)]' \
    "shapes, k and length ranges"
json_check "$TMP/list.json" '(lambda r: r["row_starts"] and r["page_table"] and r["page_size"] == 64 and r["page_table_cols"] == 5 and r["engine_indices"] and r["compressed"])(j["files"][0]["records"][1]) and not any(j["files"][0]["records"][0][x] for x in ("row_starts", "page_table", "engine_indices", "compressed"))' \
    "optional section flags"
json_check "$TMP/list.json" 'j["files"][0]["records"][0]["metadata"] == {"engine": "sglang", "model": "DeepSeek-V3.2", "layer": 3, "step": 11} and j["files"][0]["records"][1]["metadata"] == {"note": "caf\u00e9"} and j["files"][0]["records"][2]["metadata"] == {}' \
    "metadata objects"
json_check "$TMP/list.json" 'all(r["checksum"] == "ok" for f in j["files"] for r in f["records"])' \
    "checksum status ok"

# Table (default) on stdout.
SHA0=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][0]["payload_sha256"])' "$TMP/expect.json" "$TMP/a.bin")
expect_exit 0 "inspect as a table" -- "$AUDIT" inspect "$TMP/a.bin"
expect_grep "^# .*a\.bin: 3 records, [0-9]+ bytes, ok" "$TMP/out" "table names the file and count"
expect_grep "^ +0 +0 +4 +64 +300 0\.\.300 .* $SHA0 \{\"engine\":\"sglang\"" "$TMP/out" "table row of record 0"
expect_grep "row_starts,page_table/64,engine_indices,zlib" "$TMP/out" "table lists the sections"

# Concatenated files are one capture.
cat "$TMP/a.bin" "$TMP/b.bin" >"$TMP/ab.bin"
expect_exit 0 "inspect a concatenation" -- "$AUDIT" inspect --format json "$TMP/ab.bin"
json_check "$TMP/out" 'j["files"][0]["record_count"] == 4 and j["files"][0]["records"][3]["k"] == 1' \
    "cat a.bin b.bin holds 4 records"

# Truncated: the writer was killed inside the last record.
SIZE=$(stat -c %s "$TMP/a.bin")
LAST=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][2]["offset_bytes"])' "$TMP/expect.json" "$TMP/a.bin")
head -c $((SIZE - 10)) "$TMP/a.bin" >"$TMP/truncated.bin"
expect_exit 0 "truncated file without --verify" -- "$AUDIT" inspect --format json "$TMP/truncated.bin"
expect_grep "truncated\.bin: record 2 at byte $LAST: truncated: header promises [0-9]+ payload bytes, [0-9]+ remain" \
    "$TMP/err" "stderr names file, record and offset of the truncation"
json_check "$TMP/out" '(lambda f: f["status"] == "truncated" and f["record_count"] == 2 and f["error"]["record"] == 2 and f["error"]["offset_bytes"] == '"$LAST"')(j["files"][0])' \
    "JSON marks the file truncated after 2 records"
expect_exit 3 "truncated file with --verify" -- "$AUDIT" inspect --verify "$TMP/truncated.bin"
head -c $((LAST + 40)) "$TMP/a.bin" >"$TMP/cut-header.bin"
expect_exit 3 "file ending inside a record header, --verify" -- "$AUDIT" inspect --verify "$TMP/cut-header.bin"
expect_grep "record 2 at byte $LAST: truncated: the file ends 40 bytes into the 72-byte record header" \
    "$TMP/err" "a cut inside the header is truncation"

# Corrupt: one flipped bit in the payload of record 1.
SECOND=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][1]["offset_bytes"])' "$TMP/expect.json" "$TMP/a.bin")
"$PYTHON" -c '
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[int(sys.argv[2]) + 72 + 5] ^= 0x10
open(sys.argv[3], "wb").write(data)' "$TMP/a.bin" "$SECOND" "$TMP/corrupt.bin"
expect_exit 0 "corrupt file without --verify" -- "$AUDIT" inspect --format json "$TMP/corrupt.bin"
expect_grep "corrupt\.bin: record 1 at byte $SECOND: corrupt: payload SHA-256 mismatch" "$TMP/err" \
    "stderr names the corrupt record"
json_check "$TMP/out" '(lambda f: f["status"] == "corrupt" and f["record_count"] == 1 and f["error"]["record"] == 1)(j["files"][0])' \
    "JSON marks the file corrupt after 1 record"
expect_exit 3 "corrupt file with --verify" -- "$AUDIT" inspect --verify "$TMP/corrupt.bin" "$TMP/b.bin"
expect_grep "^ +1 +$SECOND +- .* corrupt +.*payload SHA-256 mismatch" "$TMP/out" "table shows the corrupt record"
expect_exit 0 "good files pass --verify" -- "$AUDIT" inspect --verify "$TMP/a.bin" "$TMP/b.bin"

# The Python reader agrees on the damaged files.
"$PYTHON" - "$TMP/truncated.bin" "$TMP/corrupt.bin" <<'EOF' && pass "python reader reports truncation and corruption" || fail "python reader on damaged files"
import sys
from dsatopk_capture import CaptureError, read_records
for path, good, truncated in ((sys.argv[1], 2, True), (sys.argv[2], 1, False)):
    seen = []
    try:
        for record in read_records(path):
            seen.append(record)
        raise SystemExit(f"{path}: no error raised")
    except CaptureError as error:
        assert len(seen) == good and error.index == good and error.truncated == truncated, error
EOF

# Missing files and bad options.
expect_exit 3 "missing file" -- "$AUDIT" inspect "$TMP/nope.bin"
expect_grep "nope\.bin: cannot open" "$TMP/err" "stderr names the missing file"
expect_exit 3 "missing file among good ones" -- "$AUDIT" inspect --format json "$TMP/a.bin" "$TMP/nope.bin"
json_check "$TMP/out" '[f["status"] for f in j["files"]] == ["ok", "unreadable"]' "the good file is still listed"
expect_exit 2 "unknown option" -- "$AUDIT" inspect --bogus "$TMP/a.bin"
expect_grep "unknown option '--bogus'" "$TMP/err" "unknown option named"
expect_exit 2 "bad --format" -- "$AUDIT" inspect --format xml "$TMP/a.bin"
expect_exit 2 "-o without a value" -- "$AUDIT" inspect "$TMP/a.bin" -o
expect_exit 2 "no file" -- "$AUDIT" inspect --verify
expect_exit 0 "--help" -- "$AUDIT" inspect --help
expect_grep "^usage: dsatopk-audit inspect" "$TMP/out" "--help prints the usage"

finish
