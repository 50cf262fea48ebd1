#!/usr/bin/env bash
# compare: a 7-run experiment in the spirit of seed 000 (7 captures of the same requests, written
# with the dsatopk_capture package, layer/step metadata): a call identical in every run; one
# perturbed below its boundary gap in one run; one perturbed past it in two runs (the engine
# following); identical scores with the engine taking other boundary ties in one run; identical
# scores with one run's engine dropping its top candidate; a call of another shape in one run;
# and a call only the last run has. Each call is classified as built, the summary speaks the
# seed's words with the gaps numpy computes, alignment falls back to position without metadata,
# and the JSON, the table and the HTML page agree.
. "$(dirname "$0")/lib.sh"

need_python_with_numpy
D=$TMP

"$PYTHON" - "$D" >"$TMP/expected.txt" <<'EOF' || fail "writing the 7 runs with the dsatopk_capture package"
import sys
import numpy as np
from dsatopk_capture import append_record

d = sys.argv[1]
rows, length, k, runs = 4, 256, 16, 7

def exact(scores):
    return np.stack([np.argsort(-row, kind="stable")[:k] for row in scores]).astype(np.int32)

def ranked(scores, b, rank):
    return int(np.argsort(-scores[b], kind="stable")[rank])

calls = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
base = {}
for n, call in enumerate(calls):
    scores = np.random.default_rng(100 + n).standard_normal((rows, length)).astype(np.float32)
    if call == (1, 0):
        # Row 0's k-th and (k+1)-th candidates tie: two valid top-k sets.
        scores[0, ranked(scores, 0, k)] = scores[0, ranked(scores, 0, k - 1)]
    base[call] = scores

gaps = []
for run in range(runs):
    for call in calls:
        scores = base[call].copy()
        if call == (0, 1) and run == 3:
            i = ranked(scores, 1, length - 1)     # the smallest: one ulp, far below the gap
            scores[1, i] = np.nextafter(scores[1, i], np.float32(np.inf))
        if call == (0, 2) and run in (2, 5):
            i = ranked(scores, 2, k)              # the (k+1)-th jumps past the top
            scores[2, i] = scores[2].max() + np.float32(1.0)
        engine = exact(scores)
        if call == (1, 0) and run == 4:           # the other tie
            pair = sorted([ranked(scores, 0, k - 1), ranked(scores, 0, k)])
            engine[0, list(engine[0]).index(pair[0])] = pair[1]
        if call == (1, 1) and run == 6:           # the top candidate dropped
            engine[3, 0] = ranked(scores, 3, k)
        shape_rows = rows - 1 if call == (1, 2) and run == 1 else rows
        append_record(f"{d}/run{run}.bin", scores[:shape_rows], [length] * shape_rows, k,
                      engine_indices=engine[:shape_rows],
                      metadata={"engine": "synth", "layer": call[0], "step": call[1]})
        if run == 0 and call != (1, 2):
            for row in scores:
                top = np.sort(row)[::-1]
                gaps.append(float(top[k - 1]) - float(top[k]))
    if run == 6:
        extra = np.random.default_rng(999).standard_normal((rows, length)).astype(np.float32)
        append_record(f"{d}/run{run}.bin", extra, [length] * rows, k,
                      engine_indices=exact(extra), metadata={"layer": 2, "step": 0})
# A capture of other calls only.
append_record(f"{d}/other.bin", base[(0, 0)], [length] * rows, k, metadata={"layer": 9, "step": 0})
# The same two runs without metadata: aligned by position.
for run in (0, 1):
    scores = base[(0, 0)]
    append_record(f"{d}/plain{run}.bin", scores, [length] * rows, k, engine_indices=exact(scores))
gaps = [g for g in gaps if g > 0] + [g for g in gaps if g == 0]
print(repr(min(gaps)), repr(float(np.median(gaps))))
print(ranked(base[(1, 1)], 3, 0))
EOF
read -r GAP_MIN GAP_MEDIAN <"$TMP/expected.txt"
TOP=$(sed -n 2p "$TMP/expected.txt")
RUNS=$(for r in 0 1 2 3 4 5 6; do printf '%s ' "$D/run$r.bin"; done)

# ---- the experiment as one command ----
expect_exit 1 "compare 7 runs" -- "$AUDIT" compare --format json -o "$D/compare.json" --html "$D/compare.html" $RUNS
json_check "$D/compare.json" 'j["schema"] == "dsatopk-audit/compare" and j["schema_version"] == 1 and j["context"]["utc_time"].endswith("Z")' \
    "schema, version and context"
json_check "$D/compare.json" 'j["alignment"]["by"] == "call" and len(j["runs"]) == 7 and j["runs"][6]["records"] == 7' \
    "aligned by call; the last run has the extra call"
json_check "$D/compare.json" \
    '{c["call"]: c["attribution"] for c in j["calls"] if c["comparable"]} == {"layer=0 step=0": "none", "layer=0 step=1": "none", "layer=0 step=2": "upstream", "layer=1 step=0": "tie_flap", "layer=1 step=1": "engine_wrong"}' \
    "each comparable call attributed as built"
