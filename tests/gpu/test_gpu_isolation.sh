#!/usr/bin/env bash
# GPU suite: `run` survives faulty backends (docs/REPORT.md "Worker processes, faults and
# interruptions"); exit 77 = skipped without a CUDA device. Arguments: the binary, then the build directory of tests/plugins.
# One run with the four faulty plugins and bitonic on a small capture with a short --timeout:
#   faulty-hang     status hang (killed by the watchdog), verdict fail
#   faulty-oob      status cuda_error with the CUDA message (illegal address), verdict fail
#   faulty-wrong    status ok, wrong_set violations, verdict fail
#   faulty-arrival  status ok, tie-rule or order violations (arrival order), verdict fail
#   bitonic         still ok and pass on every record, after each fault
# and the run exits 1 with a complete report and no process left behind. Then:
# - GPU out of memory: faulty-oom (host_oom.so) asks for 1 TiB of scratch; `run` with it and
#   bitonic exits 1 (a backend hit an error), faulty-oom is `error` naming the capture file, the
#   record, the backend, the bytes and cudaErrorMemoryAllocation, and bitonic, next in the same
#   worker, still passes;
# - a failed free: faulty-free frees the scratch `run` allocated for it, so `run`'s own free of it
#   fails (cudaErrorInvalidValue, not sticky): faulty-free is `error` naming the free (a build
#   that ignored the free's result reported it ok), and bitonic, next in the same worker, passes;
# - host-side faults: faulty-oom, faulty-crash (host_crash.so: launch() writes through NULL) and
#   faulty-hang with DSATOPK_PLUGIN_HANG=host (launch() never returns), each followed by a
#   well-behaved backend (bitonic, sort, example-simple) that must still pass: status error,
#   crash (SIGSEGV) and hang (after --timeout), exit 1, no process left behind;
# - a run stopped by SIGINT while a backend hangs exits 130 with a report marked incomplete;
# - `--devices 0,0` (two pass processes at once on one GPU) with faulty-hang, faulty-oob and
#   bitonic: each device entry reports its own hang and cuda_error, bitonic passes on both, the
#   report is complete, the two 20 s hangs per record ran side by side (the run takes less than
#   the passes one after another would), and no process is left;
# - SIGTERM to the main process alone during `--devices 0,0` while both hang: passed on to the
#   pass process, exit 143, the record in progress kept on both entries, no process left.
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/../cli/lib.sh"
PLUGINS=${2:?usage: test_gpu_isolation.sh BINARY PLUGIN_BUILD_DIR}

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "SKIP: nvidia-smi is absent: no NVIDIA driver on this machine"
    exit 77
fi
"$AUDIT" devices >"$TMP/devices.txt" 2>&1
if grep -qiE 'no (cuda )?device|insufficient' "$TMP/devices.txt"; then
    echo "SKIP: dsatopk-audit devices reports no usable CUDA device:"; sed 's/^/    /' "$TMP/devices.txt"
    exit 77
fi
for name in plugin_hang plugin_oob plugin_wrong plugin_arrival plugin_free host_crash host_oom \
    example_plugin; do
    if [ ! -f "$PLUGINS/$name.so" ]; then
        fail "$PLUGINS/$name.so is not built"
        finish
        exit 1
    fi
done

# Two records with boundary ties (arrival order shows there), small enough to replay fast.
CAPTURE="$TMP/small.bin"
# shellcheck disable=SC2015 # the second synth only runs after the first; either failing stops
"$AUDIT" synth -f tie -b 8 -L 4096 -k 64 --ties 16 -o "$CAPTURE" >/dev/null &&
    "$AUDIT" synth -f tie -b 8 -L 4096 -k 64 --ties 16 --seed 1 -a -o "$CAPTURE" >/dev/null ||
    { fail "synth could not make the capture"; finish; exit 1; }

