#!/bin/bash
# dsatopk-audit census: JSON contents on captures with known answers (synth families and a
# hand-built record written by the dsatopk_capture package (tools/python/)), the table, -o, --records, --k, the
# default captures/*.bin, and the exit codes for bad options and damaged captures.
# Run from the source root: tests/cli/test_census.sh PATH/TO/dsatopk-audit
. "$(dirname "$0")/lib.sh"

SOURCE_ROOT=$(pwd)
AUDIT_PATH=$(readlink -f "$AUDIT") # the default-captures checks run in other directories

# ---- captures -------------------------------------------------------------------------------
# plateau: 4 rows of 4096, 100 distinct positives, the rest +0.0, k 256: the boundary is 0.0
# with a tie set of 3996 and 100 above, in every row. A second record (narrow, 2 x 32768,
# k 2048) puts every row in one coarse bin.
expect_exit 0 "synth plateau" -- "$AUDIT" synth --family plateau --rows 4 --length 4096 --k 256 \
    --distinct 100 --seed 3 -o "$TMP/two.bin"
expect_exit 0 "synth narrow appended" -- "$AUDIT" synth --family narrow --rows 2 --length 32768 \
    --k 2048 --seed 4 --append -o "$TMP/two.bin"

# A hand-built record: row 0 = 3 5 3 1 3 4 2 3 (k 4: boundary 3.0, 4 ties, 2 above, gap 0);
# row 1 = +0.0 plateau with -inf, NaN and a subnormal, window offset 2, length 6.
python3 - "$TMP/hand.bin" <<'EOF' 2>"$TMP/pyerr"
import sys
import numpy as np
sys.path.insert(0, "tools/python")
from dsatopk_capture import append_record
scores = np.zeros((2, 8), dtype=np.float32)
scores[0] = [3, 5, 3, 1, 3, 4, 2, 3]
bits = scores.view(np.uint32)
bits[1] = [0x7FC00000, 0x7FC00000, 0x00000000, 0xFF800000, 0x00000001, 0x00000000, 0x3F800000, 0x80000000]
append_record(sys.argv[1], scores, np.array([8, 6], dtype=np.int32), 4,
              row_starts=np.array([0, 2], dtype=np.int32), metadata={"engine": "hand"})
EOF
if [ $? -eq 0 ]; then pass "hand-built capture written"; else fail "hand-built capture"; cat "$TMP/pyerr"; fi

# ---- JSON contents ----------------------------------------------------------------------------
expect_exit 0 "census --k 256,50,0 (JSON to stdout)" -- "$AUDIT" census --k 256,50,0 "$TMP/two.bin"
cp "$TMP/out" "$TMP/two.json"
json_check "$TMP/two.json" 'j["schema"] == "dsatopk-audit/census" and j["schema_version"] == 2' "schema and version"
json_check "$TMP/two.json" 'j["context"]["tool_version"] and "census" in j["context"]["command_line"] and j["context"]["utc_time"].endswith("Z")' "context block"
json_check "$TMP/two.json" 'j["ks"] == [256, 50, 0] and j["files"][0]["status"] == "ok" and j["files"][0]["record_count"] == 2' "ks and record count"
json_check "$TMP/two.json" '[c["k"] for c in j["files"][0]["records"][0]["census"]] == [256, 50]' "k 0 resolves to the record k, taken once"
json_check "$TMP/two.json" '[c["k"] for c in j["files"][0]["records"][1]["census"]] == [256, 50, 2048]' "each record resolves its own k"
P='j["files"][0]["records"][0]["census"][0]'
json_check "$TMP/two.json" "$P[\"rows\"] == 4 and $P[\"rows_with_boundary\"] == 4 and $P[\"record_k\"]" "plateau k 256: rows"
json_check "$TMP/two.json" "$P[\"tie_set\"] == {\"median\": 3996, \"p90\": 3996, \"max\": 3996}" "plateau k 256: tie set 3996"
json_check "$TMP/two.json" "$P[\"underdetermined_rows\"] == 4 and $P[\"zero_boundary_rows\"] == 4" "plateau k 256: underdetermined, zero boundary"
json_check "$TMP/two.json" "abs($P[\"zero_fraction\"] - 3996 / 4096) < 1e-12 and $P[\"zeros\"] == 4 * 3996" "plateau: zero fraction"
json_check "$TMP/two.json" "$P[\"radix_overflow_rows\"] == 0 and $P[\"gap\"][\"min\"] == 0" "plateau k 256: no overflow, gap 0"
json_check "$TMP/two.json" "all(r[\"above\"] == 100 and r[\"tie_set\"] == 3996 and r[\"boundary_bits\"] == \"0x00000000\" and r[\"coarse_bin\"] == 128 and r[\"coarse_bin_count\"] == 3996 for r in $P[\"per_row\"])" "plateau k 256: per-row values"
Q='j["files"][0]["records"][0]["census"][1]'
json_check "$TMP/two.json" "$Q[\"k\"] == 50 and $Q[\"underdetermined_rows\"] == 0 and $Q[\"tie_set\"][\"max\"] == 1" "plateau k 50: determined"
json_check "$TMP/two.json" "all(abs(r[\"boundary\"] - 0.55) < 1e-6 and abs(r[\"gap\"] - 0.001) < 1e-6 for r in $Q[\"per_row\"])" "plateau k 50: boundary 0.55, gap 0.001"
N='j["files"][0]["records"][1]["census"][2]'
json_check "$TMP/two.json" "$N[\"k\"] == 2048 and $N[\"radix_overflow_rows\"] == 2 and $N[\"filtered_overflow_rows\"] == 2" "narrow: staging overflow predicted"
json_check "$TMP/two.json" "$N[\"underdetermined_rows\"] == 2 and $N[\"tie_set\"][\"max\"] > 1000" "narrow: huge exact ties"