json_check "$D/compare.json" \
    '{c["call"]: c["reason"].split(":")[0] for c in j["calls"] if not c["comparable"]} == {"layer=1 step=2": "shape differs", "layer=2 step=0": "missing in run 0 (" + j["runs"][0]["path"] + "), 1 (" + j["runs"][1]["path"] + "), 2 (" + j["runs"][2]["path"] + "), 3 (" + j["runs"][3]["path"] + "), 4 (" + j["runs"][4]["path"] + "), 5 (" + j["runs"][5]["path"] + ")"}' \
    "another shape and a call only one run has: not comparable, with the reason"
json_check "$D/compare.json" \
    '[c["score_groups"] for c in j["calls"][:3]] == [[0] * 7, [0, 0, 0, 1, 0, 0, 0], [0, 0, 1, 0, 0, 1, 0]]' \
    "score groups: identical, one run apart, two runs apart together"
json_check "$D/compare.json" \
    'j["calls"][1]["largest_abs_diff"] < j["calls"][1]["boundary_gap_min"] and j["calls"][1]["rows_perturbation_exceeds_gap"] == 0 and j["calls"][2]["rows_perturbation_exceeds_gap"] == 1 and j["calls"][2]["largest_crossing_perturbation"] >= j["calls"][2]["boundary_gap_min"]' \
    "the perturbation below the gap absorbed, the one past it crossing"
json_check "$D/compare.json" \
    'j["calls"][3]["score_groups"] == [0] * 7 and j["calls"][3]["engine_groups"] == [0, 0, 0, 0, 1, 0, 0] and j["calls"][3]["identical_scores_different_selection"] and j["calls"][3]["engine_wrong"] == []' \
    "the tie flap: identical scores, run 4 apart, no run wrong"
json_check "$D/compare.json" \
    "[(w[\"run\"], w[\"first_row\"], w[\"missing\"], w[\"kinds\"]) for w in j[\"calls\"][4][\"engine_wrong\"]] == [(6, 3, [$TOP], [\"wrong_set\"])]" \
    "the wrong selection: run 6, row 3, the top candidate missing"
python3 - "$D/compare.json" "$GAP_MIN" "$GAP_MEDIAN" >"$TMP/summary.txt" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
ok = (s["comparable_calls"] == 5 and s["not_comparable_calls"] == 2 and s["calls_scores_differ"] == 2
      and s["calls_identical_scores_different_selection"] == 2
      and s["attribution"] == {"none": 2, "upstream": 1, "selection_kernel": 0, "tie_flap": 1, "engine_wrong": 1}
      and abs(s["boundary_gap_min"] - float(sys.argv[2])) < 1e-12
      and abs(s["boundary_gap_median"] - float(sys.argv[3])) < 1e-12
      and s["text"].startswith("5 comparable calls: 2 with different scores, 2 with identical scores and a different selection; boundary gap min "))
print("ok" if ok else s)
EOF
expect_grep '^ok$' "$TMP/summary.txt" "summary in the seed's terms, gaps as numpy computes them"

expect_exit 1 "the same as a table" -- "$AUDIT" compare $RUNS
expect_grep '^summary: 5 comparable calls: 2 with different scores, 2 with identical scores and a different selection; boundary gap min [0-9.e-]+ / median [0-9.e-]+$' \
    "$TMP/out" "the table's summary line"
expect_grep '^layer=0 step=2 +aabaaba +aabaaba +aabaaba .* upstream \(1 row\(s\) perturbed past the gap\)' "$TMP/out" \
    "the upstream call: groups per run and the rows past the gap"
expect_grep "^layer=1 step=1 .* engine_wrong; run 6's engine wrong on 1 row\(s\), row 3 missing $TOP" "$TMP/out" \
    "the wrong call names the run, the row and the missing index"
expect_grep '^not comparable: layer=2 step=0: missing in run 0' "$TMP/out" "the extra call is listed"
expect_grep '^attribution: none 2, upstream 1, selection_kernel 0, tie_flap 1, engine_wrong 1$' "$TMP/out" \
    "the attribution counts"

expect_grep '<h2>Runs aligned call by call</h2>' "$D/compare.html" "the HTML page has the compare section"
expect_grep '5 comparable calls: 2 with different scores' "$D/compare.html" "the page states the summary"
expect_grep 'engine wrong on 1 row\(s\), row 3' "$D/compare.html" "the page names the wrong run's row"
if grep -qi '<script' "$D/compare.html"; then fail "the page has a script"; else pass "the page has no script"; fi

# ---- by position without metadata; identical runs; errors ----
expect_exit 0 "two identical runs without metadata" -- "$AUDIT" compare "$D/plain0.bin" "$D/plain1.bin"
expect_grep '^# compare: 2 runs, calls aligned by position' "$TMP/out" "the table says: by position"
expect_grep 'has none of the metadata keys' "$TMP/out" "and why"
expect_exit 3 "a missing capture" -- "$AUDIT" compare "$D/run0.bin" "$D/nope.bin"
expect_exit 3 "no call in common" -- "$AUDIT" compare "$D/other.bin" "$D/run1.bin"
expect_grep "no call is comparable" "$TMP/err" "stderr says so"
expect_exit 2 "one capture only" -- "$AUDIT" compare "$D/run0.bin"
expect_exit 2 "--format xml" -- "$AUDIT" compare --format xml "$D/run0.bin" "$D/run1.bin"
expect_exit 0 "--help" -- "$AUDIT" compare --help
finish