# No worker of an earlier test is still around (the binary's children are what we look for).
children_of_audit() { pgrep -f -- "$AUDIT run" | grep -vx "$$" || true; }
# expect_no_process_left WHAT: a second after a run, none of its processes is left.
expect_no_process_left() {
    local prefix="${1:+$1: }" left
    sleep 1
    left=$(children_of_audit)
    # shellcheck disable=SC2086 # $left: one pid per word
    if [ -z "$left" ]; then pass "${prefix}no process of the run is left"; else
        fail "${prefix}processes left behind: $left"; ps -o pid,ppid,stat,cmd -p $left; fi
}
# of NAME: the entries of backend NAME in every record, as a Python expression.
of() { echo "[b for r in j['records'] for b in r['backends'] if b['name'] == '$1']"; }
# run_one_plugin STEM LABEL PLUGIN BACKENDS: `run` of the capture with one plugin and BACKENDS
# (3 reps, --timeout 60, no noise) into $TMP/STEM.json, its table in $TMP/STEM.txt (printed with
# its stderr); passes when it exits 1 (a backend hit an error), the exit of every such case.
run_one_plugin() {
    local stem=$1 label=$2 plugin=$3 backends=$4 code
    "$AUDIT" run --reps 3 --timeout 60 --noise none --out "$TMP/$stem.json" --plugin "$plugin" \
        --backends "$backends" "$CAPTURE" >"$TMP/$stem.txt" 2>"$TMP/$stem.err"
    code=$?
    cat "$TMP/$stem.txt"; sed 's/^/    stderr: /' "$TMP/$stem.err" | head -20
    if [ "$code" -eq 1 ]; then pass "$label: exit 1"; else fail "$label: exit $code, wanted 1"; fi
}

R="$TMP/faults.json"
START=$(date +%s)
"$AUDIT" run --reps 3 --timeout 20 --noise none --out "$R" \
    --plugin "$PLUGINS/plugin_hang.so" --plugin "$PLUGINS/plugin_oob.so" \
    --plugin "$PLUGINS/plugin_wrong.so" --plugin "$PLUGINS/plugin_arrival.so" \
    --backends bitonic,faulty-hang,faulty-oob,faulty-wrong,faulty-arrival \
    "$CAPTURE" >"$TMP/table.txt" 2>"$TMP/run.err"
RUN_EXIT=$?
END=$(date +%s)
cat "$TMP/table.txt"; sed 's/^/    stderr: /' "$TMP/run.err" | head -20
if [ "$RUN_EXIT" -eq 1 ]; then pass "the run with faulty plugins exits 1"; else fail "exit $RUN_EXIT, wanted 1"; fi
echo "# took $((END - START)) s"
if [ -f "$R" ]; then
    json_check "$R" 'j["complete"] is True and j["exit_code"] == 1 and len(j["records"]) == 2' \
        "the report is complete, has both records and records exit code 1"
    json_check "$R" "all(b['status'] == 'ok' and b['verdict'] == 'pass' for b in $(of bitonic)) and len($(of bitonic)) == 2" \
        "bitonic still passes on every record"
    json_check "$R" "all(b['status'] == 'hang' and b['verdict'] == 'fail' and 'timeout' in b['reason'] for b in $(of faulty-hang)) and len($(of faulty-hang)) == 2" \
        "faulty-hang: status hang (killed after the timeout), verdict fail, on each record"
    json_check "$R" "all(b['status'] == 'cuda_error' and b['verdict'] == 'fail' and ('illegal' in b['reason'].lower() or 'Illegal' in b['reason']) for b in $(of faulty-oob)) and len($(of faulty-oob)) == 2" \
        "faulty-oob: status cuda_error with the CUDA message (illegal address), verdict fail"
    json_check "$R" "all(b['status'] == 'ok' and b['verdict'] == 'fail' and b['violations']['wrong_set']['total_rows'] > 0 for b in $(of faulty-wrong))" \
        "faulty-wrong: replayed, wrong_set violations, verdict fail"
    json_check "$R" "all(b['status'] == 'ok' and b['verdict'] == 'fail' for b in $(of faulty-arrival)) and any(b['violations']['tie_rule']['total_rows'] + b['violations']['order']['total_rows'] > 0 or b['distinct_outputs'] > 1 for b in $(of faulty-arrival))" \
        "faulty-arrival: arrival-order ties break its claims (tie_rule/order violations or several outputs), verdict fail"
    json_check "$R" 'j["summary"]["status"]["hang"] == 2 and j["summary"]["status"]["cuda_error"] == 2' \
        "the summary counts 2 hang and 2 cuda_error"
    json_check "$R" 'all(b["plugin"]["path"].endswith(".so") for r in j["records"] for b in r["backends"] if b["name"].startswith("faulty-"))' \
        "plugin entries record their file"
else
    fail "no report at $R"
fi
expect_grep 'faulty-hang .*hang' "$TMP/table.txt" "the table shows the hang"
expect_no_process_left ""

