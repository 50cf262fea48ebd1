#!/usr/bin/env bash
# Command-line tests of `gate` and `run --baseline-out` on a machine without a GPU (they also
# pass with one): `run` on a small synth capture gives the reference hashes and the census with
# the backends unavailable; python3 then edits copies of that report into what a GPU would have
# written (status ok, output hashes per rep) to exercise each level passing and failing, the
# policy file, known failures, missing records, invalid inputs (exit 3 naming the file and the
# JSON path) and usage errors (exit 2). `run --devices` without a GPU records the block as
# unavailable; with a GPU the last section lists device 0 twice and checks the comparison.
. "$(dirname "$0")/lib.sh"

CAPTURE="$TMP/small.bin"
make_capture() {
    "$AUDIT" synth -f tie -b 4 -L 512 -k 16 --ties 8 -o "$CAPTURE" &&
        "$AUDIT" synth -f paged -b 3 -L 1000 -k 16 -a -o "$CAPTURE" &&
        "$AUDIT" synth -f offsets -b 3 -L 700 -k 32 -z -a -o "$CAPTURE"
}
if "$AUDIT" help gate >/dev/null 2>&1 && make_capture >"$TMP/synth.log" 2>&1; then
    pass "made a 3-record capture with synth"
else
    echo "SKIP: \`dsatopk-audit gate\` or \`synth\` is not available"; cat "$TMP/synth.log"
    exit 77
fi

# ---- run --baseline-out --------------------------------------------------------------------------
R="$TMP/report.json"
B="$TMP/baseline.json"
expect_exit 0 "run --baseline-out" -- "$AUDIT" run --reps 3 --out "$R" --baseline-out "$B" "$CAPTURE"
expect_grep "^# baseline: $B" "$TMP/out" "the table names the baseline"
json_check "$B" 'j["schema"] == "dsatopk-audit/baseline" and j["schema_version"] == 1 and j["source"]["report"].endswith("report.json")' \
    "baseline schema id, version and source"
json_check "$B" 'len(j["records"]) == 3 and all(len(r["backends"]) == 9 for r in j["records"])' \
    "baseline: every record x backend"
python3 - "$R" "$B" >"$TMP/subset.txt" 2>&1 <<'EOF'
import json, sys
report, baseline = (json.load(open(p)) for p in sys.argv[1:3])
for r, b in zip(report["records"], baseline["records"]):
    assert (r["file"], r["index"], r["payload_sha256"], r["k"], r["reference"]) == \
        (b["file"], b["index"], b["payload_sha256"], b["k"], b["reference"])
    for rb, bb in zip(r["backends"], b["backends"]):
        distinct = list(dict.fromkeys(rb["output_sha256_per_rep"]))
        assert (rb["name"], rb["level"], rb["status"], rb["reps"]) == \
            (bb["name"], bb["level"], bb["status"], bb["reps"]), (rb["name"], bb["name"])
        assert bb["output_sha256"] == distinct and "output_sha256_per_rep" not in bb
        assert "census" not in b and "violations" not in bb
print("subset ok")
EOF
expect_grep '^subset ok$' "$TMP/subset.txt" "baseline = the report's identities, references and distinct hashes only"
json_check "$R" '[r["global_index"] for r in j["records"]] == [0, 1, 2] and j["context"]["shard"] is None' \
    "report: global_index per record, context.shard null"

# ---- a CPU-only report against its own baseline ------------------------------------------------
# Nothing ran: every backend is unavailable in both. A gate must not pass on that ("nothing was
# audited"), unless the policy says allow_nothing_audited.
V="$TMP/verdict.json"
expect_exit 1 "gate: a GPU-less report against its GPU-less baseline" -- "$AUDIT" gate --baseline "$B" --out "$V" "$R"
expect_grep '^  REPORT +nothing was audited: no backend ran' "$TMP/out" "the table says nothing was audited"
expect_grep '^# gate FAIL: 0 fail, 0 tolerated, 0 missing, 27 pass of 27 entries in 1 report\(s\); 1 report\(s\) failing as a whole' "$TMP/out" \
    "table summary: 15 entries pass, the report fails as a whole"
json_check "$V" 'j["schema"] == "dsatopk-audit/gate" and j["schema_version"] == 1 and j["exit_code"] == 1' "verdict schema, version, exit code"
json_check "$V" 'any(t.startswith("nothing was audited") for t in j["reports"][0]["report_reasons"]) and j["reports"][0]["status"] == "fail"' \
    "verdict: the report fails with nothing was audited"
