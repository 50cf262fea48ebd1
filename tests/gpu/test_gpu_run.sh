#!/usr/bin/env bash
# GPU suite: `run` end to end on the shipped captures (exit 77 = skipped without a CUDA device).
# Checks: the deterministic backends (bitonic, sort) give one distinct output equal to the CPU
# reference with zero violations on every record, in eager, graph and batch-invariance modes;
# every entry carries a time breakdown whose parts add up; one worker process (one CUDA start)
# serves every record, those over 1 MiB (handed over in a memfd) too; the GPU pre-filter copies
# back and hashes only new outputs and leaves the report as --no-gpu-prefilter writes it;
# the exit code follows the verdicts; --dump-outputs files hash to the reported SHA-256; the
# radix negative control shows at least two distinct sets on a 0.0-plateau record (if it never
# does, the audit could not detect anything); FlashInfer's own kernels (fi-*) run, pass in
# FlashInfer's domain, and show its departures from the contract where expected; --devices 0,0
# (two pass processes sharing the GPU at once) gives the deterministic backends' (bitonic, sort,
# filtered-det, fi-graph-safe) outputs of --devices 0 on both entries, per_device[] in list order,
# devices_concurrent true and one CUDA start per entry, as --devices-sequential does with
# devices_concurrent false.
. "$(dirname "$0")/../cli/lib.sh"

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "SKIP: nvidia-smi is absent: no NVIDIA driver on this machine"
    exit 77
fi
# `devices` says whether the binary itself sees a device (a driver without a GPU, or a GPU the
# runtime cannot use, also skips).
"$AUDIT" devices >"$TMP/devices.txt" 2>&1
if grep -qiE 'no (cuda )?device|insufficient' "$TMP/devices.txt"; then
    echo "SKIP: dsatopk-audit devices reports no usable CUDA device:"; sed 's/^/    /' "$TMP/devices.txt"
    exit 77
fi

R="$TMP/report.json"
"$AUDIT" run --reps 5 --out "$R" captures >"$TMP/table.txt" 2>"$TMP/run.err"
RUN_EXIT=$?
cat "$TMP/table.txt"
if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["context"]["device"] is None else 1)' "$R" 2>/dev/null; then
    echo "SKIP: the report says no device: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["context"]["device_unavailable_reason"])' "$R")"
    exit 77
fi
json_check "$R" 'j["complete"] and j["exit_code"] == '"$RUN_EXIT" "the report is complete and records exit code $RUN_EXIT"
json_check "$R" 'j["exit_code"] == (1 if j["summary"]["backends_fail"] else 0)' \
    "exit code 0 exactly when no backend fails (1 otherwise)"
json_check "$R" 'j["context"]["device"]["sm_count"] > 0 and j["context"]["device"]["name"]' "device block filled"

# The deterministic backends: every record, one output, equal to the reference, no violation.
DETERMINISTIC='[b for r in j["records"] for b in r["backends"] if b["name"] in ("bitonic", "sort")]'
json_check "$R" "len($DETERMINISTIC) == 2 * len(j['records'])" "bitonic and sort ran on every record"
json_check "$R" "all(b['status'] == 'ok' and b['verdict'] == 'pass' for b in $DETERMINISTIC)" \
    "bitonic and sort: status ok, verdict pass everywhere"
json_check "$R" "all(b['distinct_outputs'] == 1 and b['equals_reference_reps'] == b['reps'] == 5 for b in $DETERMINISTIC)" \
    "bitonic and sort: one distinct output, equal to the reference in 5 of 5 reps"
json_check "$R" "all(len(set(b['output_sha256_per_rep'])) == 1 and b['output_sha256_per_rep'][0] == r['reference']['output_sha256'] for r in j['records'] for b in r['backends'] if b['name'] in ('bitonic', 'sort'))" \
    "bitonic and sort: every rep's hash is the reference hash"
json_check "$R" "all(v['total_rows'] == 0 for b in $DETERMINISTIC for v in b['violations'].values())" \
    "bitonic and sort: zero violations of every kind"
json_check "$R" "all(b['kernel_time_us']['median'] is not None and b['kernel_time_us']['median'] > 0 for b in $DETERMINISTIC)" \
    "kernel times measured"

