#!/usr/bin/env bash
# Memory follows what was verified, not what a record header claims (docs/FORMAT.md "Reading"):
# a 1 GiB sparse file whose payload hash does not match is refused as corrupt with a peak
# resident set of a few MiB (the payload is hashed in bounded pieces before anything of its size
# is allocated); a 64 GiB claim is refused at once as too_large, over the memory cap per record,
# which FORMAT.md documents, inspect's summary counts and the global --max-record-bytes moves; the
# messages name the file and the record. Each command runs under timeout.
. "$(dirname "$0")/lib.sh"
need_python_with_numpy

LIMIT=60
T() { timeout "$LIMIT" "$@"; }
# sparse_claim FILE BYTES: a record header claiming BYTES uncompressed payload bytes (CRC right, a
# SHA-256 no payload of zeros has), then a hole of that size. Fails where the filesystem refuses.
sparse_claim() {
    "$PYTHON" - "$1" "$2" <<'EOF'
import os, struct, sys, zlib
path, size = sys.argv[1], int(sys.argv[2])
header = b"DSATOPK\n" + struct.pack("<HHIQQ", 1, 0, 0, size, size) + b"\xab" * 32 + b"\0" * 4
with open(path, "wb") as f:
    f.write(header + struct.pack("<I", zlib.crc32(header)))
    f.truncate(72 + size)
EOF
}
# peak_kib COMMAND...: runs it under /usr/bin/time, leaves the peak resident set (KiB) in $PEAK
# and the exit status in $STATUS; stdout and stderr in $TMP/out, $TMP/err.
peak_kib() {
    T /usr/bin/time -f "%M" -o "$TMP/time" "$@" >"$TMP/out" 2>"$TMP/err"
    STATUS=$?
    PEAK=$(tail -1 "$TMP/time")
}

T "$AUDIT" synth -f random -b 2 -L 64 -k 4 -o "$TMP/tiny.bin" >/dev/null

# ---- a 1 GiB sparse claim ------------------------------------------------------------------------
if sparse_claim "$TMP/sparse.bin" $((1 << 30)) 2>/dev/null; then
    if [ -x /usr/bin/time ]; then
        peak_kib "$AUDIT" inspect --format json -o "$TMP/tiny.json" "$TMP/tiny.bin"
        BASE=$PEAK
        peak_kib "$AUDIT" inspect --format json -o "$TMP/sparse.json" "$TMP/sparse.bin"
        if [ "$STATUS" -eq 0 ] && [ $((PEAK - BASE)) -lt $((32 * 1024)) ]; then
            pass "inspect of a 1 GiB sparse claim: peak RSS ${PEAK} KiB (a tiny file: ${BASE} KiB)"
        else
            fail "inspect of a 1 GiB sparse claim: exit $STATUS, peak RSS ${PEAK} KiB (a tiny file: ${BASE} KiB)"
        fi
    else
        T "$AUDIT" inspect --format json -o "$TMP/sparse.json" "$TMP/sparse.bin" 2>"$TMP/err"
        echo "# /usr/bin/time is missing: the peak resident set is not measured"
    fi
    json_check "$TMP/sparse.json" 'j["files"][0]["status"] == "corrupt" and j["summary"]["corrupt_files"] == 1' \
        "the sparse claim is corrupt"
    expect_grep "sparse\.bin: record 0 at byte 0: corrupt: payload SHA-256 mismatch" "$TMP/err" \
        "the message names the file and the record"
    rm -f "$TMP/sparse.bin"
else
    echo "# this filesystem has no 1 GiB sparse files: skipped"
fi

# ---- a 64 GiB claim: over the memory cap --------------------------------------------------------
if sparse_claim "$TMP/huge.bin" $((64 << 30)) 2>/dev/null; then
    expect_exit 4 "inspect of a 64 GiB claim: exit 4" -- \
        T "$AUDIT" inspect --format json -o "$TMP/huge.json" "$TMP/huge.bin"
    expect_grep "huge\.bin: record 0 at byte 0: too large: the raw payload of 68719476736 bytes is over the memory cap of 8589934592 bytes per record" \
        "$TMP/err" "the message names the file, the record and the cap"
    json_check "$TMP/huge.json" 'j["files"][0]["status"] == "too_large" and j["files"][0]["error"]["kind"] == "too_large" and j["summary"]["too_large_files"] == 1 and j["summary"]["out_of_memory_files"] == 0' \
        "status too_large, counted in the summary"
    T "$AUDIT" inspect "$TMP/huge.bin" >"$TMP/out" 2>/dev/null
    expect_grep "too large: 1, unreadable: 0, out of memory: 0" "$TMP/out" "the table's summary counts it"
    expect_exit 4 "census of the 64 GiB claim: exit 4" -- \
        T "$AUDIT" census -o "$TMP/census.json" "$TMP/huge.bin"
    expect_grep "huge\.bin: record 0 at byte 0: too large" "$TMP/err" "census names the file and the record"
    rm -f "$TMP/huge.bin"
else
    echo "# this filesystem has no 64 GiB sparse files: skipped"
fi

# ---- --max-record-bytes ----------------------------------------------------------------------
RAW=$(($(stat -c %s "$TMP/tiny.bin") - 72))
expect_exit 4 "--max-record-bytes below a record's raw payload: too large" -- \
    T "$AUDIT" --max-record-bytes $((RAW - 1)) inspect --verify "$TMP/tiny.bin"
expect_grep "over the memory cap of $((RAW - 1)) bytes per record" "$TMP/err" "the cap given is the cap used"
expect_exit 0 "--max-record-bytes equal to it: read" -- \
    T "$AUDIT" --max-record-bytes "$RAW" inspect --verify "$TMP/tiny.bin"
expect_exit 0 "--max-record-bytes with a suffix" -- \
    T "$AUDIT" --max-record-bytes 1K inspect --verify "$TMP/tiny.bin"
# Every reader of captures maps a record over the cap to exit 4, as the help says (diff too).
for command in "census -o $TMP/c.json" "diff" "extract --records 0 -o $TMP/e.bin" "run --quiet --out $TMP/r.json"; do
    files="$TMP/tiny.bin"
    [ "$command" = diff ] && files="$TMP/tiny.bin $TMP/tiny.bin"
    # shellcheck disable=SC2086
    expect_exit 4 "${command%% *} of a record over --max-record-bytes: exit 4" -- \
        T "$AUDIT" --max-record-bytes $((RAW - 1)) $command $files
    expect_grep "tiny\.bin: record 0 at byte 0: too large" "$TMP/err" "${command%% *} names the file and the record"
done
for bad in 0 abc 1X 1KK -1 99999999999999999999; do
    expect_exit 2 "--max-record-bytes $bad is a usage error" -- \
        T "$AUDIT" --max-record-bytes "$bad" inspect "$TMP/tiny.bin"
done
"$PYTHON" -c 'import sys, numpy as np; np.save(sys.argv[1], np.zeros((4, 1024), np.float32))' "$TMP/big.npy"
expect_exit 4 "import of an array file over the cap: exit 4" -- \
    T "$AUDIT" --max-record-bytes 4K import --scores "$TMP/big.npy" --k 4 -o "$TMP/x.bin"
expect_grep "big\.npy: [0-9]+ bytes, over the limit of 4096 bytes for an array file" "$TMP/err" \
    "the message names the file, its size and the cap"

finish
