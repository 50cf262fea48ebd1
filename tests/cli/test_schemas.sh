#!/usr/bin/env bash
# The JSON documents every command writes on the shipped captures match their schemas in
# docs/schemas/ (tests/cli/validate_documents.py, python3-jsonschema): run (plain, with --graph
# --batch-invariance --rows --k, --devices, a plugin backend, an unreadable capture), its
# baseline, shards and their merge, GPU-like reports (tests/cli/gpu_like.py) and the gate
# verdicts over them with and without a policy (the policies too), census, inspect, diff, devices
# (with the described device), bench --out where a GPU writes one, the bench document of the unit
# test test_bench_json (argument 2) and docs/bench/h200.json. Then copies of valid documents with
# a key renamed, removed or added, or a status misspelled, must fail: the schemas are strict.
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
cp docs/bench/h200.json "$D/bench_h200_v1.json"

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
       bench_h200_v1.json gpu_clean.json gpu_sort-flaps.json gpu_radix-wrong.json
       gpu_filtered-unsupported.json gpu_drop-record-2.json gate_clean.json gate_sort-flaps.json
       gate_radix-wrong.json gate_filtered-unsupported.json gate_drop-record-2.json gate_cpu.json
       policy.json gate_policy.json gate_policy_plain.json)
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
if [ -n "$BENCH_JSON_TEST" ]; then
    broken bench_untimed bench_unit.json 'del j["results"][0]["median_us"]' "median_us"
    broken bench_unsupported_timed bench_unit.json 'j["results"][1]["median_us"] = 1.0' "results\[1\]"
fi
finish