# The time breakdown (docs/REPORT.md "time_breakdown_ms"): every part present, the parts and
# other_ms add up to total_ms, the kernels took time; the table ends with the time lines.
OK_ENTRIES='[b for r in j["records"] for b in r["backends"] if b["status"] == "ok"]'
TIME_KEYS='("device_open_ms", "setup_ms", "kernel_ms", "launch_overhead_ms", "noise_wait_ms", "row_hash_ms", "copy_ms", "hash_ms", "check_ms", "dump_ms", "batch_invariance_ms", "other_ms")'
json_check "$R" "all(set(b['time_breakdown_ms']) == set($TIME_KEYS) | {'total_ms'} for r in j['records'] for b in r['backends'])" \
    "time_breakdown_ms: every part on every entry"
json_check "$R" "all(b['time_breakdown_ms']['total_ms'] > 0 and b['time_breakdown_ms']['kernel_ms'] > 0 and min(b['time_breakdown_ms'].values()) >= 0 and abs(sum(b['time_breakdown_ms'][k] for k in $TIME_KEYS) - b['time_breakdown_ms']['total_ms']) < 0.02 for b in $OK_ENTRIES)" \
    "time_breakdown_ms: the kernels took time, the parts add up to total_ms"
json_check "$R" "all(b['time_breakdown_ms']['row_hash_ms'] > 0 and b['host_work']['gpu_prefilter'] for b in $OK_ENTRIES) and j['context']['gpu_prefilter'] is True" \
    "the GPU pre-filter ran on every replayed entry"
# One session worker for the whole run (no crash here): only the very first backend replayed
# pays a CUDA start, every later record reuses its context.
json_check "$R" "[(i, b['name']) for i, r in enumerate(j['records']) for b in r['backends'] if b['time_breakdown_ms']['device_open_ms'] > 0] == [(0, j['records'][0]['backends'][0]['name'])] and len(j['records']) > 1" \
    "one CUDA start for every record of the run (the session worker)"
expect_grep '^# time all backends: [0-9.]+ ms = .*kernel ' "$TMP/table.txt" "the table's time line for all backends"
expect_grep '^# time bitonic: [0-9.]+ ms = ' "$TMP/table.txt" "a time line per backend"
# Only new outputs are copied back, SHA-256'd and checked; every other rep matched on the GPU.
json_check "$R" "all(b['host_work']['outputs_hashed'] + b['host_work']['reps_matched_on_gpu'] == b['reps'] == 5 and b['host_work']['outputs_copied'] == b['host_work']['outputs_hashed'] == b['host_work']['outputs_checked'] >= b['distinct_outputs'] for b in $OK_ENTRIES)" \
    "pre-filter: outputs copied = hashed = checked (the new ones), the other reps matched on the GPU"
json_check "$R" "all(b['host_work']['outputs_hashed'] == 1 and b['host_work']['reps_matched_on_gpu'] == 4 for b in $DETERMINISTIC)" \
    "pre-filter: bitonic and sort copy and hash one output of 5 reps"
# The host work of new outputs runs beside the reps (src/replay/tally_queue.h): the entry's time shows
# only the wait for it, host_work its whole time (hash_ms is rounded to the microsecond, which the
# SHA-256 of a small output can take less than: no "> 0" on it).
json_check "$R" "all(b['host_work']['beside_reps'] and b['host_work']['outputs_hashed'] > 0 and b['time_breakdown_ms']['hash_ms'] + b['time_breakdown_ms']['check_ms'] <= b['host_work']['hash_ms'] + b['host_work']['check_ms'] + 1.0 for b in $OK_ENTRIES)" \
    "host work beside the reps: each entry waited at most its whole time"

# same_entries A.json B.json WHAT: passes when the two reports' entries are the same, times and
# host work aside (what WHAT may change).
same_entries() {
    python3 - "$1" "$2" >"$TMP/same.txt" 2>&1 <<'EOF2'
import json, sys
strip = ("time_breakdown_ms", "host_work", "kernel_time_us")
def entries(path):
    report = json.load(open(path))
    return [{k: v for k, v in b.items() if k not in strip}
            for r in report["records"] for b in r["backends"]]
a, b = entries(sys.argv[1]), entries(sys.argv[2])
bad = [(x["name"], x.get("verdict")) for x, y in zip(a, b) if x != y]
print("entries", len(a), "differing", len(bad), bad[:3])
sys.exit(1 if bad or len(a) != len(b) or not a else 0)
EOF2
    if [ $? -eq 0 ]; then pass "$3 changes nothing but times and host work ($(cat "$TMP/same.txt"))"
    else fail "$3 changed the report"; cat "$TMP/same.txt"; fi
}

