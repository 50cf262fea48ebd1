#!/usr/bin/env bash
# The JSON documents every command writes on the shipped captures match their schemas in
# docs/schemas/ (tests/cli/validate_documents.py, python3-jsonschema): run (plain, with --graph
# --batch-invariance --rows --k, --devices, a plugin backend, an unreadable capture), its
# baseline, shards and their merge, GPU-like reports (tests/cli/gpu_like.py) and the gate
# verdicts over them with and without a policy (the policies too), census, inspect, diff, devices
# (with the described device), bench --out where a GPU writes one, the bench document of the unit
# test test_bench_json (argument 2), docs/bench/h200.json and h200-grid.json; and on two captures
# with the engine's own selections (written with the dsatopk_capture package: a tie variant and a
# wrong row) the report, baseline, census, diff (also of a reproducer against its original),
# compare (by call and by position) and gate with and without a policy. Then copies of valid
# documents with a key renamed, removed or added, or a status misspelled, must fail: the schemas
# are strict.
# Without python3-jsonschema the test skips (77), except under CI (CI set), where it fails.
. "$(dirname "$0")/lib.sh"
BENCH_JSON_TEST=${2:-}
VALIDATE="python3 tests/cli/validate_documents.py"

if ! python3 -c 'import jsonschema' 2>/dev/null; then
    if [ -n "${CI:-}" ]; then
        fail "python3-jsonschema is not installed, and CI is set (.ci/run installs it)"
        finish
        exit 1
    fi
    echo "SKIP: python3-jsonschema is not installed (apt-get install python3-jsonschema)"
    exit 77
fi
expect_exit 0 "every schema is a valid draft 2020-12 schema whose \$id names its file" -- \
    $VALIDATE --check-schemas

D="$TMP/docs"
C=captures
PLUGINS="$(dirname "$AUDIT")/../tests/plugins"
mkdir -p "$D"

