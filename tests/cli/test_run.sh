#!/usr/bin/env bash
# Command-line tests of `run` on a machine without a GPU (they also pass with one): the report
# is valid JSON with the schema fields, the backends are unavailable with a reason when there
# is no device, the census is present, and the reference hashes equal an independent numpy
# computation of the canonical top-k (docs/REFERENCE.md). Bad options exit 2, a missing file
# exits 3, and a corrupt or truncated capture exits 3 with the records before it reported.
. "$(dirname "$0")/lib.sh"

CAPTURE="$TMP/small.bin"
PYTHON_READER=tools/python/dsatopk_capture/records.py

# A small capture of four records: boundary ties, a page table, row starts with zlib, NaNs.
make_capture() {
    "$AUDIT" synth -f tie -b 4 -L 512 -k 16 --ties 8 -o "$CAPTURE" &&
        "$AUDIT" synth -f paged -b 3 -L 1000 -k 16 -a -o "$CAPTURE" &&
        "$AUDIT" synth -f offsets -b 3 -L 700 -k 32 -z -a -o "$CAPTURE" &&
        "$AUDIT" synth -f nan -b 2 -L 300 -k 20 -a -o "$CAPTURE"
}
if "$AUDIT" help synth >/dev/null 2>&1 && make_capture >"$TMP/synth.log" 2>&1; then
    pass "made a 4-record capture with synth"
else
    echo "SKIP: \`dsatopk-audit synth\` is not available to make a capture"; cat "$TMP/synth.log"
    exit 77
fi

# ---- a normal run ------------------------------------------------------------------------------
expect_exit 0 "run on a good capture" -- "$AUDIT" run --reps 3 --out "$TMP/report.json" "$CAPTURE"
cp "$TMP/out" "$TMP/table.txt"
expect_grep '^# record .*rows x L.*outputs.*sets.*#wrong.*#viol.*flapping.*median_us.*verdict' \
    "$TMP/table.txt" "the table has a header with the documented columns"
expect_grep '^  small.bin:3 .*2 x 300 .*20  sort ' "$TMP/table.txt" \
    "one table line per record x backend (small.bin:3, sort)"
expect_grep '^# 4 record\(s\), 36 backend run\(s\)' "$TMP/table.txt" "the summary line counts 4 x 9 runs"
R="$TMP/report.json"
json_check "$R" 'j["schema"] == "dsatopk-audit/report" and j["schema_version"] == 1' "schema id and version"
json_check "$R" 'j["complete"] is True and j["exit_code"] == 0 and j["stop_reason"] is None' \
    "complete, exit code 0 recorded"
json_check "$R" 'all(k in j["context"] for k in ("tool_version", "git_revision", "command_line", "utc_time", "host", "device", "emulation", "noise", "reps", "seed"))' \
    "context block fields"
json_check "$R" 'j["context"]["reps"] == 3 and j["context"]["noise"] == "gemm"' "context records reps and noise"
json_check "$R" 'len(j["records"]) == 4 and [r["index"] for r in j["records"]] == [0, 1, 2, 3]' \
    "four records in file order"
json_check "$R" '[r["byte_offset"] for r in j["records"]][0] == 0 and all(r["payload_sha256"] and len(r["payload_sha256"]) == 64 for r in j["records"])' \
    "record offsets and payload hashes"
json_check "$R" 'j["records"][1]["flags"]["page_table"] and j["records"][1]["flags"]["page_size"] == 64 and j["records"][2]["flags"]["row_starts"] and j["records"][2]["flags"]["compressed"]' \
    "record flags"
json_check "$R" 'j["records"][0]["metadata"]["family"] == "tie"' "metadata parsed as an object"
json_check "$R" 'all(r["census"]["census"][0]["k"] == r["k"] and len(r["census"]["census"][0]["per_row"]) == r["rows"] for r in j["records"])' \
    "census present for the record's k"