json_check "$V" 'all(k in j["context"] for k in ("tool_version", "git_revision", "command_line", "utc_time", "host", "now", "baseline", "policy"))' \
    "verdict context"
json_check "$V" 'all(e["status"] == "pass" and any("not ok in the baseline either" in n for n in e["notes"]) for e in j["reports"][0]["entries"])' \
    "unavailable in both: each entry passes, with a note"
json_check "$V" 'len(j["reports"][0]["report_sha256"]) == 64' "verdict: the report's fingerprint"
echo '{"allow_nothing_audited": true}' >"$TMP/nothing.json"
expect_exit 0 "gate: the same with allow_nothing_audited" -- \
    "$AUDIT" gate --baseline "$B" --policy "$TMP/nothing.json" --out "$V" "$R"
expect_grep '^  NOTE +nothing was audited: .* \(allowed by the policy\)' "$TMP/out" "the allowance is a note"
expect_grep '^# gate PASS: 0 fail, 0 tolerated, 0 missing, 27 pass of 27 entries in 1 report' "$TMP/out" \
    "table summary: 27 entries pass (3 records x 9 backends)"
expect_exit 0 "gate: a baseline file as the report (baselines of two GPUs compared)" -- \
    "$AUDIT" gate --baseline "$B" --policy "$TMP/nothing.json" --format none --out "$V" "$B"
expect_exit 0 "gate: a full report as the baseline" -- \
    "$AUDIT" gate --baseline "$R" --policy "$TMP/nothing.json" --format none --out "$V" "$R"
if [ ! -s "$TMP/out" ]; then pass "--format none: no table"; else fail "--format none printed"; fi
expect_exit 0 "gate --out - writes the verdict to stdout" -- \
    "$AUDIT" gate --baseline "$B" --policy "$TMP/nothing.json" --out - "$R"
json_check "$TMP/out" 'j["summary"]["pass"] == 27' "stdout is the verdict JSON"
expect_grep '^# gate PASS' "$TMP/err" "--out -: the table goes to stderr"

# ---- reports as a GPU would write them (edited by python3) --------------------------------------
gpu_like() { python3 tests/cli/gpu_like.py "$R" "$@"; }
G="$TMP/gpu.json"
gpu_like "$G"
gpu_like "$TMP/flaps.json" sort-flaps
gpu_like "$TMP/wrong.json" radix-wrong
gpu_like "$TMP/gb10.json" filtered-unsupported
gpu_like "$TMP/partial.json" drop-record-2
gpu_like "$TMP/broken.json" broken-hash

expect_exit 0 "gate: a GPU report against itself" -- "$AUDIT" gate --baseline "$G" --out "$V" "$G"
json_check "$V" 'j["summary"]["pass"] == 27 and j["summary"]["fail"] == 0' "every level passes on a clean GPU report"

expect_exit 1 "gate: sort (gpu_to_gpu) gives another output in one rep" -- \
    "$AUDIT" gate --baseline "$G" --out "$V" "$G" "$TMP/flaps.json"
expect_grep '^  FAIL +small.bin:0 +sort +gpu_to_gpu +output differs from the CPU reference' "$TMP/out" \
    "the table names the record, backend, level and why"
expect_grep 'rows: 1 \(flapping, 1 reps\)' "$TMP/out" "the table lists the flapping rows from the report"
json_check "$V" '[r["status"] for r in j["reports"]] == ["pass", "fail"] and j["summary"]["fail"] == 1' \
    "per-report status: the clean report passes, the other fails"
json_check "$V" '[e["backend"] for e in j["reports"][1]["entries"] if e["status"] == "fail"] == ["sort"]' \
    "only sort fails"
json_check "$V" 'any("differ from the baseline" in x for e in j["reports"][1]["entries"] for x in e["reasons"])' \
    "gpu_to_gpu: compared with the baseline's hash too"

expect_exit 1 "gate: radix wrong sets on rows the census does not predict" -- \
    "$AUDIT" gate --baseline "$G" --out "$V" "$TMP/wrong.json"