# ---- every command's documents -----------------------------------------------------------------
"$AUDIT" run $C/*.bin --reps 3 --out "$D/run.json" --baseline-out "$D/baseline.json" >/dev/null 2>&1
"$AUDIT" run --backends bitonic,sort --graph --batch-invariance --records 0 --rows 0,1 --k 8 \
    --reps 2 --out "$D/run_modes.json" $C/tie.bin >/dev/null 2>&1
"$AUDIT" run --devices 0,0 --reps 2 --out "$D/run_devices.json" $C/relu.bin >/dev/null 2>&1
"$AUDIT" run --reps 2 --shard 0/2 --out "$D/shard1.json" $C/*.bin >/dev/null 2>&1
"$AUDIT" run --reps 2 --shard 1/2 --out "$D/shard2.json" $C/*.bin >/dev/null 2>&1
"$AUDIT" merge -o "$D/merged.json" "$D/shard1.json" "$D/shard2.json" >/dev/null 2>&1
if [ -f "$PLUGINS/host_good.so" ]; then
    "$AUDIT" run --plugin "$PLUGINS/host_good.so" --reps 2 --out "$D/run_plugin.json" \
        $C/relu.bin >/dev/null 2>&1
else
    echo "# no $PLUGINS/host_good.so: the report of a plugin backend is not checked"
fi
head -c 3000 $C/tie.bin >"$TMP/cut.bin"
"$AUDIT" run --reps 2 --out "$D/run_input_error.json" "$TMP/cut.bin" $C/relu.bin >/dev/null 2>&1
"$AUDIT" census --format json $C/*.bin >"$D/census.json" 2>/dev/null
"$AUDIT" census --k 64,0 -o "$D/census_edge.json" $C/edge.bin >/dev/null 2>&1
"$AUDIT" census --format json "$TMP/cut.bin" >"$D/census_cut.json" 2>/dev/null
"$AUDIT" inspect --format json $C/*.bin "$TMP/cut.bin" >"$D/inspect.json" 2>/dev/null
"$AUDIT" diff --format json -o "$D/diff_same.json" $C/relu.bin $C/relu.bin >/dev/null 2>&1
"$AUDIT" diff --format json -o "$D/diff_other.json" $C/tie.bin $C/plateau.bin >/dev/null 2>&1
"$AUDIT" extract $C/plateau.bin --records 0 --rows 0-1 -o "$TMP/small.bin" >/dev/null 2>&1
"$AUDIT" diff --format json -o "$D/diff_mismatch.json" $C/plateau.bin "$TMP/small.bin" \
    >/dev/null 2>&1
"$AUDIT" devices --format json >"$D/devices.json" 2>/dev/null
"$AUDIT" devices --format json --emulate-smem-per-sm 101376 >"$D/devices_described.json" 2>/dev/null
if "$AUDIT" bench --backends sort --format none --out "$D/bench.json" >/dev/null 2>&1; then
    pass "bench --out wrote a document on this GPU"
else
    echo "# no GPU: bench writes no document (the unit test's bench document stands in)"
fi
if [ -n "$BENCH_JSON_TEST" ]; then
    BENCH_JSON_DOCUMENT="$D/bench_unit.json" "$BENCH_JSON_TEST" >/dev/null 2>&1 ||
        fail "the unit test $BENCH_JSON_TEST failed"
else
    echo "# no test_bench_json given (argument 2): its bench document is not checked"
fi
cp docs/bench/h200.json "$D/bench_h200.json"
cp docs/bench/h200-grid.json "$D/bench_h200_grid.json"

# ---- the engine's own selections -------------------------------------------------------------
need_python_with_numpy
"$PYTHON" - "$TMP" <<'EOF' || fail "writing the engine captures with the dsatopk_capture package"
import sys
import numpy as np
from dsatopk_capture import append_record

d = sys.argv[1]
rows, length, k = 4, 128, 8
scores = np.random.default_rng(3).standard_normal((rows, length)).astype(np.float32)

def order(row):
    return np.argsort(-row, kind="stable")

scores[1, order(scores[1])[k]] = scores[1, order(scores[1])[k - 1]]  # row 1: a boundary tie
exact = np.stack([order(row)[:k] for row in scores]).astype(np.int32)
metadata = {"layer": 0, "step": 0, "contract": {"order": "sorted", "tie_break": "none"}}
append_record(f"{d}/engine_a.bin", scores, [length] * rows, k, engine_indices=exact,
              metadata=metadata)
other = exact.copy()
other[2, 0] = order(scores[2])[k]                        # row 2 drops its top candidate
tie = sorted([int(order(scores[1])[k - 1]), int(order(scores[1])[k])])
other[1, list(other[1]).index(tie[0])] = tie[1]          # row 1 takes the other tie
append_record(f"{d}/engine_b.bin", scores, [length] * rows, k, engine_indices=other,
              metadata=metadata)
EOF
E="$TMP/engine_b.bin"
"$AUDIT" run --reps 2 --out "$D/run_engine.json" --baseline-out "$D/baseline_engine.json" "$E" \
    >/dev/null 2>&1
"$AUDIT" census --format json -o "$D/census_engine.json" "$E" >/dev/null 2>&1
"$AUDIT" diff --format json -o "$D/diff_engine.json" "$TMP/engine_a.bin" "$E" >/dev/null 2>&1
"$AUDIT" extract "$E" --from-report "$D/run_engine.json" -o "$TMP/repro.bin" >/dev/null 2>&1
"$AUDIT" diff --format json -o "$D/diff_reproducer.json" "$E" "$TMP/repro.bin" >/dev/null 2>&1
"$AUDIT" compare --format json -o "$D/compare_calls.json" "$TMP/engine_a.bin" "$E" \
    "$TMP/engine_a.bin" >/dev/null 2>&1
"$AUDIT" compare --format json -o "$D/compare_position.json" $C/tie.bin $C/plateau.bin \
    >/dev/null 2>&1
"$AUDIT" gate --baseline "$D/run_engine.json" --format none --out "$D/gate_engine.json" \
    "$D/run_engine.json" >/dev/null 2>&1
cat >"$D/policy_engine.json" <<'EOF'
{"schema": "dsatopk-audit/policy", "schema_version": 1, "allow_nothing_audited": true,
 "backends": {"engine": {"allow": ["engine_wrong"], "comment": "the engine drops candidates"}}}
EOF
"$AUDIT" gate --baseline "$D/baseline_engine.json" --policy "$D/policy_engine.json" --format none \
    --out "$D/gate_engine_policy.json" "$D/run_engine.json" >/dev/null 2>&1

gpu_like_gates "$D/run.json" "$D" "$D" clean sort-flaps radix-wrong filtered-unsupported \
    drop-record-2
"$AUDIT" gate --baseline "$D/baseline.json" --format none --out "$D/gate_cpu.json" \
    "$D/run.json" >/dev/null 2>&1
cat >"$D/policy.json" <<'EOF'
{
  "schema": "dsatopk-audit/policy",
  "schema_version": 1,
  "description": "every kind of rule once",
  "allow_incomplete": false,
  "backends": {"filtered": {"allow": ["not_run"], "comment": "needs 131072 B of shared memory"},
               "radix": {"level": "not_guaranteed"}},
  "records": [{"file": "tie.bin", "index": 0, "backend": "sort", "tolerate": "sort flaps here",
               "match": "output", "until": "2030-01-01"}],
  "known_failures": [{"backend": "bitonic", "reason": "stale entry", "until": "2030-01-01T00:00:00Z"}]
}
EOF
echo '{"allow_missing": true, "records": [{"payload_sha256": "'"$(printf %064d 0)"'", "allow": ["flapping", "wrong_set"]}]}' \
    >"$TMP/policy_plain.json"
"$AUDIT" gate --baseline "$D/gpu_clean.json" --policy "$D/policy.json" --format none \
    --out "$D/gate_policy.json" "$D/gpu_sort-flaps.json" "$D/gpu_filtered-unsupported.json" \
    >/dev/null 2>&1
"$AUDIT" gate --baseline "$D/gpu_clean.json" --policy "$TMP/policy_plain.json" --format none \
    --out "$D/gate_policy_plain.json" "$D/gpu_drop-record-2.json" >/dev/null 2>&1

names=(run.json baseline.json run_modes.json run_devices.json shard1.json shard2.json merged.json
       run_input_error.json census.json census_edge.json census_cut.json inspect.json
       diff_same.json diff_mismatch.json diff_other.json devices.json devices_described.json
       bench_h200.json bench_h200_grid.json gpu_clean.json gpu_sort-flaps.json gpu_radix-wrong.json
       gpu_filtered-unsupported.json gpu_drop-record-2.json gate_clean.json gate_sort-flaps.json
       gate_radix-wrong.json gate_filtered-unsupported.json gate_drop-record-2.json gate_cpu.json
       policy.json gate_policy.json gate_policy_plain.json run_engine.json baseline_engine.json
       census_engine.json diff_engine.json diff_reproducer.json compare_calls.json
       compare_position.json gate_engine.json policy_engine.json gate_engine_policy.json)
[ -f "$PLUGINS/host_good.so" ] && names+=(run_plugin.json)
[ -n "$BENCH_JSON_TEST" ] && names+=(bench_unit.json)
[ -f "$D/bench.json" ] && names+=(bench.json)
for name in "${names[@]}"; do
    [ -s "$D/$name" ] || fail "$name was not written"
done

# What the documents hold that the checks below rely on: each part of the format is exercised.
json_check "$D/run_modes.json" 'all("graph" in b and "batch_invariance" in b for r in j["records"] for b in r["backends"]) and j["records"][0]["source_rows"] == [0, 1]' \
    "run --graph --batch-invariance --rows: the blocks and source rows are there"
json_check "$D/run_devices.json" '"cross_device" in j and j["context"]["devices"] == [0, 0]' \
    "run --devices: the cross_device block"
json_check "$D/merged.json" 'len(j["shards"]) == 2 and j["context"]["shard"] is None' "merge: the shard list"
json_check "$D/run_input_error.json" 'j["input_errors"] and j["input_errors"][0]["kind"] == "truncated"' \
    "a truncated capture: an input error"
json_check "$D/inspect.json" 'any(f["error"] for f in j["files"])' "inspect: a file error"
json_check "$D/devices_described.json" 'j["devices"] and j["devices"][0]["described"]' \
    "devices --emulate-smem-per-sm: the described device"
json_check "$D/gate_policy.json" 'j["context"]["policy"] and any(e["tolerated_by"] for r in j["reports"] for e in r["entries"]) and j["unused_tolerances"]' \
    "gate with a policy: a tolerated entry and an unused tolerance"
json_check "$D/run_engine.json" 'j["records"][0]["engine"]["wrong_rows"][0]["missing"] and j["records"][0]["engine"]["tie_variant_rows"] == [1] and j["summary"]["engine"]["wrong"] == 1' \
    "run on engine selections: a wrong row described, a tie variant, summary.engine"
json_check "$D/census_engine.json" 'j["files"][0]["records"][0]["engine"]["verdict"] == "fail"' \
    "census on engine selections: the engine's judgement"
json_check "$D/diff_engine.json" '[r["case"] for r in j["records"][0]["differing_rows"]] == ["tie_flap", "engine_wrong"] and j["records"][0]["differing_rows"][1]["engine_wrong_side"] == "B"' \
    "diff of engine selections: a tie flap and a wrong side"
json_check "$D/diff_reproducer.json" 'j["pairing"] == {"by": "extracted_from", "reproducer": "B"}' \
    "diff of a reproducer: paired by extracted_from"
json_check "$D/compare_calls.json" 'j["alignment"]["by"] == "call" and j["calls"][0]["engine_wrong"][0]["run"] == 1' \
    "compare by call: run 1's engine is wrong"
json_check "$D/compare_position.json" 'j["alignment"]["by"] == "position" and not any(c["comparable"] for c in j["calls"])' \
    "compare by position: calls that are not comparable"
json_check "$D/gate_engine.json" 'any(e["backend"] == "engine" and e["level"] is None for e in j["reports"][0]["entries"]) and j["reports"][0]["report_sha256"]' \
    "gate on engine selections: the engine entry, the report's fingerprint"
json_check "$D/gate_engine_policy.json" 'j["context"]["policy"]["allow_nothing_audited"] and j["summary"]["verdict"] == "pass"' \
    "gate with allow_nothing_audited and engine_wrong allowed"
if [ -f "$PLUGINS/host_good.so" ]; then
    json_check "$D/run_plugin.json" 'any("plugin" in b for r in j["records"] for b in r["backends"])' \
        "run --plugin: the plugin block"
fi

(cd "$D" && python3 "$OLDPWD/tests/cli/validate_documents.py" "${names[@]}") >"$TMP/valid.log" 2>&1
status=$?
for name in "${names[@]}"; do
    if grep -q "^ok $name " "$TMP/valid.log"; then pass "$name matches its schema"; else
        fail "$name does not match its schema"; grep "^$name: " "$TMP/valid.log" | sed 's/^/    /' | head -10
    fi
done
[ "$status" -eq 0 ] || fail "validate_documents.py exited $status on the documents"
expect_exit 0 "a policy without schema fields, read as policy-1" -- \
    $VALIDATE --as policy-1 "$TMP/policy_plain.json"

# ---- the schemas are strict: each broken copy must fail --------------------------------------
# broken NAME SOURCE PYTHON-STATEMENT PATTERN: a copy of SOURCE changed by the statement (on `j`)
# must fail validation with an error matching PATTERN.
broken() {
    local name=$1 source=$2 change=$3 pattern=$4
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(j, open(sys.argv[2], "w"))' \
        "$D/$source" "$TMP/$name.json" "$change" || { fail "$name: the change failed"; return; }
    $VALIDATE "$TMP/$name.json" >"$TMP/$name.log" 2>&1
    local got=$?
    if [ "$got" -eq 1 ] && grep -qE -- "$pattern" "$TMP/$name.log"; then pass "$name is refused"; else
        fail "$name: exit $got, wanted 1 with /$pattern/"; sed 's/^/    /' "$TMP/$name.log" | head -5
    fi
}
broken renamed_verdict run.json 'b = j["records"][0]["backends"][0]; b["verdikt"] = b.pop("verdict")' \
    "records\[0\]\.backends\[0\].*verdict"
broken no_summary run.json 'del j["summary"]' "'summary' is a required property"
broken status_typo run.json 'j["records"][1]["backends"][2]["status"] = "okay"' \
    "records\[1\]\.backends\[2\]\.status: 'okay' is not one of"
broken level_typo run.json 'j["records"][0]["backends"][0]["level"] = "gpu-to-gpu"' "'gpu-to-gpu' is not one of"
broken extra_context_key run.json 'j["context"]["colour"] = "blue"' "\\\$\.context: .*colour"
broken bad_hash gpu_clean.json 'j["records"][1]["backends"][3]["output_sha256_per_rep"][1] = "not-a-hash"' \
    "output_sha256_per_rep\[1\]: 'not-a-hash' does not match"
broken unit_dropped gpu_clean.json 'd = j["context"]["device"]; d["smem_per_sm"] = d.pop("smem_per_sm_bytes")' \
    "\\\$\.context\.device: .*smem_per_sm_bytes"
broken newer_version run.json 'j["schema_version"] = 2' "no schema report-2"
broken baseline_no_hashes baseline.json 'del j["records"][0]["backends"][0]["output_sha256"]' \
    "'output_sha256' is a required property"
broken gate_status_typo gate_sort-flaps.json 'j["reports"][0]["entries"][0]["status"] = "passed"' \
    "'passed' is not one of"
broken gate_no_exit_code gate_clean.json 'del j["exit_code"]' "'exit_code' is a required property"
broken policy_typo policy.json 'j["alow_missing"] = True' "alow_missing"
broken policy_match_alone policy.json 'del j["records"][0]["tolerate"]' "'tolerate' is a dependency of 'match'"
broken census_renamed census.json 'j["k_list"] = j.pop("ks")' "'ks' is a required property"
broken census_row census.json 'del j["files"][0]["records"][0]["census"][0]["per_row"][0]["tie_set"]' \
    "'tie_set' is a required property"
broken inspect_status inspect.json 'j["files"][0]["status"] = "fine"' "'fine' is not one of"
broken diff_case diff_other.json 'j["records"][0]["differing_rows"][0]["case"] = "flap"' "'flap' is not one of"
broken devices_clusters devices_described.json 'j["devices"][0]["clusters_at_once"] = [1, 2, 3]' \
    "clusters_at_once"
broken devices_old_unit devices_described.json 'd = j["devices"][0]; d["smem_per_sm"] = d.pop("smem_per_sm_bytes")' \
    "smem_per_sm_bytes"
broken devices_version_number devices_described.json 'j["cuda"]["runtime_version"] = 13000' \
    "cuda\.runtime_version: 13000 is not of type"
if [ -n "$BENCH_JSON_TEST" ]; then
    broken bench_untimed bench_unit.json 'del j["results"][0]["median_us"]' "median_us"
    broken bench_unsupported_timed bench_unit.json 'j["results"][1]["median_us"] = 1.0' "results\[1\]"
fi
broken engine_status run_engine.json 'j["records"][0]["engine"]["status"] = "ok"' \
    "engine\.status: 'ok' is not one of"
broken engine_row_detail run_engine.json 'del j["records"][0]["engine"]["wrong_rows"][0]["missing_total"]' \
    "wrong_rows\[0\].*missing_total"
broken engine_summary run_engine.json 'del j["summary"]["engine"]["tie_variant"]' "'tie_variant' is a required property"
broken census_engine_key census_engine.json 'j["files"][0]["records"][0]["engine"]["contract"]["tie"] = "small"' \
    "contract.*tie"
broken diff_old_case diff_engine.json 'j["records"][0]["differing_rows"][0]["case"] = "scores_same_engine_differs"' \
    "'scores_same_engine_differs' is not one of"
broken diff_engine_side diff_engine.json 'j["records"][0]["differing_rows"][1]["engine_wrong_side"] = "a"' \
    "engine_wrong_side"
broken diff_pairing diff_reproducer.json 'j["pairing"]["reproducer"] = None' "pairing\.reproducer"
broken compare_attribution compare_calls.json 'j["calls"][0]["attribution"] = "kernel"' \
    "calls\[0\]\.attribution: 'kernel' is not one of"
broken compare_not_comparable compare_position.json 'j["calls"][0]["attribution"] = "none"' "calls\[0\]"
broken gate_engine_level gate_engine.json 'e = [e for e in j["reports"][0]["entries"] if e["backend"] == "engine"][0]; e["level"] = "gpu_to_gpu"' \
    "entries\[[0-9]+\]\.level"
broken gate_fingerprint gate_engine.json 'j["context"]["baseline"]["report_sha256"] = "abc"' "report_sha256"
broken policy_allow_typo policy_engine.json 'j["backends"]["engine"]["allow"] = ["engine_wrong_rows"]' \
    "'engine_wrong_rows' is not one of"
finish
