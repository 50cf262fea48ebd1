#!/usr/bin/env bash
# Command-line tests of `run --shard I/N` and `merge` without a GPU (they also pass with one): the
# shards of a 7-record corpus over two files hold every N-th record, their merge equals the
# unsharded report (records in global order, summary recomputed), a missing shard leaves an
# incomplete report that `gate` fails, and merge refuses overlapping shards, shards of another N or
# configuration, reports that are not shards and reports of another schema version (exit 3).
. "$(dirname "$0")/lib.sh"

A_BIN="$TMP/a.bin"
B_BIN="$TMP/b.bin"
make_captures() {
    "$AUDIT" synth -f tie -b 4 -L 512 -k 16 --ties 8 -o "$A_BIN" &&
        "$AUDIT" synth -f paged -b 3 -L 1000 -k 16 -a -o "$A_BIN" &&
        "$AUDIT" synth -f offsets -b 3 -L 700 -k 32 -a -o "$A_BIN" &&
        "$AUDIT" synth -f nan -b 2 -L 300 -k 20 -a -o "$A_BIN" &&
        "$AUDIT" synth -f tie -b 2 -L 256 -k 8 --ties 4 --seed 3 -o "$B_BIN" &&
        "$AUDIT" synth -f tie -b 2 -L 256 -k 8 --ties 4 --seed 4 -a -o "$B_BIN" &&
        "$AUDIT" synth -f tie -b 2 -L 256 -k 8 --ties 4 --seed 5 -a -o "$B_BIN"
}
if "$AUDIT" help merge >/dev/null 2>&1 && make_captures >"$TMP/synth.log" 2>&1; then
    pass "made 4 + 3 records in two captures with synth"
else
    echo "SKIP: \`dsatopk-audit merge\` or \`synth\` is not available"; cat "$TMP/synth.log"
    exit 77
fi

FULL="$TMP/full.json"
expect_exit 0 "the unsharded run" -- "$AUDIT" run --quiet --reps 2 --out "$FULL" "$A_BIN" "$B_BIN"
json_check "$FULL" '[r["global_index"] for r in j["records"]] == list(range(7))' "global_index numbers the records 0..6 across both files"

for i in 0 1 2; do
    expect_exit 0 "run --shard $i/3" -- "$AUDIT" run --quiet --reps 2 --shard $i/3 --out "$TMP/shard$i.json" "$A_BIN" "$B_BIN"
done
json_check "$TMP/shard0.json" '[r["global_index"] for r in j["records"]] == [0, 3, 6] and j["context"]["shard"] == {"index": 0, "count": 3}' \
    "shard 0/3: global records 0, 3, 6 and the shard in the context"
json_check "$TMP/shard1.json" '[(r["file"].split("/")[-1], r["index"]) for r in j["records"]] == [("a.bin", 1), ("b.bin", 0)]' \
    "shard 1/3: a.bin:1 and b.bin:0 (numbering runs across the files)"
json_check "$TMP/shard2.json" '[r["global_index"] for r in j["records"]] == [2, 5] and j["summary"]["records"] == 2' \
    "shard 2/3: global records 2 and 5, its own summary"

M="$TMP/merged.json"
expect_exit 0 "merge the three shards (given out of order)" -- "$AUDIT" merge -o "$M" "$TMP/shard2.json" "$TMP/shard0.json" "$TMP/shard1.json"
expect_grep '^# merged 3 shard report\(s\): 7 record\(s\)' "$TMP/out" "merge prints a summary line"
python3 - "$FULL" "$M" >"$TMP/compare.txt" 2>&1 <<'EOF'
import json, sys
full, merged = (json.load(open(p)) for p in sys.argv[1:3])
# Times differ from run to run (docs/REPORT.md "time_breakdown_ms"); everything else must not.
def timeless(records):
    for record in records:
        record.pop("time_breakdown_ms", None)
        for backend in record["backends"]:
            backend.pop("time_breakdown_ms", None)
    return records
assert timeless(merged["records"]) == timeless(full["records"]), "records differ"
assert merged["summary"] == full["summary"], (merged["summary"], full["summary"])
assert merged["input_errors"] == full["input_errors"]
print("same records and summary")
EOF
expect_grep '^same records and summary$' "$TMP/compare.txt" "the merge equals the unsharded report (records, summary)"
json_check "$M" 'j["schema"] == "dsatopk-audit/report" and j["complete"] and j["context"]["shard"] is None and [s["index"] for s in j["shards"]] == [0, 1, 2]' \
    "merged: a complete report, context.shard null, shards[] in order"
json_check "$M" 'all(s["context"]["shard"]["index"] == s["index"] and s["records"] in (2, 3) for s in j["shards"])' \
    "merged: each shard's context and record count kept"
# Without a GPU nothing ran in either: the policy allows that, so what is compared is the merge.
echo '{"allow_nothing_audited": true}' >"$TMP/nothing.json"
expect_exit 0 "gate accepts the merged report against the unsharded baseline" -- \
    "$AUDIT" gate --baseline "$FULL" --policy "$TMP/nothing.json" --format none \
    --out "$TMP/verdict.json" "$M"

# --records first, then --shard over the records it selects.
expect_exit 0 "run --records 0,2,3 --shard 1/2" -- \
    "$AUDIT" run --quiet --reps 1 --records 0,2,3 --shard 1/2 --out "$TMP/selected.json" "$A_BIN"
