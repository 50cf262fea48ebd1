#!/usr/bin/env bash
# The engine's own selection judged (no GPU needed): captures written for it with the
# dsatopk_capture package hold, row by row, an exact selection, a tie variant, a dropped top
# candidate, an index below the threshold, a duplicate, -1 where candidates remain, a reversed
# order (fine without a contract, wrong under a sorted one) and a paged record. `run` exits 1
# and names each wrong row and index; tie variants pass; census, the HTML page, extract
# --from-report and gate carry the verdict; gate also fails a GPU-less report ("nothing was
# audited"), a capture that changed under its name ("capture differs"), and `report --gate`
# refuses a verdict of another report; readers refuse a newer schema_version; --records that
# select nothing are a usage error; the missing GPU is said once.
. "$(dirname "$0")/lib.sh"

need_python_with_numpy
D=$TMP
mkdir -p "$D/other"

"$PYTHON" - "$D" >"$TMP/expected.txt" <<'EOF' || fail "writing the captures with the dsatopk_capture package"
import sys
import numpy as np
from dsatopk_capture import append_record

d = sys.argv[1]
rows, length, k = 8, 256, 16
scores = np.random.default_rng(7).standard_normal((rows, length)).astype(np.float32)

def order(row):
    return np.argsort(-row, kind="stable")

# Row 1: the k-th and (k+1)-th candidates tie.
scores[1, order(scores[1])[k]] = scores[1, order(scores[1])[k - 1]]
engine = np.stack([order(row)[:k] for row in scores]).astype(np.int32)
tie = sorted([int(order(scores[1])[k - 1]), int(order(scores[1])[k])])
engine[1, list(engine[1]).index(tie[0])] = tie[1]          # tie variant: the larger index
top2, next2 = int(order(scores[2])[0]), int(order(scores[2])[k])
engine[2, 0] = next2                                        # the top candidate dropped
low3, kth3 = int(order(scores[3])[-1]), int(order(scores[3])[k - 1])
engine[3, k - 1] = low3                                     # an index far below the threshold
dup4 = int(engine[4, 0])
engine[4, 1] = dup4                                         # a duplicate
engine[5, k - 1] = -1                                       # -1 where candidates remain
engine[6] = engine[6][::-1]                                 # ascending scores: order only
append_record(f"{d}/engine.bin", scores, [length] * rows, k, engine_indices=engine,
              metadata={"engine": "test", "layer": 0, "step": 0})
print(top2, next2, low3, kth3, dup4)

# The same reversed row under a sorted contract (metadata), and only valid rows otherwise.
valid = np.stack([order(row)[:k] for row in scores]).astype(np.int32)
valid[1] = engine[1]
sorted_engine = valid.copy()
sorted_engine[6] = sorted_engine[6][::-1]
append_record(f"{d}/sorted.bin", scores, [length] * rows, k, engine_indices=sorted_engine,
              metadata={"contract": {"order": "sorted", "tie_break": "none"}})
append_record(f"{d}/ties.bin", scores, [length] * rows, k, engine_indices=valid,
              metadata={"contract": {"order": "sorted", "tie_break": "none"}})
# The same capture under another name elsewhere, with one score changed: another payload.
changed = scores.copy()
changed[7, 0] += np.float32(0.5)
append_record(f"{d}/other/ties.bin", changed, [length] * rows, k,
              engine_indices=np.stack([order(row)[:k] for row in changed]).astype(np.int32),
              metadata={"contract": {"order": "sorted", "tie_break": "none"}})

# Paged: the KV cache holds the window's pages at permuted physical pages.
page = 32
cols = length // page
table = np.array([[500 + (b * cols + (c * 5) % cols) for c in range(cols)] for b in range(rows)],
                 dtype=np.int32)
