#!/usr/bin/env bash
# extract: rows and records chosen by --records/--rows and by a hand-written run report, every
# section of the chosen rows copied bit for bit (read back with the dsatopk_capture package (tools/python/)), the
# metadata kept with its provenance added, and the refusals with their exit codes.
. "$(dirname "$0")/lib.sh"

need_python_with_numpy
D=$TMP
mkdir -p "$D/runs"

# Three records: every optional section in record 0 and 2 (compressed), a plain record 1.
"$PYTHON" - "$D/runs/in.bin" <<'EOF' || fail "writing the capture with the dsatopk_capture package (tools/python/)"
import sys
import numpy as np
from dsatopk_capture import append_record

path = sys.argv[1]
rng = np.random.default_rng(3)
rows, stride, k, page = 6, 128, 8, 32
for record in range(3):
    scores = rng.standard_normal((rows, stride)).astype(np.float32)
    if record == 1:
        append_record(path, scores, [stride] * rows, k, metadata={"layer": 1})
        continue
    lengths = [100 - 10 * b for b in range(rows)]
    row_starts = [b * 4 for b in range(rows)]
    table = rng.permutation(rows * 5).reshape(rows, 5).astype(np.int32)
    engine = rng.integers(-1, 100, size=(rows, k)).astype(np.int32)
    append_record(path, scores, lengths, k, row_starts=row_starts, page_table=table,
                  page_size=page, page_table_row_starts=[b % 2 for b in range(rows)],
                  engine_indices=engine, metadata={"layer": record, "step": 40},
                  compress=record == 2)
EOF
IN=$D/runs/in.bin

cat >"$D/check.py" <<'EOF'
import json, sys
import numpy as np
from dsatopk_capture import read_records

source, extracted, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
originals = list(read_records(source))
written = list(read_records(extracted))
assert len(written) == len(plan), (len(written), plan)
for record, (index, rows) in zip(written, plan):
    original = originals[index]
    assert record.k == original.k and record.row_stride == original.row_stride
    assert record.page_size == original.page_size
    assert np.array_equal(record.scores.view(np.uint32), original.scores[rows].view(np.uint32))
    assert record.lengths.tolist() == original.lengths[rows].tolist()
    for name in ("row_starts", "page_table", "page_table_row_starts", "engine_indices"):
        ours, theirs = getattr(record, name), getattr(original, name)
        assert (ours is None) == (theirs is None), name
        if ours is not None:
            assert np.array_equal(ours, theirs[rows]), name
    meta = dict(record.metadata)
    provenance = meta.pop("extracted_from")
    expected_previous = original.metadata.get("extracted_from")
    original_meta = {key: value for key, value in original.metadata.items()
                     if key != "extracted_from"}
    assert meta == original_meta, (meta, original_meta)
    assert provenance["file"] == source and provenance["record"] == index
    assert provenance["rows"] == rows, provenance
    assert provenance["payload_sha256"] == original.payload_sha256
    assert provenance.get("previous") == expected_previous
    for key in ("report", "backend"):
        if key in sys.argv[4:]:
            assert key in provenance, provenance
print("ok")
EOF
check() {
    local what=$1
    shift
    if "$PYTHON" "$D/check.py" "$@" >"$TMP/py.out" 2>&1; then pass "$what"; else
        fail "$what"; tail -5 "$TMP/py.out" | sed 's/^/    /'; fi
}

# ---- by records and rows ----
expect_exit 0 "extract --records 0,2 --rows 1,3" -- \
    "$AUDIT" extract "$IN" --records 0,2 --rows 3,1 -o "$D/sub.bin"
expect_grep "wrote 2 records \(4 rows\)" "$TMP/out" "extract says what it wrote"
check "records 0 and 2, rows 1 and 3: every section copied, metadata and provenance" \
    "$IN" "$D/sub.bin" '[[0, [1, 3]], [2, [1, 3]]]'
expect_exit 0 "inspect --verify accepts the reproducer" -- "$AUDIT" inspect --verify "$D/sub.bin"
expect_exit 0 "census runs on the reproducer" -- "$AUDIT" census "$D/sub.bin"
expect_exit 0 "extract --records 1 (all its rows), compressed" -- \
    "$AUDIT" extract "$IN" --records 1 --compress -o "$D/one.bin"