# GPU out of memory: 1 TiB of scratch for faulty-oom. The allocation fails without poisoning the
# context, so the worker goes on with bitonic; exit 1 is "a backend hit an error" (docs/REPORT.md).
R3="$TMP/oom.json"
run_one_plugin oom "out of memory" "$PLUGINS/host_oom.so" faulty-oom,bitonic
# oom_named: the reason names the capture file, the record, the backend, the bytes and the error.
oom_named="b['reason'] is not None and r['file'] in b['reason'] and ('record %d, backend faulty-oom' % r['index']) in b['reason'] and '1099511627776 bytes for the scratch' in b['reason'] and 'cudaErrorMemoryAllocation' in b['reason']"
if [ -f "$R3" ]; then
    json_check "$R3" 'j["complete"] is True and j["exit_code"] == 1 and len(j["records"]) == 2' \
        "out of memory: the report is complete, has both records and records exit code 1"
    json_check "$R3" "all(b['status'] == 'error' and b['verdict'] == 'fail' and b['scratch_bytes'] == 2**40 and $oom_named for r in j['records'] for b in r['backends'] if b['name'] == 'faulty-oom') and len($(of faulty-oom)) == 2" \
        "out of memory: faulty-oom is 'error' naming file, record, backend, 1099511627776 bytes and cudaErrorMemoryAllocation, verdict fail"
    json_check "$R3" "all(b['status'] == 'ok' and b['verdict'] == 'pass' for b in $(of bitonic)) and len($(of bitonic)) == 2" \
        "out of memory: bitonic, next in the same worker, still passes on every record"
    json_check "$R3" 'j["summary"]["status"]["error"] == 2 and j["summary"]["status"]["ok"] == 2 and j["summary"]["status"]["cuda_error"] + j["summary"]["status"]["crash"] + j["summary"]["status"]["hang"] + j["summary"]["status"]["skipped"] == 0' \
        "out of memory: the summary counts 2 error and 2 ok, nothing lost, crashed or skipped"
else
    fail "out of memory: no report at $R3"
fi
expect_grep 'faulty-oom .* error ' "$TMP/oom.txt" "out of memory: the table shows the error"
expect_grep 'cudaErrorMemoryAllocation' "$TMP/oom.txt" "out of memory: the table prints the reason"

# A failed free that leaves the context working: faulty-free's scratch is freed by the plugin, so
# run's own free of it fails after the backend's reps. Exit 1: a backend hit an error.
R6="$TMP/free.json"
run_one_plugin free "failed free" "$PLUGINS/plugin_free.so" faulty-free,bitonic
if [ -f "$R6" ]; then
    json_check "$R6" "all(b['status'] == 'error' and b['verdict'] == 'fail' and ('record %d, backend faulty-free' % r['index']) in b['reason'] and 'freeing its device buffers' in b['reason'] and 'cudaErrorInvalidValue' in b['reason'] for r in j['records'] for b in r['backends'] if b['name'] == 'faulty-free') and len($(of faulty-free)) == 2" \
        "failed free: faulty-free is 'error' naming the record, the backend, the free and cudaErrorInvalidValue"
    json_check "$R6" "all(b['status'] == 'ok' and b['verdict'] == 'pass' for b in $(of bitonic)) and len($(of bitonic)) == 2" \
        "failed free: bitonic, next in the same worker, still passes on every record"
    json_check "$R6" 'j["complete"] is True and j["summary"]["status"]["error"] == 2 and j["summary"]["status"]["ok"] == 2' \
        "failed free: the report is complete and counts 2 error and 2 ok"
else
    fail "failed free: no report at $R6"
fi

# Host-side faults through `run`: out of memory, a crash in launch() and a launch() that never
# returns (DSATOPK_PLUGIN_HANG=host), each followed by a well-behaved backend that must still pass.
R4="$TMP/host-faults.json"
START=$(date +%s)
DSATOPK_PLUGIN_HANG=host "$AUDIT" run --reps 3 --timeout 15 --noise none --out "$R4" \
    --plugin "$PLUGINS/host_oom.so" --plugin "$PLUGINS/host_crash.so" \
    --plugin "$PLUGINS/plugin_hang.so" --plugin "$PLUGINS/example_plugin.so" \
    --backends faulty-oom,bitonic,faulty-crash,sort,faulty-hang,example-simple \
    "$CAPTURE" >"$TMP/host.txt" 2>"$TMP/host.err"