json_check "$TMP/selected.json" '[(r["index"], r["global_index"]) for r in j["records"]] == [(2, 1)]' \
    "the shard numbering counts the records --records selects"

# ---- a missing shard -----------------------------------------------------------------------------
expect_exit 0 "merge with shard 1 of 3 missing" -- "$AUDIT" merge -o "$TMP/partial.json" "$TMP/shard0.json" "$TMP/shard2.json"
expect_grep 'warning: 1 of 3 shards missing: 1' "$TMP/err" "the warning names the missing shard"
json_check "$TMP/partial.json" 'j["complete"] is False and "missing: 1" in j["stop_reason"] and j["summary"]["records"] == 5' \
    "incomplete merged report: 5 records"
expect_exit 1 "gate fails the incomplete merge" -- "$AUDIT" gate --baseline "$FULL" --out "$TMP/verdict.json" "$TMP/partial.json"
json_check "$TMP/verdict.json" 'any("incomplete" in x for x in j["reports"][0]["report_reasons"]) and j["summary"]["missing"] == 18' \
    "gate: the report is incomplete and the 2 missing records x 9 backends are listed"

# ---- input errors appear once -------------------------------------------------------------------
head -c 3000 "$B_BIN" >"$TMP/cut.bin"
for i in 0 1; do
    expect_exit 3 "shard $i/2 of a corpus with a truncated file" -- \
        "$AUDIT" run --quiet --reps 1 --shard $i/2 --out "$TMP/cut$i.json" "$A_BIN" "$TMP/cut.bin"
done
expect_exit 0 "merge shards with the same input error" -- "$AUDIT" merge --quiet -o "$TMP/cut.json" "$TMP/cut0.json" "$TMP/cut1.json"
json_check "$TMP/cut.json" 'len(j["input_errors"]) == 1 and j["input_errors"][0]["kind"] == "truncated" and j["summary"]["input_errors"] == 1 and j["exit_code"] == 3' \
    "merged: the truncated file reported once, exit code 3 kept"

# ---- refusals: exit 3 ----------------------------------------------------------------------------
expect_exit 3 "the same shard twice" -- "$AUDIT" merge -o "$TMP/x.json" "$TMP/shard0.json" "$TMP/shard0.json"
expect_grep 'are both shard 0/3: overlapping shards' "$TMP/err" "overlap: the message says so"
expect_exit 0 "run --shard 1/2" -- "$AUDIT" run --quiet --reps 2 --shard 1/2 --out "$TMP/half1.json" "$A_BIN" "$B_BIN"
expect_exit 3 "shards of different N" -- "$AUDIT" merge -o "$TMP/x.json" "$TMP/shard0.json" "$TMP/half1.json"
expect_grep 'shards of one audit share N' "$TMP/err" "different N: the message names both"
expect_exit 0 "run --shard 1/3 --reps 3" -- "$AUDIT" run --quiet --reps 3 --shard 1/3 --out "$TMP/reps3.json" "$A_BIN" "$B_BIN"
expect_exit 3 "shards of different --reps" -- "$AUDIT" merge -o "$TMP/x.json" "$TMP/shard0.json" "$TMP/reps3.json"
expect_grep 'differ in context.reps: not shards of one audit' "$TMP/err" "different configuration named"
expect_exit 3 "a report that is not a shard" -- "$AUDIT" merge -o "$TMP/x.json" "$FULL"
expect_grep 'full.json: \$\.context\.shard: null: not a shard report' "$TMP/err" "not a shard: named"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["schema_version"]=2; json.dump(j, open(sys.argv[2],"w"))' "$TMP/shard1.json" "$TMP/v2.json"
expect_exit 3 "a shard of schema version 2" -- "$AUDIT" merge -o "$TMP/x.json" "$TMP/shard0.json" "$TMP/v2.json"
expect_grep 'v2.json: \$\.schema_version: dsatopk-audit/report version 2' "$TMP/err" "the version is named"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["records"][0]["global_index"]=5; json.dump(j, open(sys.argv[2],"w"))' "$TMP/shard1.json" "$TMP/moved.json"
expect_exit 3 "a record outside its shard" -- "$AUDIT" merge -o "$TMP/x.json" "$TMP/moved.json"
expect_grep 'records\[0\]\.global_index: 5 does not belong to shard 1/3' "$TMP/err" "the record is named"
expect_exit 3 "a missing shard file" -- "$AUDIT" merge -o "$TMP/x.json" "$TMP/nope.json"
if [ ! -e "$TMP/x.json" ]; then pass "nothing written on refusal"; else fail "a refused merge wrote its output"; fi

# ---- usage: exit 2 -------------------------------------------------------------------------------
for bad in 3/3 1/0 x/2 1 -1/2 2/; do
    expect_exit 2 "run --shard $bad" -- "$AUDIT" run --quiet --shard "$bad" --out "$TMP/x.json" "$A_BIN"
done
expect_grep 'is not I/N' "$TMP/err" "the message shows the expected form"
expect_exit 2 "merge without -o" -- "$AUDIT" merge "$TMP/shard0.json"
expect_exit 2 "merge without shards" -- "$AUDIT" merge -o "$TMP/x.json"
expect_exit 0 "merge --help" -- "$AUDIT" merge --help

finish