check "record 1 whole" "$IN" "$D/one.bin" '[[1, [0, 1, 2, 3, 4, 5]]]'
expect_exit 0 "extract --rows 0-1,5 from every record" -- "$AUDIT" extract "$IN" --rows 0-1,5 -o "$D/rows.bin"
check "rows 0, 1, 5 of every record" "$IN" "$D/rows.bin" '[[0, [0, 1, 5]], [1, [0, 1, 5]], [2, [0, 1, 5]]]'
expect_exit 0 "an extract of an extract" -- "$AUDIT" extract "$D/sub.bin" --records 1 --rows 0 -o "$D/again.bin"
check "the earlier provenance moves under previous" "$D/sub.bin" "$D/again.bin" '[[1, [0]]]'
expect_exit 0 "a reproducer diffs clean against a second extraction" -- \
    "$AUDIT" extract "$IN" --records 0,2 --rows 1,3 -o "$D/sub2.bin"
expect_exit 0 "diff of the two extractions" -- "$AUDIT" diff "$D/sub.bin" "$D/sub2.bin"

# ---- from a run report (written by hand in the report's shape) ----
cat >"$D/report.json" <<EOF
{"schema": "dsatopk-audit/report", "schema_version": 1, "records": [
  {"file": "$IN", "index": 0, "backends": [
     {"name": "radix", "flapping_rows": [{"row": 2, "reps_differing": 3}, {"row": 4}],
      "wrong_rows": [1], "predicted_vs_observed": {"wrong_rows": 1,
      "wrong_not_predicted_overflow_list": [4]}},
     {"name": "bitonic", "flapping_rows": []}]},
  {"file": "$IN", "index": 1, "backends": [{"name": "radix", "flapping_rows": []}]},
  {"file": "$IN", "index": 2, "backends": [
     {"name": "filtered", "flapping_rows": [{"row": 5}],
      "batch_invariance": {"dependent_rows": [{"row": 0}]}, "graph": {"flapping_rows": [{"row": 3}]}}]},
  {"file": "/elsewhere/other.bin", "index": 1, "backends": [
     {"name": "radix", "flapping_rows": [{"row": 0}]}]}]}
EOF
expect_exit 0 "extract --from-report" -- "$AUDIT" extract "$IN" --from-report "$D/report.json" -o "$D/rep.bin"
check "flapping, wrong, graph and batch rows of records 0 and 2; other files ignored" \
    "$IN" "$D/rep.bin" '[[0, [1, 2, 4]], [2, [0, 3, 5]]]' report
expect_exit 0 "--from-report --backend filtered" -- \
    "$AUDIT" extract "$IN" --from-report "$D/report.json" --backend filtered -o "$D/filtered.bin"
check "only the filtered backend's rows" "$IN" "$D/filtered.bin" '[[2, [0, 3, 5]]]' report backend
expect_exit 0 "--from-report --records 0" -- \
    "$AUDIT" extract "$IN" --from-report "$D/report.json" --records 0 -o "$D/rep0.bin"
check "the report's rows of record 0 only" "$IN" "$D/rep0.bin" '[[0, [1, 2, 4]]]' report

# A report written in another working directory names the capture by a relative path.
sed "s|$IN|runs/in.bin|g" "$D/report.json" >"$D/relative.json"
expect_exit 0 "a report naming the capture relative to another directory" -- \
    "$AUDIT" extract "$IN" --from-report "$D/relative.json" -o "$D/rel.bin"
check "matched by file name" "$IN" "$D/rel.bin" '[[0, [1, 2, 4]], [2, [0, 3, 5]]]'

# The report's payload_sha256 of a record must be the capture's: other bytes, other rows.
"$AUDIT" inspect --format json -o "$D/inspect.json" "$IN" >/dev/null 2>&1
"$PYTHON" - "$D/inspect.json" "$D/report.json" "$D/hashed.json" "$D/stale.json" <<'EOF2'
import json, sys
hashes = [r["payload_sha256"] for r in json.load(open(sys.argv[1]))["files"][0]["records"]]
report = json.load(open(sys.argv[2]))
for entry in report["records"][:3]:
    entry["payload_sha256"] = hashes[entry["index"]]
json.dump(report, open(sys.argv[3], "w"))
report["records"][2]["payload_sha256"] = "ab" * 32
json.dump(report, open(sys.argv[4], "w"))
EOF2
expect_exit 0 "a report whose payload hashes are the capture's" -- \
    "$AUDIT" extract "$IN" --from-report "$D/hashed.json" -o "$D/hashed.bin"