HOST_EXIT=$?
END=$(date +%s)
cat "$TMP/host.txt"; sed 's/^/    stderr: /' "$TMP/host.err" | head -20
if [ "$HOST_EXIT" -eq 1 ]; then pass "host-side faults: exit 1"; else fail "host-side faults: exit $HOST_EXIT, wanted 1"; fi
echo "# took $((END - START)) s"
# Two 15 s hangs and six worker start-ups: far less than the hang would take without the watchdog.
if [ $((END - START)) -lt 120 ]; then pass "host-side faults: the run ends in $((END - START)) s (< 120)"; else
    fail "host-side faults: the run took $((END - START)) s"; fi
if [ -f "$R4" ]; then
    json_check "$R4" 'j["complete"] is True and j["exit_code"] == 1 and len(j["records"]) == 2 and all([b["name"] for b in r["backends"]] == ["faulty-oom", "bitonic", "faulty-crash", "sort", "faulty-hang", "example-simple"] for r in j["records"])' \
        "host-side faults: the report is complete, both records list the six backends in order, exit code 1"
    json_check "$R4" "all(b['status'] == 'ok' and b['verdict'] == 'pass' for r in j['records'] for b in r['backends'] if b['name'] in ('bitonic', 'sort', 'example-simple')) and len($(of bitonic) + $(of sort) + $(of example-simple)) == 6" \
        "host-side faults: bitonic (after out of memory), sort (after the crash) and example-simple (after the hang) pass on every record"
    json_check "$R4" "all(b['status'] == 'error' and b['verdict'] == 'fail' and $oom_named for r in j['records'] for b in r['backends'] if b['name'] == 'faulty-oom') and len($(of faulty-oom)) == 2" \
        "host-side faults: faulty-oom is 'error' naming file, record, backend, bytes and cudaErrorMemoryAllocation"
    json_check "$R4" "all(b['status'] == 'crash' and b['verdict'] == 'fail' and 'SIGSEGV' in b['reason'] and ('record %d, backend faulty-crash' % r['index']) in b['reason'] for r in j['records'] for b in r['backends'] if b['name'] == 'faulty-crash') and len($(of faulty-crash)) == 2" \
        "host-side faults: faulty-crash is 'crash' with SIGSEGV, naming record and backend, verdict fail"
    json_check "$R4" "all(b['status'] == 'hang' and b['verdict'] == 'fail' and 'timeout' in b['reason'] and '--timeout 15' in b['reason'] and ('record %d, backend faulty-hang' % r['index']) in b['reason'] for r in j['records'] for b in r['backends'] if b['name'] == 'faulty-hang') and len($(of faulty-hang)) == 2" \
        "host-side faults: faulty-hang (launch() never returns) is 'hang' after --timeout 15, verdict fail"
    json_check "$R4" 'all(j["summary"]["status"].get(s, 0) == n for s, n in {"ok": 6, "error": 2, "hang": 2, "crash": 2, "cuda_error": 0, "skipped": 0, "unsupported": 0, "unavailable": 0}.items())' \
        "host-side faults: the summary counts 6 ok, 2 error, 2 crash, 2 hang"
else
    fail "host-side faults: no report at $R4"
fi
expect_grep 'faulty-crash .* crash ' "$TMP/host.txt" "host-side faults: the table shows the crash"
expect_grep 'contained faults: 2 hang, 2 crash, 0 cuda_error' "$TMP/host.txt" \
    "host-side faults: the table counts 2 hang and 2 crash"
expect_no_process_left "host-side faults"

# --devices 0,0: two pass processes at once, each with its own workers and watchdog.
R5="$TMP/devices-faults.json"
START=$(date +%s)
"$AUDIT" run --devices 0,0 --reps 3 --timeout 20 --noise none --out "$R5" \
    --plugin "$PLUGINS/plugin_hang.so" --plugin "$PLUGINS/plugin_oob.so" \
    --backends bitonic,faulty-hang,faulty-oob "$CAPTURE" >"$TMP/dev.txt" 2>"$TMP/dev.err"