expect_exit 0 "census of the hand-built record" -- "$AUDIT" census --k 4,1 "$TMP/hand.bin"
cp "$TMP/out" "$TMP/hand.json"
H='j["files"][0]["records"][0]'
json_check "$TMP/hand.json" "$H[\"metadata\"][\"engine\"] == \"hand\"" "metadata carried"
json_check "$TMP/hand.json" "$H[\"census\"][0][\"window_entries\"] == 14 and $H[\"census\"][0][\"zeros\"] == 3 and $H[\"census\"][0][\"neg_inf\"] == 1 and $H[\"census\"][0][\"nan\"] == 0 and $H[\"census\"][0][\"subnormal\"] == 1" "window counts honour row_starts"
R0="$H[\"census\"][0][\"per_row\"][0]"
json_check "$TMP/hand.json" "$R0[\"boundary\"] == 3 and $R0[\"boundary_bits\"] == \"0x40400000\" and $R0[\"tie_set\"] == 4 and $R0[\"above\"] == 2 and $R0[\"underdetermined\"] and $R0[\"gap\"] == 0 and $R0[\"coarse_bin\"] == 0xC2 and $R0[\"coarse_bin_count\"] == 4" "row 0 at k 4"
R1="$H[\"census\"][0][\"per_row\"][1]"
# window of row 1: +0.0, -inf, subnormal, +0.0, 1.0, -0.0 -> ranked 1.0, sub, +0, +0 | -0
json_check "$TMP/hand.json" "$R1[\"candidates\"] == 5 and $R1[\"boundary_bits\"] == \"0x00000000\" and $R1[\"tie_set\"] == 2 and $R1[\"above\"] == 2 and not $R1[\"underdetermined\"] and $R1[\"zero_boundary\"] and $R1[\"coarse_bin_count\"] == 3" "row 1 at k 4 (+0.0 boundary, -0.0 below)"
json_check "$TMP/hand.json" "$H[\"census\"][1][\"per_row\"][1][\"boundary\"] == 1 and $H[\"census\"][1][\"per_row\"][1][\"gap\"] == 1" "row 1 at k 1"

# No NaN or Infinity tokens anywhere (Python's parser accepts them unless told not to).
if python3 -c 'import json,sys
def refuse(token): raise ValueError(token)
for path in sys.argv[1:]: json.load(open(path), parse_constant=refuse)' "$TMP/two.json" "$TMP/hand.json" 2>"$TMP/pyerr"; then
    pass "no NaN/Infinity tokens"; else fail "NaN/Infinity token in the JSON"; cat "$TMP/pyerr"; fi

# ---- --records, -o, table -----------------------------------------------------------------------
expect_exit 0 "census --records 1 -o FILE" -- "$AUDIT" census --records 1 -o "$TMP/only1.json" "$TMP/two.bin"
json_check "$TMP/only1.json" 'len(j["files"][0]["records"]) == 1 and j["files"][0]["records"][0]["record"] == 1' "--records keeps record 1 only"
json_check "$TMP/only1.json" '[c["k"] for c in j["files"][0]["records"][0]["census"]] == [512, 1024, 2048]' "default ks 512,1024,2048 and the record k"
[ -s "$TMP/out" ] && fail "-o leaves stdout empty" || pass "-o leaves stdout empty"
expect_exit 0 "census --records 5 (absent)" -- "$AUDIT" census --records 5 "$TMP/two.bin"
expect_grep "no record 5" "$TMP/err" "an absent record is named on stderr"