# The same audit without the pre-filter gives the same report, times and host work aside.
expect_exit 0 "--no-gpu-prefilter on tie.bin, relu.bin and plateau.bin (bitonic, sort, filtered-det)" -- \
    "$AUDIT" run --quiet --reps 5 --noise none --backends bitonic,sort,filtered-det --no-gpu-prefilter \
    --out "$TMP/full.json" captures/tie.bin captures/relu.bin captures/plateau.bin
expect_exit 0 "the same with the pre-filter" -- \
    "$AUDIT" run --quiet --reps 5 --noise none --backends bitonic,sort,filtered-det \
    --out "$TMP/filtered.json" captures/tie.bin captures/relu.bin captures/plateau.bin
json_check "$TMP/full.json" "j['context']['gpu_prefilter'] is False and all(b['host_work']['outputs_hashed'] == b['host_work']['outputs_copied'] == 5 and b['host_work']['reps_matched_on_gpu'] == 0 for r in j['records'] for b in r['backends'])" \
    "--no-gpu-prefilter: every rep copied back and SHA-256'd"
same_entries "$TMP/full.json" "$TMP/filtered.json" "the pre-filter"
# The host work in the rep (DSATOPK_HOST_THREADS=1: no thread beside the reps) gives the same.
expect_exit 0 "the same with DSATOPK_HOST_THREADS=1" -- \
    env DSATOPK_HOST_THREADS=1 "$AUDIT" run --quiet --reps 5 --noise none \
    --backends bitonic,sort,filtered-det --out "$TMP/inrep.json" captures/tie.bin \
    captures/relu.bin captures/plateau.bin
json_check "$TMP/inrep.json" "all(not b['host_work']['beside_reps'] for r in j['records'] for b in r['backends'])" \
    "DSATOPK_HOST_THREADS=1: the host work ran in the reps"
same_entries "$TMP/inrep.json" "$TMP/filtered.json" "the host work beside the reps"

# Negative control: radix flaps on a plateau whose boundary sits in the 0.0 plateau.
json_check "$R" "any(b['name'] == 'radix' and b['status'] == 'ok' and b['distinct_sets'] >= 2 for r in j['records'] if r['census']['census'][0]['underdetermined_rows'] > 0 for b in r['backends'])" \
    "negative control: radix shows >= 2 distinct sets on an underdetermined record"

# Dumps: sha256sum of each file equals the reported hash of that rep.
mkdir -p "$TMP/dumps"
expect_exit 0 "--dump-outputs on plateau.bin record 0 (bitonic, sort)" -- \
    "$AUDIT" run --quiet --reps 3 --backends bitonic,sort --records 0 --dump-outputs "$TMP/dumps" \
    --out "$TMP/dump.json" captures/plateau.bin
python3 - "$TMP/dump.json" "$TMP/dumps" >"$TMP/dumpcheck.txt" 2>&1 <<'EOF'
import hashlib, json, os, sys
report = json.load(open(sys.argv[1]))
record = report["records"][0]
bad = 0
files = 0
for backend in record["backends"]:
    for rep, expected in enumerate(backend["output_sha256_per_rep"]):
        path = os.path.join(sys.argv[2], "plateau-r0-%s-rep%02d.bin" % (backend["name"], rep))
        got = hashlib.sha256(open(path, "rb").read()).hexdigest()
        files += 1
        if got != expected:
            bad += 1
            print("mismatch", path, got, expected)
print("files", files, "mismatches", bad)
sys.exit(1 if bad or files != 6 else 0)
EOF
if [ $? -eq 0 ]; then pass "dump files hash to the reported output_sha256 ($(tail -1 "$TMP/dumpcheck.txt"))"
else fail "dump hashes"; cat "$TMP/dumpcheck.txt"; fi
json_check "$TMP/dump.json" "j['context']['gpu_prefilter'] is False and all(b['host_work']['outputs_copied'] == 3 and b['time_breakdown_ms']['dump_ms'] > 0 for r in j['records'] for b in r['backends'])" \
    "--dump-outputs turns the pre-filter off: every rep copied back and dumped"