json_check "$V" '[(e["file"].endswith("small.bin"), e["index"], e["backend"], [r["row"] for r in e["rows"]]) for e in j["reports"][0]["entries"] if e["status"] == "fail"] == [(True, 1, "radix", [0, 2])]' \
    "not_guaranteed: radix record 1 fails with rows 0 and 2"

expect_exit 1 "gate: a backend unsupported here but ok in the baseline" -- \
    "$AUDIT" gate --baseline "$G" --out "$V" "$TMP/gb10.json"
json_check "$V" 'j["summary"]["fail"] == 3 and all("unsupported here" in e["reasons"][0] for e in j["reports"][0]["entries"] if e["status"] == "fail")' \
    "unsupported vs baseline ok: a failure on each record"
expect_exit 1 "gate: the CPU-only report against a GPU baseline" -- "$AUDIT" gate --baseline "$G" --out "$V" "$R"
json_check "$V" 'j["summary"]["fail"] == 27' "no GPU in CI: every backend fails (it ran in the baseline)"

# ---- policy ------------------------------------------------------------------------------------
cat >"$TMP/policy.json" <<'EOF'
{
  "schema": "dsatopk-audit/policy",
  "schema_version": 1,
  "description": "GB10 runners: filtered needs 128 KB of shared memory per SM",
  "backends": {"filtered": {"allow": ["not_run"], "comment": "flashinfer #5058"}},
  "known_failures": [
    {"file": "small.bin", "index": 0, "backend": "sort", "reason": "issue 42: sort flaps on record 0",
     "until": "2030-01-01"},
    {"backend": "bitonic", "reason": "stale entry"}
  ]
}
EOF
expect_exit 0 "policy: filtered may be unsupported" -- \
    "$AUDIT" gate --baseline "$G" --policy "$TMP/policy.json" --out "$V" "$TMP/gb10.json"
json_check "$V" 'j["context"]["policy"]["rules"] == 3 and all(any("allowed by the policy (not_run)" in n for n in e["notes"]) for e in j["reports"][0]["entries"] if e["backend"] == "filtered")' \
    "allowed not_run is a note"
expect_exit 0 "policy: a known failure is tolerated" -- \
    "$AUDIT" gate --baseline "$G" --policy "$TMP/policy.json" --out "$V" "$TMP/flaps.json"
expect_grep '^  TOLERATED +small.bin:0 +sort .*tolerated by policy.known_failures\[0\]: "issue 42' "$TMP/out" \
    "the table shows the tolerated entry and the rule"
expect_grep '^# note: policy.known_failures\[1\] tolerated nothing' "$TMP/out" "an unused tolerance is pointed out"
json_check "$V" 'j["summary"]["tolerated"] == 1 and j["summary"]["fail"] == 0 and j["unused_tolerances"][0]["rule"] == "policy.known_failures[1]"' \
    "verdict: one tolerated, the unused rule listed"
expect_exit 1 "policy: a known failure past its until date" -- \
    "$AUDIT" gate --baseline "$G" --policy "$TMP/policy.json" --now 2030-01-02 --out "$V" "$TMP/flaps.json"
json_check "$V" 'any("expired on 2030-01-01" in n for e in j["reports"][0]["entries"] for n in e["notes"])' \
    "expired: the note says so"
sed 's/"until": "2030-01-01"/"match": "graph", "until": "2030-01-01"/' "$TMP/policy.json" >"$TMP/match.json"
expect_exit 1 "policy: a known failure whose match does not cover every reason" -- \
    "$AUDIT" gate --baseline "$G" --policy "$TMP/match.json" --out "$V" "$TMP/flaps.json"
expect_grep '^ +note: policy.known_failures\[0\] .*tolerates only failures mentioning "graph"' "$TMP/out" \
    "the table shows why the known failure does not apply"
cat >"$TMP/levels.json" <<'EOF'
{"backends": {"radix": {"level": "run_to_run"}},
 "records": [{"file": "small.bin", "index": 2, "backend": "radix", "level": "not_guaranteed"}]}
EOF
expect_exit 1 "policy: radix held to run_to_run (except record 2)" -- \
    "$AUDIT" gate --baseline "$G" --policy "$TMP/levels.json" --out "$V" "$G"
json_check "$V" '[(e["index"], e["status"], e["level_from"]) for e in j["reports"][0]["entries"] if e["backend"] == "radix"] == [(0, "fail", "policy.backends.radix"), (1, "fail", "policy.backends.radix"), (2, "pass", "policy.records[0]")]' \
    "level per backend, overridden per record"