json_check "$R" 'all(len(r["backends"]) == 9 for r in j["records"])' "every backend of the table per record"
if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["context"]["device"] is None else 1)' "$R"; then
    json_check "$R" 'all(b["status"] == "unavailable" and b["reason"] and b["verdict"] == "not_run" for r in j["records"] for b in r["backends"])' \
        "no device: every backend unavailable with a reason, verdict not_run"
    json_check "$R" 'j["context"]["device_unavailable_reason"]' "no device: the context says why"
    json_check "$R" 'j["summary"]["backends_not_run"] == 36 and j["summary"]["backends_fail"] == 0' "summary counts"
else
    echo "# a CUDA device is present: the unavailable checks do not apply"
fi
json_check "$R" '"NaN" not in open(sys.argv[1]).read() and "Infinity" not in open(sys.argv[1]).read()' \
    "no NaN or Infinity tokens"

# ---- where the time went (docs/REPORT.md "time_breakdown_ms"); with or without a GPU ----------
TIME_KEYS='("device_open_ms", "setup_ms", "kernel_ms", "launch_overhead_ms", "noise_wait_ms", "row_hash_ms", "copy_ms", "hash_ms", "check_ms", "dump_ms", "batch_invariance_ms", "other_ms")'
json_check "$R" "all(set(b['time_breakdown_ms']) == set($TIME_KEYS) | {'total_ms'} and min(b['time_breakdown_ms'].values()) >= 0 for r in j['records'] for b in r['backends'])" \
    "every backend entry has time_breakdown_ms with every part, none negative"
json_check "$R" "all(abs(sum(b['time_breakdown_ms'][k] for k in $TIME_KEYS) - b['time_breakdown_ms']['total_ms']) < 0.02 for r in j['records'] for b in r['backends'])" \
    "the parts and other_ms add up to total_ms"
json_check "$R" "all(set(b['host_work']) == {'gpu_prefilter', 'reps_matched_on_gpu', 'outputs_copied', 'outputs_hashed', 'outputs_checked', 'beside_reps', 'hash_ms', 'check_ms'} for r in j['records'] for b in r['backends'])" \
    "every backend entry has host_work"
json_check "$R" "all(set(r['time_breakdown_ms']) == {'reference_ms', 'census_ms', 'backends_ms', 'other_ms', 'total_ms'} and r['time_breakdown_ms']['total_ms'] > 0 and r['time_breakdown_ms']['reference_ms'] > 0 for r in j['records'])" \
    "every record has its own time_breakdown_ms (CPU reference, census, workers)"
json_check "$R" 'j["context"]["gpu_prefilter"] is True' "the GPU pre-filter is on by default"
expect_grep '^# time records: [0-9.]+ ms = cpu reference [0-9.]+ \+ census [0-9.]+ \+ backend workers [0-9.]+ \+ other [0-9.]+$' \
    "$TMP/table.txt" "the table ends with the records' time line"
if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["context"]["device"] is None else 1)' "$R"; then
    json_check "$R" "all(b['time_breakdown_ms']['total_ms'] == 0 and b['host_work']['outputs_copied'] == 0 and b['host_work']['gpu_prefilter'] is False for r in j['records'] for b in r['backends'])" \
        "no device: nothing ran, so every backend's time and host work are zero"
fi
expect_exit 0 "--no-gpu-prefilter is accepted" -- "$AUDIT" run --quiet --reps 1 --no-gpu-prefilter --out "$TMP/nopre.json" "$CAPTURE"
json_check "$TMP/nopre.json" 'j["context"]["gpu_prefilter"] is False and "--no-gpu-prefilter" in j["context"]["command_line"]' \
    "--no-gpu-prefilter: the context says the pre-filter is off"
mkdir -p "$TMP/dumps"
expect_exit 0 "--dump-outputs turns the pre-filter off" -- "$AUDIT" run --quiet --reps 1 --dump-outputs "$TMP/dumps" --out "$TMP/dumped.json" "$CAPTURE"
json_check "$TMP/dumped.json" 'j["context"]["gpu_prefilter"] is False' "--dump-outputs: the context says the pre-filter is off"