raw = np.stack([order(row)[:k] for row in scores]).astype(np.int32)
raw[2, 0] = next2                                           # row 2 drops its top again
translated = table[np.arange(rows)[:, None], raw // page] * page + raw % page
append_record(f"{d}/paged.bin", scores, [length] * rows, k, page_table=table, page_size=page,
              engine_indices=translated.astype(np.int32))
print(int(table[2, top2 // page] * page + top2 % page))
np.save(f"{d}/scores.npy", scores)
np.save(f"{d}/engine.npy", engine)
EOF
read -r TOP2 NEXT2 LOW3 KTH3 DUP4 <"$TMP/expected.txt"
TOP2_TRANSLATED=$(sed -n 2p "$TMP/expected.txt")

# ---- run: every wrong row and index named, exit 1 ----
R="$D/engine.json"
expect_exit 1 "run on a capture with wrong engine rows (no GPU needed)" -- \
    "$AUDIT" run --reps 1 --backends bitonic --out "$R" --html "$D/engine.html" "$D/engine.bin"
expect_grep "engine +order none, tie_break none \(default\): 3 exact, 1 tie_variant, 4 wrong +fail" "$TMP/out" \
    "the table's engine line: 3 exact, 1 tie variant, 4 wrong"
expect_grep "engine row 2: wrong_set; missing $TOP2 \[.*above the k-th.*\]; extra $NEXT2 \[" "$TMP/out" \
    "row 2: the dropped top candidate is missing, the (k+1)-th is extra"
expect_grep "engine row 3: wrong_set; missing $KTH3 \[.*\]; extra $LOW3 \[" "$TMP/out" \
    "row 3: the index below the threshold is extra, the k-th missing"
expect_grep "engine row 4: duplicate,wrong_set; .*duplicate $DUP4" "$TMP/out" "row 4: the duplicate index"
expect_grep "engine row 5: short,wrong_set; 15 of 16 entries" "$TMP/out" "row 5: -1 where candidates remain"
expect_grep "note: 1 of 8 row\(s\) are tie variants" "$TMP/out" "the tie variant is a note"
expect_grep "^# engine selections: 1 record\(s\) judged: 0 pass, 1 fail; rows: 3 exact, 1 tie_variant" "$TMP/out" \
    "the table's summary counts the engine's rows"
json_check "$R" 'j["records"][0]["engine"]["verdict"] == "fail" and j["records"][0]["engine"]["contract"] == {"order": "none", "tie_break": "none"} and j["records"][0]["engine"]["contract_from"] == "default"' \
    "the engine entry: fail under the default contract"
json_check "$R" 'j["records"][0]["engine"]["rows_by_kind"] == {"exact": 3, "tie_variant": 1, "wrong": 4, "short": 1, "duplicate": 1, "out_of_range": 0, "wrong_set": 4, "tie_rule": 0, "order": 0, "padding": 0}' \
    "rows per kind"
json_check "$R" '[(w["row"], w["kinds"]) for w in j["records"][0]["engine"]["wrong_rows"]] == [(2, ["wrong_set"]), (3, ["wrong_set"]), (4, ["duplicate", "wrong_set"]), (5, ["short", "wrong_set"])] and j["records"][0]["engine"]["tie_variant_rows"] == [1]' \
    "wrong rows and the tie variant row listed"
json_check "$R" "j['records'][0]['engine']['wrong_rows'][0]['missing'][0]['index'] == $TOP2 and j['records'][0]['engine']['wrong_rows'][0]['missing'][0]['above_kth'] > 0 and j['records'][0]['engine']['wrong_rows'][0]['missing'][0]['above_kth_ulps'] > 0 and j['records'][0]['engine']['wrong_rows'][0]['extra'][0]['index'] == $NEXT2" \
    "row 2's missing and extra candidates, in value and ulps"
json_check "$R" 'j["summary"]["engine"] == {"records": 1, "pass": 0, "fail": 1, "rows": 8, "exact": 3, "tie_variant": 1, "wrong": 4} and j["exit_code"] == 1' \
    "summary.engine and the exit code"
expect_grep "<h3>The engine's own selection</h3><p><span class=\"badge fail\">FAIL</span>" "$D/engine.html" \
    "the HTML page shows the engine's verdict"
expect_grep "chip fail\">engine <b>FAIL</b> &middot; 4 wrong &middot; 1 tie variants" "$D/engine.html" \
    "the record's summary line carries the engine's chip"

# ---- the contract: metadata, option; tie variants pass ----
expect_exit 0 "valid rows and a tie variant pass" -- "$AUDIT" run --reps 1 --backends bitonic --out "$D/ties.json" "$D/ties.bin"
json_check "$D/ties.json" 'j["records"][0]["engine"]["verdict"] == "pass" and j["records"][0]["engine"]["rows_by_kind"]["tie_variant"] == 1 and j["records"][0]["engine"]["contract_from"] == "metadata"' \
    "tie variants pass and are counted"
expect_exit 1 "a reversed row under the metadata's sorted contract" -- "$AUDIT" run --reps 1 --backends bitonic --out "$D/sorted.json" "$D/sorted.bin"
expect_grep "engine row 6: order; out of order at slot 1" "$TMP/out" "the order violation is named"
expect_exit 1 "--engine-contract sorted over the default" -- \
    "$AUDIT" run --reps 1 --backends bitonic --format none --out "$D/option.json" \
    --engine-contract '{"order": "sorted", "tie_break": "small"}' "$D/engine.bin"
json_check "$D/option.json" 'j["records"][0]["engine"]["contract_from"] == "option" and j["records"][0]["engine"]["rows_by_kind"]["order"] == 2 and j["records"][0]["engine"]["rows_by_kind"]["tie_rule"] == 1' \
    "the option's contract: rows 2 and 6 out of order, row 1 against the smallest-index tie-break"
expect_exit 2 "--engine-contract malformed" -- "$AUDIT" run --engine-contract '{"order": "up"}' "$D/engine.bin"
expect_grep "contract order \"up\"" "$TMP/err" "the message names the bad value"
expect_exit 1 "--k does not move the engine's k" -- "$AUDIT" run --k 8 --reps 1 --backends bitonic --format none --out "$D/k8.json" "$D/engine.bin"
json_check "$D/k8.json" 'j["records"][0]["k"] == 8 and j["records"][0]["engine"]["k"] == 16' "judged at the record's k"

expect_exit 2 "import refuses a malformed contract in --metadata" -- "$AUDIT" import --scores "$D/scores.npy" \
    --engine-indices "$D/engine.npy" --k 16 --metadata '{"contract": {"order": "descending", "tie_break": "none"}}' -o "$D/imported.bin"
expect_grep "contract order \"descending\"" "$TMP/err" "the message names the bad order"
expect_exit 0 "import with a contract" -- "$AUDIT" import --scores "$D/scores.npy" --engine-indices "$D/engine.npy" \
    --k 16 --metadata '{"contract": {"order": "sorted", "tie_break": "small"}}' -o "$D/imported.bin"
expect_exit 1 "run judges the imported selection under its contract" -- \
    "$AUDIT" run --reps 1 --backends bitonic --format none --out "$D/imported.json" "$D/imported.bin"
json_check "$D/imported.json" 'j["records"][0]["engine"]["contract_from"] == "metadata" and j["records"][0]["engine"]["contract"] == {"order": "sorted", "tie_break": "small"} and j["records"][0]["engine"]["rows_by_kind"]["order"] == 2' \
    "the contract came from the imported metadata"

# ---- paged: judged through the page table ----
expect_exit 1 "a paged record" -- "$AUDIT" run --reps 1 --backends bitonic --out "$D/paged.json" "$D/paged.bin"
expect_grep "engine row 2: wrong_set; missing $TOP2 \(-> $TOP2_TRANSLATED\)" "$TMP/out" \
    "the missing index in window and page-table space"
json_check "$D/paged.json" '[w["row"] for w in j["records"][0]["engine"]["wrong_rows"]] == [2] and j["records"][0]["engine"]["rows_by_kind"]["exact"] == 7' \
    "only row 2 is wrong"

# ---- census, extract ----
expect_exit 0 "census shows the engine's judgement" -- "$AUDIT" census --k 0 --format table "$D/engine.bin"
expect_grep "engine fail: 3 exact, 1 tie_variant, 4 wrong" "$TMP/out" "census table line"
expect_exit 0 "extract --from-report keeps the engine's wrong rows" -- \
    "$AUDIT" extract "$D/engine.bin" --from-report "$R" --backend engine -o "$D/repro.bin"
expect_exit 0 "inspect the reproducer" -- "$AUDIT" inspect --format json "$D/repro.bin"
json_check "$TMP/out" 'j["files"][0]["records"][0]["metadata"]["extracted_from"]["rows"] == [2, 3, 4, 5]' \
    "the reproducer holds rows 2-5"

# ---- gate ----
V="$D/verdict.json"
expect_exit 1 "gate: a wrong engine selection fails like a backend" -- "$AUDIT" gate --baseline "$R" --out "$V" "$R"
expect_grep "^  FAIL +engine.bin:0 +engine +- +the engine's selection is wrong on 4 of 8 row" "$TMP/out" "the engine entry fails"
json_check "$V" '[e["rows"] for e in j["reports"][0]["entries"] if e["backend"] == "engine"] == [[{"row": r, "why": "engine_wrong"} for r in (2, 3, 4, 5)]] and j["reports"][0]["report_reasons"] == []' \
    "the failing rows are listed; the engine counts as audited"
echo '{"backends": {"engine": {"allow": ["engine_wrong"]}}}' >"$D/allow.json"
expect_exit 0 "a policy allows engine_wrong" -- "$AUDIT" gate --baseline "$R" --policy "$D/allow.json" --out "$V" "$R"
echo '{"known_failures": [{"file": "engine.bin", "backend": "engine", "reason": "known kernel bug"}]}' >"$D/known.json"
expect_exit 0 "a known failure tolerates it" -- "$AUDIT" gate --baseline "$R" --policy "$D/known.json" --out "$V" "$R"
json_check "$V" '[e["status"] for e in j["reports"][0]["entries"] if e["backend"] == "engine"] == ["tolerated"]' "tolerated"

expect_exit 0 "run the changed capture under the same name" -- "$AUDIT" run --reps 1 --backends bitonic --format none --out "$D/changed.json" "$D/other/ties.bin"
expect_exit 1 "gate: a capture that differs from the baseline's" -- "$AUDIT" gate --baseline "$D/ties.json" --out "$V" "$D/changed.json"
expect_grep "capture differs: .*ties.bin record 0 has payload_sha256" "$TMP/out" "named capture differs"
json_check "$V" 'j["summary"]["missing"] == 0 and all(any("capture differs" in r for r in e["reasons"]) for e in j["reports"][0]["entries"])' \
    "every entry fails with capture differs, none missing"

"$AUDIT" run --reps 1 --backends bitonic --format none --out "$D/nothing.json" captures/tie.bin >/dev/null 2>&1
if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["context"]["device"] is None else 1)' "$D/nothing.json"; then
    expect_exit 1 "gate: a GPU-less report against a GPU-less baseline" -- "$AUDIT" gate --baseline "$D/nothing.json" --out "$V" "$D/nothing.json"
    expect_grep "nothing was audited" "$TMP/out" "nothing was audited"
    expect_exit 0 "run on a capture without engine indices, no GPU" -- "$AUDIT" run --reps 1 --backends bitonic --format none --out "$D/x.json" captures/tie.bin
    count=$(grep -cE "no NVIDIA driver found|no CUDA device" "$TMP/err")
    if [ "$count" -eq 1 ]; then pass "the missing GPU is said once"; else fail "the missing GPU is said $count times"; fi
    if grep -q "insufficient for CUDA runtime" "$TMP/err"; then fail "the runtime's driver text leaks"; else pass "no runtime driver text"; fi
fi

# ---- report --gate: only the report the verdict judged ----
"$AUDIT" gate --baseline "$R" --format none --out "$V" "$R" >/dev/null 2>&1
expect_exit 0 "report --gate with the verdict of this report" -- "$AUDIT" report --gate "$V" -o "$D/page.html" "$R"
expect_exit 3 "report --gate with the verdict of another report" -- "$AUDIT" report --gate "$V" -o "$D/page.html" "$D/ties.json"
expect_grep "was made from another report" "$TMP/err" "the foreign verdict is named"

# ---- a newer schema_version is refused by every reader ----
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["schema_version"] = 99; json.dump(j, open(sys.argv[2], "w"))' "$R" "$D/v99.json"
expect_exit 3 "report refuses a newer report" -- "$AUDIT" report -o "$D/v99.html" "$D/v99.json"
expect_grep "version 99 is newer than this tool reads \\(version 1\\)" "$TMP/err" "report says which version it reads"
expect_exit 3 "extract refuses a newer report" -- "$AUDIT" extract "$D/engine.bin" --from-report "$D/v99.json" -o "$D/x.bin"
expect_exit 3 "gate refuses a newer report" -- "$AUDIT" gate --baseline "$R" --out "$V" "$D/v99.json"

# ---- --records that select nothing ----
expect_exit 2 "run --records naming no record" -- "$AUDIT" run --records 5 --out "$D/none.json" "$D/engine.bin"
expect_grep "--records: no input has record 5: nothing was selected" "$TMP/err" "the message says so"
expect_exit 2 "run --rows naming no row" -- "$AUDIT" run --rows 40 --out "$D/none.json" "$D/engine.bin"
finish