# ---- missing records ---------------------------------------------------------------------------
expect_exit 1 "gate: a report lacking a baseline record" -- "$AUDIT" gate --baseline "$G" --out "$V" "$TMP/partial.json"
expect_grep '^  MISSING +small.bin:2 ' "$TMP/out" "the table shows the missing record"
json_check "$V" 'j["summary"]["missing"] == 9 and j["summary"]["fail"] == 0' "missing: 9 entries (one record x 9 backends)"
echo '{"allow_missing": true}' >"$TMP/allow_missing.json"
expect_exit 0 "policy allow_missing" -- \
    "$AUDIT" gate --baseline "$G" --policy "$TMP/allow_missing.json" --out "$V" "$TMP/partial.json"

# ---- invalid inputs: exit 3 ----------------------------------------------------------------------
expect_exit 3 "a report with a malformed hash" -- "$AUDIT" gate --baseline "$G" --out "$V" "$TMP/broken.json"
expect_grep 'broken.json: \$\.records\[1\]\.backends\[3\]\.output_sha256_per_rep\[1\]: not a lower-case hex' \
    "$TMP/err" "the message names the file and the JSON path"
echo '{"schema": "dsatopk-audit/report", ' >"$TMP/truncated.json"
expect_exit 3 "a report that is not JSON" -- "$AUDIT" gate --baseline "$G" --out "$V" "$TMP/truncated.json"
expect_grep 'truncated.json: byte 36, at \$: the text ends where a key' "$TMP/err" "the message names the file, the byte and the JSON path"
expect_exit 3 "a missing report" -- "$AUDIT" gate --baseline "$G" --out "$V" "$TMP/nope.json"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["schema_version"]=2; json.dump(j, open(sys.argv[2],"w"))' "$G" "$TMP/v2.json"
expect_exit 3 "a report of schema version 2" -- "$AUDIT" gate --baseline "$G" --out "$V" "$TMP/v2.json"
expect_grep 'v2.json: \$\.schema_version: dsatopk-audit/report version 2' "$TMP/err" "the version is named"
expect_exit 3 "an invalid baseline" -- "$AUDIT" gate --baseline "$TMP/broken.json" --out "$V" "$G"
echo '{"backends": {"radix": {"levle": "run_to_run"}}}' >"$TMP/typo.json"
expect_exit 3 "a policy with a typo" -- "$AUDIT" gate --baseline "$G" --policy "$TMP/typo.json" --out "$V" "$G"
expect_grep 'typo.json: policy.backends.radix.levle: unknown key' "$TMP/err" "the policy message names the key"

# ---- usage: exit 2 -------------------------------------------------------------------------------
expect_exit 2 "no --baseline" -- "$AUDIT" gate "$G"
expect_exit 2 "no report" -- "$AUDIT" gate --baseline "$G"
expect_exit 2 "--now malformed" -- "$AUDIT" gate --baseline "$G" --now yesterday "$G"
for bad in 2026-02-30 2025-02-29 2026-04-31 2026-01-01T24:00:00Z 2026-01-01T10:61:00Z; do
    expect_exit 2 "--now $bad does not exist" -- "$AUDIT" gate --baseline "$G" --now "$bad" "$G"
done
expect_grep "now: '2026-01-01T10:61:00Z' is not a date YYYY-MM-DD or a time" "$TMP/err" "the message names --now and the value"
expect_exit 0 "--now 2024-02-29 (a leap day)" -- \
    "$AUDIT" gate --baseline "$G" --now 2024-02-29 --out "$TMP/leap.json" "$G"
expect_exit 2 "--format unknown" -- "$AUDIT" gate --baseline "$G" --format html "$G"
expect_exit 0 "gate --help" -- "$AUDIT" gate --help
expect_grep 'policy' "$TMP/out" "help mentions the policy"