# Graph and batch-invariance modes on the deterministic backends.
expect_exit 0 "--graph --batch-invariance on tie.bin and relu.bin (bitonic, sort)" -- \
    "$AUDIT" run --quiet --reps 5 --backends bitonic,sort --graph --batch-invariance --seed 3 \
    --out "$TMP/modes.json" captures/tie.bin captures/relu.bin
MODES='[b for r in j["records"] for b in r["backends"]]'
json_check "$TMP/modes.json" "all(b['graph']['ran'] and b['graph']['error'] is None and b['graph']['equals_eager_reps'] == 5 and b['graph']['equals_reference_reps'] == 5 for b in $MODES)" \
    "graph replays equal the eager output and the reference"
json_check "$TMP/modes.json" "all(b['batch_invariance']['ran'] and b['batch_invariance']['dependent_rows_total'] == 0 and b['batch_invariance']['rows_tested'] > 0 for b in $MODES)" \
    "batch invariance: no row depends on its batch"
json_check "$TMP/modes.json" "all(b['verdict'] == 'pass' for b in $MODES)" "graph and batch modes: pass"

# Emulating a GB10 (102400 B shared memory per SM): filtered is unsupported, with the reason.
expect_exit 0 "--emulate-smem-per-sm 102400 --backends filtered" -- \
    "$AUDIT" run --quiet --reps 2 --backends filtered --emulate-smem-per-sm 102400 \
    --out "$TMP/gb10.json" captures/tie.bin
json_check "$TMP/gb10.json" "all(b['status'] == 'unsupported' and b['reason'] and b['verdict'] == 'not_run' for r in j['records'] for b in r['backends'])" \
    "emulated GB10: filtered unsupported with a reason, not a failure"
json_check "$TMP/gb10.json" 'j["context"]["emulation"]["smem_per_sm_bytes"] == 102400' "emulation in the context"
json_check "$TMP/gb10.json" 'j["context"]["device"]["smem_emulated"] is True and j["context"]["device"]["smem_per_sm_bytes"] == 102400' \
    "the context's device is described with the emulated shared memory"

# FlashInfer's own kernels (fi-*, docs/BACKENDS.md "FlashInfer's own kernels"), from the default
# run above: every record ran or was refused with a reason, never an error; they pass everywhere
# but on the two edge.bin records outside FlashInfer's domain (1: exact -inf, which it ranks as a
# value, so the all -inf row selects -inf; 9: NaNs of both signs); the deterministic modes give
# one output; fi-det-sorted equals the reference byte for byte where it runs, and refuses
# records that are not dense rows.
FI='[b for r in j["records"] for b in r["backends"] if b["name"].startswith("fi-")]'
OUTSIDE='(lambda r: r["file"].endswith("edge.bin") and r["index"] in (1, 9))'
if python3 -c 'import json,sys; sys.exit(0 if any("not built" in (b["reason"] or "") for r in json.load(open(sys.argv[1]))["records"] for b in r["backends"] if b["name"].startswith("fi-")) else 1)' "$R"; then
    json_check "$R" "all(b['status'] == 'unsupported' and b['reason'].startswith('not built: flashinfer headers not found') for b in $FI)" \
        "fi backends without the flashinfer headers: unsupported, 'not built', on every record"
    echo "# this binary has no FlashInfer kernels: the fi checks below do not apply"