check "the same rows as without hashes" "$IN" "$D/hashed.bin" '[[0, [1, 2, 4]], [2, [0, 3, 5]]]'
expect_exit 3 "a report whose payload_sha256 is not the capture record's" -- \
    "$AUDIT" extract "$IN" --from-report "$D/stale.json" -o "$D/x.bin"
expect_grep "stale\.json gives record 2 payload_sha256 (ab){32}, but record 2 of .*in\.bin has payload_sha256 [0-9a-f]{64}" \
    "$TMP/err" "the message names the record and both hashes"

# ---- refusals ----
expect_exit 2 "--rows past the record" -- "$AUDIT" extract "$IN" --rows 6 -o "$D/x.bin"
expect_grep "row 6 is out of range: record 0 of .* has 6 rows" "$TMP/err" "the message names the row and record"
expect_exit 2 "--records past the file" -- "$AUDIT" extract "$IN" --records 1,3 -o "$D/x.bin"
expect_grep "record 3 is out of range.*has 3 records" "$TMP/err" "the message names the record"
expect_exit 2 "a malformed list" -- "$AUDIT" extract "$IN" --rows 2-1 -o "$D/x.bin"
expect_exit 2 "--rows with --from-report" -- \
    "$AUDIT" extract "$IN" --rows 1 --from-report "$D/report.json" -o "$D/x.bin"
expect_exit 2 "--backend without --from-report" -- "$AUDIT" extract "$IN" --backend radix -o "$D/x.bin"
expect_exit 2 "no -o" -- "$AUDIT" extract "$IN" --rows 1
expect_exit 3 "a missing capture" -- "$AUDIT" extract "$D/missing.bin" --rows 1 -o "$D/x.bin"

sed 's/"row": 5/"row": 60/' "$D/report.json" >"$D/outside.json"
expect_exit 3 "a report naming a row the capture lacks" -- \
    "$AUDIT" extract "$IN" --from-report "$D/outside.json" -o "$D/x.bin"
expect_grep "names row 60 of record 2.*6 rows" "$TMP/err" "the message names the report's row"
sed 's/"index": 2/"index": 7/' "$D/report.json" >"$D/norecord.json"
expect_exit 3 "a report naming a record the capture lacks" -- \
    "$AUDIT" extract "$IN" --from-report "$D/norecord.json" -o "$D/x.bin"
expect_grep "names record 7" "$TMP/err" "the message names the report's record"
expect_exit 3 "a backend with no flapping or wrong row" -- \
    "$AUDIT" extract "$IN" --from-report "$D/report.json" --backend bitonic -o "$D/x.bin"
expect_grep "lists no flapping or wrong row of backend bitonic" "$TMP/err" "nothing to extract is said"
sed "s|$IN|/elsewhere/third.bin|g" "$D/report.json" >"$D/foreign.json"
expect_exit 3 "a report of other captures only" -- \
    "$AUDIT" extract "$IN" --from-report "$D/foreign.json" -o "$D/x.bin"
expect_grep "has no record of .*in.bin \(its first record is of /elsewhere/third.bin\)" "$TMP/err" \
    "the message says the report is of another capture"
echo '{"schema": "dsatopk-audit/diff", "records": []}' >"$D/diff.json"
expect_exit 3 "a JSON file that is not a run report" -- \
    "$AUDIT" extract "$IN" --from-report "$D/diff.json" -o "$D/x.bin"
sed 's/"schema_version":[[:space:]]*1/"schema_version": 2/' "$D/report.json" >"$D/newer.json"
expect_exit 3 "a report of a newer schema version" -- \
    "$AUDIT" extract "$IN" --from-report "$D/newer.json" -o "$D/x.bin"
expect_grep 'newer\.json: \$\.schema_version: dsatopk-audit/report version 2 is newer' "$TMP/err" \
    "the message names the report and its version"
echo '{"schema": "dsatopk-audit/report", "records": [{"index": 0, "backends": [{"flapping_rows": ["x"]}]}]}' >"$D/bad.json"
expect_exit 3 "a report with a malformed row list" -- \
    "$AUDIT" extract "$IN" --from-report "$D/bad.json" -o "$D/x.bin"
expect_grep "flapping_rows\[0\]: not a row number" "$TMP/err" "the message names the list entry"
[ ! -e "$D/x.bin" ] && pass "no output left behind by a refused extract" ||
    fail "a refused extract left $D/x.bin"
expect_exit 0 "--help" -- "$AUDIT" extract --help

finish