expect_exit 0 "census --format table" -- "$AUDIT" census --format table --k 256,50 "$TMP/two.bin" "$TMP/hand.bin"
expect_grep "tie med/p90/max" "$TMP/out" "table header"
expect_grep "^ +0 +256\\* +4 +97\\.56 +3996/3996/3996 +4/4 +4/4 +0/4 +0/4 +0/0" "$TMP/out" "table line: plateau record at k 256"
LINES=$(grep -cE '^ +[0-9]+ +[0-9]+\*? ' "$TMP/out")
[ "$LINES" -eq 6 ] && pass "one table line per record and k (6)" || fail "table lines: $LINES, wanted 6"

# ---- default captures/*.bin ---------------------------------------------------------------------
mkdir -p "$TMP/cwd/captures"
cp "$TMP/hand.bin" "$TMP/cwd/captures/a.bin"
cp "$TMP/two.bin" "$TMP/cwd/captures/b.bin"
(cd "$TMP/cwd" && "$AUDIT_PATH" census --k 4 >"$TMP/default.json" 2>"$TMP/err")
STATUS=$?
[ $STATUS -eq 0 ] && pass "no CAPTURE: captures/*.bin" || fail "no CAPTURE: exit $STATUS"
json_check "$TMP/default.json" '[f["path"] for f in j["files"]] == ["captures/a.bin", "captures/b.bin"]' "captures/*.bin in name order"
mkdir -p "$TMP/empty"
(cd "$TMP/empty" && "$AUDIT_PATH" census >"$TMP/out" 2>"$TMP/err")
STATUS=$?
[ $STATUS -eq 2 ] && pass "no CAPTURE and no captures/ (exit 2)" || fail "no captures/: exit $STATUS, wanted 2"
expect_grep "captures/\\*\\.bin" "$TMP/err" "the message names captures/*.bin"
cd "$SOURCE_ROOT" || exit 1

# ---- damaged captures ---------------------------------------------------------------------------
SIZE=$(stat -c %s "$TMP/two.bin")
head -c $((SIZE - 100)) "$TMP/two.bin" >"$TMP/truncated.bin"
expect_exit 3 "truncated capture" -- "$AUDIT" census -o "$TMP/truncated.json" "$TMP/truncated.bin"
expect_grep "truncated.bin" "$TMP/err" "stderr names the file"
expect_grep "record 1" "$TMP/err" "stderr names the record"
json_check "$TMP/truncated.json" 'j["files"][0]["status"] == "truncated" and j["files"][0]["record_count"] == 1 and j["files"][0]["error"]["record"] == 1' "records before the truncation reported"

# Flip one byte in the middle of the second record's payload: its SHA-256 no longer matches.
cp "$TMP/two.bin" "$TMP/corrupt.bin"
python3 -c 'import sys
path, at = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read()); data[at] ^= 0x40; open(path, "wb").write(data)' "$TMP/corrupt.bin" $((SIZE - 5000))
expect_exit 3 "corrupt capture" -- "$AUDIT" census -o "$TMP/corrupt.json" "$TMP/corrupt.bin" "$TMP/hand.bin"
expect_grep "corrupt.bin" "$TMP/err" "stderr names the corrupt file"
json_check "$TMP/corrupt.json" 'j["files"][0]["status"] == "corrupt" and j["files"][0]["record_count"] == 1 and j["files"][1]["status"] == "ok"' "corrupt file: first record kept, later files still read"
expect_exit 3 "missing capture" -- "$AUDIT" census "$TMP/does-not-exist.bin"
expect_grep "does-not-exist.bin" "$TMP/err" "stderr names the missing file"

# ---- bad options -------------------------------------------------------------------------------
expect_exit 2 "--format xml" -- "$AUDIT" census --format xml "$TMP/hand.bin"
expect_grep "format" "$TMP/err" "the message names --format"
expect_exit 2 "--k abc" -- "$AUDIT" census --k abc "$TMP/hand.bin"
expect_exit 2 "--k above the largest k" -- "$AUDIT" census --k 99999999 "$TMP/hand.bin"
expect_exit 2 "--records -1" -- "$AUDIT" census --records -1 "$TMP/hand.bin"
expect_exit 2 "unknown option" -- "$AUDIT" census --frobnicate "$TMP/hand.bin"
expect_exit 2 "--k without a value" -- "$AUDIT" census --k
expect_exit 0 "census --help" -- "$AUDIT" census --help
expect_grep "usage: dsatopk-audit census" "$TMP/out" "help text"

finish