# ---- run --devices -------------------------------------------------------------------------------
expect_exit 2 "--device and --devices together" -- "$AUDIT" run --device 0 --devices 0,1 --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "--devices malformed" -- "$AUDIT" run --devices 0,,1 --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "--out - with --baseline-out -" -- "$AUDIT" run --out - --baseline-out - "$CAPTURE"
expect_exit 2 "--devices-sequential without --devices" -- "$AUDIT" run --devices-sequential --out "$TMP/x.json" "$CAPTURE"
expect_grep 'needs --devices' "$TMP/err" "the usage error names what is missing"
if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["context"]["device"] is None else 1)' "$R"; then
    expect_exit 0 "run --devices 0,0 without a GPU" -- "$AUDIT" run --quiet --devices 0,0 --out "$TMP/dev.json" "$CAPTURE"
    json_check "$TMP/dev.json" 'j["cross_device"]["available"] is False and (j["cross_device"]["reason"].startswith("no CUDA device") or j["cross_device"]["reason"].startswith("no NVIDIA driver found")) and j["cross_device"]["requested"] == "0,0" and j["cross_device"]["entries"] == []' \
        "no GPU: cross_device unavailable with the reason"
    json_check "$TMP/dev.json" 'j["context"]["devices"] == [0, 0] and all("per_device" not in b for r in j["records"] for b in r["backends"])' \
        "no GPU: the requested list in the context, no per_device entries"
    json_check "$TMP/dev.json" 'j["context"]["devices_concurrent"] is False' \
        "no GPU: no device ran, so none ran at the same time (devices_concurrent false)"
    json_check "$R" 'j["context"]["devices_concurrent"] is None' "without --devices: devices_concurrent null"
    # The passes at once or in turn: the same report without a GPU (context aside).
    expect_exit 0 "run --devices 0,0 --devices-sequential without a GPU" -- \
        "$AUDIT" run --quiet --devices 0,0 --devices-sequential --out "$TMP/dev-seq.json" "$CAPTURE"
    if cmp -s <(python3 tests/cli/normalize_document.py "$TMP/dev.json" | cut -d' ' -f1) \
              <(python3 tests/cli/normalize_document.py "$TMP/dev-seq.json" | cut -d' ' -f1); then
        pass "no GPU: --devices-sequential writes the same report"
    else fail "no GPU: --devices-sequential changed the report"; fi
    expect_exit 0 "run --devices all without a GPU" -- "$AUDIT" run --quiet --devices all --out "$TMP/dev.json" "$CAPTURE"
    json_check "$TMP/dev.json" 'j["cross_device"]["available"] is False and j["cross_device"]["requested"] == "all"' \
        "--devices all: unavailable"
else
    # With a GPU: device 0 twice. gpu_to_gpu and run_to_run backends must agree with themselves.
    expect_exit 0 "run --devices 0,0 on the GPU" -- \
        "$AUDIT" run --devices 0,0 --reps 3 --backends filtered-det,bitonic,sort --out "$TMP/dev.json" "$CAPTURE"
    json_check "$TMP/dev.json" 'j["cross_device"]["available"] and j["cross_device"]["same_model"] and len(j["cross_device"]["devices"]) == 2' \
        "GPU: two devices, same model"
    json_check "$TMP/dev.json" 'j["context"]["devices_concurrent"] is True' "GPU: the two passes ran at once"
    json_check "$TMP/dev.json" 'all(len(b["per_device"]) == 2 and [d["device"]["index"] for d in b["per_device"]] == [0, 1] for r in j["records"] for b in r["backends"])' \
        "GPU: per_device has both entries"
    json_check "$TMP/dev.json" 'len(j["cross_device"]["entries"]) == 9 and all(e["required"] for e in j["cross_device"]["entries"])' \
        "GPU: 3 records x 3 backends, every one required to agree (gpu_to_gpu, run_to_run on one model)"
    json_check "$TMP/dev.json" 'all(e["agree"] and e["verdict"] == "pass" for e in j["cross_device"]["entries"] if e["devices_run"] == 2) and {e["name"] for e in j["cross_device"]["entries"] if e["devices_run"] == 2} >= {"bitonic", "sort"}' \
        "GPU: every entry that ran on both listings agrees (bitonic and sort at least)"
    json_check "$TMP/dev.json" 'all(b["per_device"][0]["output_sha256_per_rep"] == b["output_sha256_per_rep"] for r in j["records"] for b in r["backends"])' \
        "GPU: per_device[0] is the top-level result"
    expect_grep '^# cross-device \(0,0\): [0-9]+ record x backend\(s\) compared, [0-9]+ agree, 0 disagree' "$TMP/out" "GPU: the table summary"
    expect_exit 0 "gate reads the per-device report" -- "$AUDIT" gate --baseline "$TMP/dev.json" --out "$V" "$TMP/dev.json"
fi

finish