DEV_EXIT=$?
END=$(date +%s)
cat "$TMP/dev.txt"; sed 's/^/    stderr: /' "$TMP/dev.err" | head -20
if [ "$DEV_EXIT" -eq 1 ]; then pass "--devices 0,0 with faults: exit 1"; else fail "--devices 0,0 with faults: exit $DEV_EXIT, wanted 1"; fi
echo "# took $((END - START)) s"
# Two records x one 20 s hang per entry: 40 s at once, 80 s one after the other.
if [ $((END - START)) -lt 70 ]; then pass "--devices 0,0 with faults: the entries' hangs ran at once ($((END - START)) s < 70)"; else
    fail "--devices 0,0 with faults: took $((END - START)) s, as if one after the other"; fi
if [ -f "$R5" ]; then
    json_check "$R5" 'j["complete"] is True and j["exit_code"] == 1 and j["context"]["devices_concurrent"] is True and len(j["records"]) == 2' \
        "--devices 0,0 with faults: complete, exit code 1, the entries ran at once"
    json_check "$R5" "all([d['device']['index'] for d in b['per_device']] == [0, 1] for r in j['records'] for b in r['backends'])" \
        "--devices 0,0 with faults: per_device in list order on every record x backend"
    json_check "$R5" "all(d['status'] == 'ok' and d['verdict'] == 'pass' for b in $(of bitonic) for d in b['per_device']) and all(d['status'] == 'hang' for b in $(of faulty-hang) for d in b['per_device']) and all(d['status'] == 'cuda_error' for b in $(of faulty-oob) for d in b['per_device'])" \
        "--devices 0,0 with faults: each entry has its own hang and cuda_error, bitonic passes on both"
else
    fail "--devices 0,0 with faults: no report at $R5"
fi
expect_no_process_left "--devices 0,0 with faults"

# SIGTERM to the main process alone while both entries hang: it stops its pass and passes the
# stop on to the other's process.
R6="$TMP/devices-terminated.json"
"$AUDIT" run --devices 0,0 --reps 3 --timeout 600 --noise none --out "$R6" \
    --plugin "$PLUGINS/plugin_hang.so" --backends bitonic,faulty-hang "$CAPTURE" \
    >"$TMP/term.out" 2>"$TMP/term.err" &
PID=$!
sleep 10
kill -TERM "$PID"
wait "$PID"
TERM_EXIT=$?
if [ "$TERM_EXIT" -eq 143 ]; then pass "--devices 0,0 SIGTERM: exit 143"; else fail "--devices 0,0 SIGTERM: exit $TERM_EXIT, wanted 143"; sed 's/^/    /' "$TMP/term.err"; fi
if [ -f "$R6" ]; then
    json_check "$R6" 'j["complete"] is False and "SIGTERM" in j["stop_reason"] and j["exit_code"] == 143' \
        "--devices 0,0 SIGTERM: the report is written, complete false, stop_reason names SIGTERM"
    json_check "$R6" 'len(j["records"]) == 1 and [[d["status"] for d in b["per_device"]] for b in j["records"][0]["backends"]] == [["ok", "ok"], ["skipped", "skipped"]]' \
        "--devices 0,0 SIGTERM: the record in progress keeps bitonic on both entries; the hanging backend is skipped on both"
else
    fail "--devices 0,0 SIGTERM: no report at $R6"
fi
expect_no_process_left "--devices 0,0 SIGTERM"

# Ctrl-C while a backend hangs: the workers are killed, the report says incomplete.
R2="$TMP/interrupted.json"
"$AUDIT" run --reps 3 --timeout 600 --noise none --out "$R2" --plugin "$PLUGINS/plugin_hang.so" \
    --backends bitonic,faulty-hang "$CAPTURE" >"$TMP/int.out" 2>"$TMP/int.err" &
PID=$!
sleep 8
kill -INT "$PID"
wait "$PID"
INT_EXIT=$?
if [ "$INT_EXIT" -eq 130 ]; then pass "SIGINT: exit 130"; else fail "SIGINT: exit $INT_EXIT, wanted 130"; sed 's/^/    /' "$TMP/int.err"; fi
if [ -f "$R2" ]; then
    json_check "$R2" 'j["complete"] is False and "SIGINT" in j["stop_reason"] and j["exit_code"] == 130' \
        "SIGINT: the report is written, complete false, stop_reason names SIGINT"
    json_check "$R2" 'len(j["records"]) == 1 and [b["status"] for b in j["records"][0]["backends"]] == ["ok", "skipped"]' \
        "SIGINT: the record in progress keeps bitonic's result; the hanging backend is skipped"
else
    fail "SIGINT: no report at $R2"
fi
expect_no_process_left "SIGINT"

finish