# ---- the reference hashes against numpy ------------------------------------------------------
# reference_hashes.py CAPTURE [K|-] [RECORD ROWS]: one "output_sha256 set_sha256" line per record
# (or for the listed rows of one record).
cat >"$TMP/reference_hashes.py" <<'EOF'
import hashlib, sys
sys.path.insert(0, "tools/python")
import numpy as np
from dsatopk_capture import read_records

k_override = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "-" else 0
record_wanted = int(sys.argv[3]) if len(sys.argv) > 3 else None
rows_wanted = [int(x) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 else None

def order_key(window):
    bits = window.view(np.uint32).astype(np.uint64)
    return np.where(bits & 0x80000000, (~bits) & 0xFFFFFFFF, bits | 0x80000000)

for record in read_records(sys.argv[1]):
    if record_wanted is not None and record.index != record_wanted:
        continue
    k = k_override or record.k
    rows = rows_wanted if rows_wanted is not None else range(record.rows)
    out = np.full((len(rows), k), -1, dtype="<i4")
    for i, b in enumerate(rows):
        start = int(record.row_starts[b]) if record.row_starts is not None else 0
        window = record.scores[b, start:start + int(record.lengths[b])]
        keys = order_key(window)
        candidates = np.nonzero(window.view(np.uint32) != 0xFF800000)[0]
        # Larger key first, equal keys by smaller index: a stable sort of -key.
        ranked = candidates[np.argsort(-keys[candidates].astype(np.int64), kind="stable")][:k]
        if record.page_size:
            first = int(record.page_table_row_starts[b]) if record.page_table_row_starts is not None else 0
            pages = record.page_table[b, first + ranked // record.page_size].astype(np.int64)
            ranked = pages * record.page_size + ranked % record.page_size
        out[i, :len(ranked)] = ranked
    print(hashlib.sha256(out.tobytes()).hexdigest(),
          hashlib.sha256(np.sort(out, axis=1).tobytes()).hexdigest())
EOF
if [ -f "$PYTHON_READER" ] && python3 -c 'import numpy' 2>/dev/null; then
    python3 "$TMP/reference_hashes.py" "$CAPTURE" >"$TMP/expected.txt" 2>"$TMP/pyerr" || cat "$TMP/pyerr"
    python3 -c 'import json,sys; [print(r["reference"]["output_sha256"], r["reference"]["set_sha256"]) for r in json.load(open(sys.argv[1]))["records"]]' \
        "$R" >"$TMP/got.txt"
    if [ -s "$TMP/expected.txt" ] && cmp -s "$TMP/expected.txt" "$TMP/got.txt"; then
        pass "reference output and set hashes equal numpy's for all 4 records (ties, pages, row starts, NaN)"
    else
        fail "reference hashes differ from numpy's"; paste "$TMP/expected.txt" "$TMP/got.txt" | sed 's/^/    /'
    fi

    # --k and --rows narrow the record; row numbers stay those of the file.
    expect_exit 0 "run --records 0 --rows 1,3 --k 8" -- \
        "$AUDIT" run --quiet --records 0 --rows 1,3 --k 8 --out "$TMP/narrow.json" "$CAPTURE"
    json_check "$TMP/narrow.json" 'len(j["records"]) == 1 and j["records"][0]["rows"] == 2 and j["records"][0]["source_rows"] == [1, 3] and j["records"][0]["k"] == 8 and j["records"][0]["record_k"] == 16' \
        "--records/--rows/--k: one record, rows 1 and 3, k 8"
    python3 "$TMP/reference_hashes.py" "$CAPTURE" 8 0 1,3 >"$TMP/expected_narrow.txt"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["records"][0]["reference"]; print(r["output_sha256"], r["set_sha256"])' \
        "$TMP/narrow.json" >"$TMP/got_narrow.txt"
    if [ -s "$TMP/expected_narrow.txt" ] && cmp -s "$TMP/expected_narrow.txt" "$TMP/got_narrow.txt"; then
        pass "narrowed reference hashes equal numpy's"
    else
        fail "narrowed reference hashes differ"; paste "$TMP/expected_narrow.txt" "$TMP/got_narrow.txt"
    fi
else
    echo "# SKIP reference-hash comparison: $PYTHON_READER or numpy is missing"
fi

# ---- output options ---------------------------------------------------------------------------
expect_exit 0 "--out - writes the report to stdout" -- "$AUDIT" run --reps 1 --out - "$CAPTURE"
if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/out" 2>/dev/null; then
    pass "stdout is the JSON report alone"
else
    fail "stdout is not valid JSON with --out -"
fi
expect_grep '^# record ' "$TMP/err" "--out -: the table goes to stderr"
expect_exit 0 "--quiet prints nothing on stdout" -- "$AUDIT" run --quiet --out "$TMP/q.json" "$CAPTURE"
if [ ! -s "$TMP/out" ]; then pass "--quiet: empty stdout"; else fail "--quiet: stdout not empty"; fi
expect_exit 0 "--format none" -- "$AUDIT" run --format none --out "$TMP/q.json" "$CAPTURE"
if ! grep -q '^# record' "$TMP/out"; then pass "--format none: no table"; else fail "--format none printed a table"; fi
expect_exit 0 "--backends bitonic,sort --graph --batch-invariance --seed 5" -- \
    "$AUDIT" run --quiet --backends bitonic,sort --graph --batch-invariance --seed 5 --out "$TMP/b.json" "$CAPTURE"
json_check "$TMP/b.json" '[b["name"] for b in j["records"][0]["backends"]] == ["bitonic", "sort"] and j["context"]["seed"] == 5 and j["context"]["graph"] and j["context"]["batch_invariance"]' \
    "--backends chooses and orders the backends; the context records the modes"
mkdir -p "$TMP/dir"
cp "$CAPTURE" "$TMP/dir/b.bin"
cp "$CAPTURE" "$TMP/dir/a.bin"
echo "not a capture" >"$TMP/dir/notes.txt"
expect_exit 0 "a directory argument" -- "$AUDIT" run --quiet --reps 1 --out "$TMP/dir.json" "$TMP/dir"
json_check "$TMP/dir.json" '[r["file"].split("/")[-1] for r in j["records"]] == ["a.bin"] * 4 + ["b.bin"] * 4' \
    "a directory means its *.bin files in name order"
expect_exit 0 "help" -- "$AUDIT" run --help
expect_grep 'batch-invariance' "$TMP/out" "help lists the options"

# ---- usage errors: exit 2 ---------------------------------------------------------------------
expect_exit 2 "--reps 0" -- "$AUDIT" run --reps 0 --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "--reps not a number" -- "$AUDIT" run --reps many --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "--noise unknown" -- "$AUDIT" run --noise loud --out "$TMP/x.json" "$CAPTURE"
expect_grep "noise" "$TMP/err" "the message names --noise"
expect_exit 2 "--backends unknown" -- "$AUDIT" run --backends radix,quick --out "$TMP/x.json" "$CAPTURE"
expect_grep "no backend 'quick'" "$TMP/err" "the message names the unknown backend"
expect_exit 2 "--backends twice" -- "$AUDIT" run --backends sort,sort --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "--format unknown" -- "$AUDIT" run --format xml --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "--k 0" -- "$AUDIT" run --k 0 --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "--rows malformed" -- "$AUDIT" run --rows 1,,2 --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "unknown option" -- "$AUDIT" run --frobnicate --out "$TMP/x.json" "$CAPTURE"
expect_exit 2 "--rows past a record's rows" -- "$AUDIT" run --quiet --rows 3 --out "$TMP/sel.json" "$CAPTURE"
json_check "$TMP/sel.json" 'any(e["kind"] == "selection" for e in j["input_errors"]) and j["exit_code"] == 2' \
    "--rows 3 on 3-row records: selection errors in the report"
json_check "$TMP/sel.json" '[r["index"] for r in j["records"]] == [0]' \
    "--rows 3: the record that has row 3 is still audited"

# ---- bad input: exit 3 ------------------------------------------------------------------------
expect_exit 3 "a missing file" -- "$AUDIT" run --quiet --out "$TMP/missing.json" "$TMP/nope.bin" "$CAPTURE"
json_check "$TMP/missing.json" 'j["input_errors"][0]["kind"] == "io" and "nope.bin" in j["input_errors"][0]["message"] and len(j["records"]) == 4' \
    "missing file: an io input error naming it; the good file still audited"
json_check "$TMP/missing.json" 'j["complete"] is True and j["exit_code"] == 3' "missing file: report complete, exit code 3"

# Corrupt one byte in the payload of record 2: records 0 and 1 stay in the report.
OFFSET2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records"][2]["byte_offset"])' "$R")
cp "$CAPTURE" "$TMP/corrupt.bin"
printf '\xff' | dd of="$TMP/corrupt.bin" bs=1 seek=$((OFFSET2 + 200)) conv=notrunc 2>/dev/null
expect_exit 3 "a corrupt record" -- "$AUDIT" run --quiet --out "$TMP/corrupt.json" "$TMP/corrupt.bin" "$CAPTURE"
json_check "$TMP/corrupt.json" '[r["index"] for r in j["records"] if r["file"].endswith("corrupt.bin")] == [0, 1]' \
    "corrupt record 2: records 0 and 1 are in the report"
json_check "$TMP/corrupt.json" "[(e['kind'], e['record'], e['byte_offset'], e['file'].endswith('corrupt.bin')) for e in j['input_errors']] == [('corrupt', 2, $OFFSET2, True)]" \
    "corrupt: the input error names the file, record 2 and its byte offset"
json_check "$TMP/corrupt.json" 'len([r for r in j["records"] if r["file"].endswith("small.bin")]) == 4' \
    "corrupt: the run goes on with the next file"
expect_grep "corrupt.bin" "$TMP/err" "corrupt: stderr names the file"

# Truncate inside record 3 (a writer killed mid-append).
OFFSET3=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records"][3]["byte_offset"])' "$R")
head -c $((OFFSET3 + 100)) "$CAPTURE" >"$TMP/truncated.bin"
expect_exit 3 "a truncated last record" -- "$AUDIT" run --quiet --out "$TMP/truncated.json" "$TMP/truncated.bin"
json_check "$TMP/truncated.json" 'len(j["records"]) == 3 and j["input_errors"][0]["kind"] == "truncated" and j["input_errors"][0]["record"] == 3' \
    "truncated: three records kept, the fourth reported truncated"

echo "not a capture at all, just text" >"$TMP/text.bin"
expect_exit 3 "a file that is not a capture" -- "$AUDIT" run --quiet --out "$TMP/text.json" "$TMP/text.bin"
json_check "$TMP/text.json" 'len(j["records"]) == 0 and len(j["input_errors"]) == 1' "not a capture: one input error, no record"

mkdir -p "$TMP/empty"
expect_exit 3 "a directory without captures" -- "$AUDIT" run --quiet --out "$TMP/empty.json" "$TMP/empty"

# ---- isolation options (docs/REPORT.md "Worker processes, ..."); no GPU needed -------------
expect_exit 2 "--timeout 0 is refused" -- "$AUDIT" run --quiet --timeout 0 --out "$TMP/t.json" "$CAPTURE"
expect_exit 2 "--timeout that is not a number" -- "$AUDIT" run --quiet --timeout soon --out "$TMP/t.json" "$CAPTURE"
expect_exit 0 "--timeout 5 is accepted" -- "$AUDIT" run --quiet --reps 1 --timeout 5 --out "$TMP/t.json" "$CAPTURE"
expect_exit 3 "--plugin of a missing file exits 3" -- "$AUDIT" run --quiet --plugin "$TMP/none.so" --out "$TMP/p.json" "$CAPTURE"
expect_grep "--plugin $TMP/none.so: plugin $TMP/none.so: cannot open" "$TMP/err" "the message names the plugin file"
[ -e "$TMP/p.json" ] && fail "no report is written when a plugin cannot be loaded" || pass "no report after a plugin load failure"
echo "not a shared object" >"$TMP/text.so"
expect_exit 3 "--plugin of a file that is not a shared object exits 3" -- "$AUDIT" run --quiet --plugin "$TMP/text.so" --out "$TMP/p.json" "$CAPTURE"
expect_grep "not a loadable shared object" "$TMP/err" "the message says why"
HOST_PLUGIN="$(dirname "$AUDIT")/../tests/plugins/host_good.so"
if [ -f "$HOST_PLUGIN" ]; then
    expect_exit 0 "--plugin host_good.so: its backend joins the built-ins" -- "$AUDIT" run --quiet --reps 1 --plugin "$HOST_PLUGIN" --out "$TMP/p.json" "$CAPTURE"
    json_check "$TMP/p.json" 'j["context"]["backends"][-1] == "host-good" and all(len(r["backends"]) == 10 and r["backends"][-1]["name"] == "host-good" for r in j["records"])' \
        "the plugin's backend is audited after the built-ins on every record"
    json_check "$TMP/p.json" 'all(b["plugin"]["path"].endswith("host_good.so") and len(b["plugin"]["sha256"]) == 64 for r in j["records"] for b in r["backends"] if b["name"] == "host-good")' \
        "its entries record the plugin file and its SHA-256"
    expect_exit 0 "--backends may name a plugin's backend given later" -- "$AUDIT" run --quiet --reps 1 --backends host-good,sort --plugin "$HOST_PLUGIN" --out "$TMP/p2.json" "$CAPTURE"
    json_check "$TMP/p2.json" '[b["name"] for b in j["records"][0]["backends"]] == ["host-good", "sort"]' "in the order --backends gives"
    expect_exit 3 "the same plugin twice: its name is taken" -- "$AUDIT" run --quiet --plugin "$HOST_PLUGIN" --plugin "$HOST_PLUGIN" --out "$TMP/p3.json" "$CAPTURE"
    expect_exit 2 "--backends naming an unknown backend with plugins loaded" -- "$AUDIT" run --quiet --backends nope --plugin "$HOST_PLUGIN" --out "$TMP/p3.json" "$CAPTURE"
else
    echo "# $HOST_PLUGIN is not built: the --plugin loading checks are skipped"
fi
json_check "$R" 'all(k in j["summary"]["status"] for k in ("hang", "crash", "cuda_error"))' \
    "the summary counts the isolation statuses (hang, crash, cuda_error)"

# Numbers must start with a digit: strtoull alone would take " 5" and " -5" (2^64 - 5).
expect_exit 2 "a count with leading white space is refused" -- "$AUDIT" run --quiet --reps " 5" --out "$TMP/ws.json" "$CAPTURE"
expect_exit 2 "a negative count behind white space is refused" -- "$AUDIT" run --quiet --seed " -5" --out "$TMP/ws.json" "$CAPTURE"
expect_exit 2 "a count past 2^64 is refused" -- "$AUDIT" run --quiet --seed 99999999999999999999999 --out "$TMP/ws.json" "$CAPTURE"

# --html draws the same report as `dsatopk-audit report` would.
expect_exit 0 "--html writes the page beside the JSON" -- "$AUDIT" run --quiet --reps 1 --html "$TMP/run.html" --out "$TMP/html.json" "$CAPTURE"
expect_grep '<details' "$TMP/run.html" "the page has one folded section per record"
"$AUDIT" report "$TMP/html.json" -o "$TMP/report.html" >/dev/null 2>&1
if cmp -s "$TMP/run.html" "$TMP/report.html"; then pass "run --html equals report on the same JSON"; else fail "run --html differs from report"; fi
expect_exit 2 "--html with an empty path" -- "$AUDIT" run --quiet --html "" --out "$TMP/html2.json" "$CAPTURE"

finish