else
    json_check "$R" "len($FI) == 4 * len(j['records']) and all(b['status'] in ('ok', 'unsupported') and (b['status'] == 'ok' or b['reason']) for b in $FI)" \
        "fi backends: ok or unsupported with a reason on every record (no error, hang or crash)"
    json_check "$R" "all(b['verdict'] == 'pass' for r in j['records'] if not $OUTSIDE(r) for b in r['backends'] if b['name'].startswith('fi-') and b['status'] == 'ok')" \
        "fi backends pass on every record in FlashInfer's domain"
    json_check "$R" "all(b['status'] == 'ok' for r in j['records'] for b in r['backends'] if b['name'] in ('fi-auto', 'fi-det', 'fi-graph-safe'))" \
        "fi-auto, fi-det and fi-graph-safe run every shipped record (page tables and row starts included)"
    json_check "$R" "all(b['violations']['out_of_range']['rows'] >= 1 and b['verdict'] == 'fail' for r in j['records'] if r['file'].endswith('edge.bin') and r['index'] == 1 for b in r['backends'] if b['name'].startswith('fi-') and b['status'] == 'ok')" \
        "edge.bin record 1: the fi backends select exact -inf in the all -inf row (out_of_range), as FlashInfer ranks -inf as a value"
    json_check "$R" "all(b['distinct_outputs'] == 1 for r in j['records'] for b in r['backends'] if b['name'] in ('fi-det', 'fi-det-sorted', 'fi-graph-safe') and b['status'] == 'ok')" \
        "fi-det, fi-det-sorted and fi-graph-safe: one distinct output on every record"
    json_check "$R" "all(b['equals_reference_reps'] == b['reps'] for r in j['records'] if not $OUTSIDE(r) for b in r['backends'] if b['name'] == 'fi-det-sorted' and b['status'] == 'ok') and any(b['status'] == 'ok' for b in $FI if b['name'] == 'fi-det-sorted')" \
        "fi-det-sorted equals the reference byte for byte wherever it runs (in FlashInfer's domain)"
    json_check "$R" "all(b['status'] == 'unsupported' and 'sorted output is TopKDispatch' in b['reason'] for r in j['records'] if r['flags']['row_starts'] or r['flags']['page_table'] or r['row_stride'] != r['max_length'] for b in r['backends'] if b['name'] == 'fi-det-sorted')" \
        "fi-det-sorted refuses records with row starts, page tables or padded rows, naming TopKDispatch"
    python3 - "$R" <<'EOF2'
import json, sys
for r in json.load(open(sys.argv[1]))["records"]:
    if r["file"].endswith("edge.bin") and r["index"] in (1, 9):
        for b in r["backends"]:
            if b["name"].startswith("fi-"):
                bad = {k: v["rows"] for k, v in b["violations"].items() if v["rows"]}
                print(f"# edge.bin:{r['index']} {b['name']}: {b['status']} {b['verdict']} {bad}")
EOF2
    # The other path of FlashInfer's heuristic on the same records, forced through its
    # FLASHINFER_TOPK_ALGO variable: multi_cta (the shipped records otherwise take FilteredTopK).
    FLASHINFER_TOPK_ALGO=multi_cta "$AUDIT" run --quiet --reps 5 --backends fi-auto,fi-det \
        --out "$TMP/fi-radix.json" captures/tie.bin captures/plateau.bin captures/edge.bin \
        >/dev/null 2>&1
    json_check "$TMP/fi-radix.json" "all(b['status'] == 'ok' for r in j['records'] for b in r['backends']) and all(b['verdict'] == 'pass' for r in j['records'] if not $OUTSIDE(r) for b in r['backends'])" \
        "FLASHINFER_TOPK_ALGO=multi_cta: fi-auto and fi-det run and pass every record in FlashInfer's domain"
    json_check "$TMP/fi-radix.json" "all(b['distinct_outputs'] == 1 for r in j['records'] for b in r['backends'] if b['name'] == 'fi-det')" \
        "FLASHINFER_TOPK_ALGO=multi_cta: fi-det gives one output"
    # Graph replays of the deterministic modes equal their eager launches.
    expect_exit 0 "--graph on tie.bin and relu.bin (fi-det, fi-det-sorted, fi-graph-safe)" -- \
        "$AUDIT" run --quiet --reps 3 --graph --backends fi-det,fi-det-sorted,fi-graph-safe \
        --out "$TMP/fi-graph.json" captures/tie.bin captures/relu.bin
    json_check "$TMP/fi-graph.json" "all(b['graph']['ran'] and b['graph']['error'] is None and b['graph']['equals_eager_reps'] == 3 for r in j['records'] for b in r['backends'])" \
        "fi deterministic modes: graph replays equal the eager output"
    # Under emulation they refuse: the real code reads the device.
    expect_exit 0 "--emulate-smem-per-sm 102400 --backends fi-auto,fi-graph-safe" -- \
        "$AUDIT" run --quiet --reps 2 --backends fi-auto,fi-graph-safe --emulate-smem-per-sm 102400 \
        --out "$TMP/fi-gb10.json" captures/tie.bin
    json_check "$TMP/fi-gb10.json" "all(b['status'] == 'unsupported' and 'cannot be emulated' in b['reason'] for r in j['records'] for b in r['backends'])" \
        "emulated GB10: the fi backends say they cannot be emulated"
fi

# --devices 0,0: the device compared with itself, two passes; the second finds the first's
# records and adds its per_device[] entries, and the table says which pass runs.
expect_exit 0 "--devices 0,0 --backends bitonic,sort" -- \
    "$AUDIT" run --reps 2 --noise none --backends bitonic,sort --devices 0,0 \
    --out "$TMP/self.json" captures/tie.bin captures/relu.bin
expect_grep '^# --devices entry 1: ordinal 0 ' "$TMP/out" "the table names the second pass"
json_check "$TMP/self.json" 'len(j["records"]) > 0 and all([d["device"]["index"] for d in b["per_device"]] == [0, 1] and all(d["status"] == "ok" for d in b["per_device"]) for r in j["records"] for b in r["backends"])' \
    "per_device: one ok entry per --devices entry, in list order, on every record x backend"
json_check "$TMP/self.json" 'j["cross_device"]["available"] and j["cross_device"]["summary"]["compared"] > 0 and j["cross_device"]["summary"]["required_disagreements"] == 0' \
    "cross_device: the device agrees with itself"

# --devices 0 against --devices 0,0 (two pass processes sharing the GPU at once, each with its own
# CUDA context and noise stream) and against the two in turn (--devices-sequential): the
# deterministic backends give one output per record, the same on every entry and in every mode.
DET=bitonic,sort,filtered-det
if python3 -c 'import json,sys; sys.exit(1 if any("not built" in (b["reason"] or "") for r in json.load(open(sys.argv[1]))["records"] for b in r["backends"] if b["name"].startswith("fi-")) else 0)' "$R"; then
    DET=$DET,fi-graph-safe
fi
CAPS=(captures/tie.bin captures/relu.bin captures/plateau.bin)
expect_exit 0 "--devices 0 ($DET)" -- "$AUDIT" run --quiet --reps 3 --backends "$DET" \
    --devices 0 --out "$TMP/one.json" "${CAPS[@]}"
expect_exit 0 "--devices 0,0 at once ($DET)" -- "$AUDIT" run --quiet --reps 3 --backends "$DET" \
    --devices 0,0 --out "$TMP/two.json" "${CAPS[@]}"
expect_exit 0 "--devices 0,0 --devices-sequential ($DET)" -- "$AUDIT" run --quiet --reps 3 \
    --backends "$DET" --devices 0,0 --devices-sequential --out "$TMP/seq.json" "${CAPS[@]}"
json_check "$TMP/two.json" 'j["context"]["devices_concurrent"] is True' "--devices 0,0: devices_concurrent true"
json_check "$TMP/seq.json" 'j["context"]["devices_concurrent"] is False' "--devices-sequential: devices_concurrent false"
json_check "$TMP/one.json" 'j["context"]["devices_concurrent"] is False' "--devices 0: devices_concurrent false"
for mode in two seq; do
    python3 - "$TMP/one.json" "$TMP/$mode.json" >"$TMP/same-$mode.txt" 2>&1 <<'EOF2'
import json, sys
one, other = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
alone = {(r["file"], r["index"], b["name"]): set(b["output_sha256_per_rep"])
         for r in one["records"] for b in r["backends"]}
bad, compared = [], 0
for r in other["records"]:
    for b in r["backends"]:
        key = (r["file"], r["index"], b["name"])
        devices = b.get("per_device", [])
        sets = [set(d["output_sha256_per_rep"]) for d in devices]
        compared += 1
        if [d["device"]["index"] for d in devices] != [0, 1] or len(alone[key]) != 1 or \
                any(s != alone[key] for s in sets) or any(d["status"] != "ok" for d in devices):
            bad.append(key)
print("record x backend", compared, "differing from --devices 0", len(bad), bad[:3])
sys.exit(1 if bad or compared != len(alone) else 0)
EOF2
    if [ $? -eq 0 ]; then pass "$mode: every entry's output equals --devices 0's, per_device in list order ($(cat "$TMP/same-$mode.txt"))"
    else fail "$mode: outputs differ from --devices 0"; cat "$TMP/same-$mode.txt"; fi
done
# Each entry's session worker starts CUDA once: records over 1 MiB (relu, plateau) reach it in a
# memfd, and no record gets a worker of its own.
json_check "$TMP/two.json" "all([(i, b['name']) for i, r in enumerate(j['records']) for b in r['backends'] if b['per_device'][d]['time_breakdown_ms']['device_open_ms'] > 0] == [(0, j['records'][0]['backends'][0]['name'])] for d in (0, 1))" \
    "--devices 0,0: one CUDA start per entry for every record"

finish
