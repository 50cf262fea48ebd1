#!/usr/bin/env bash
# GPU suite: `run` survives faulty backends (docs/RELIABILITY.md "Isolation"); exit 77 = skipped
# without a CUDA device. Arguments: the binary, then the build directory of tests/plugins.
# One run with the four faulty plugins and bitonic on a small capture with a short --timeout:
#   faulty-hang     status hang (killed by the watchdog), verdict fail
#   faulty-oob      status cuda_error with the CUDA message (illegal address), verdict fail
#   faulty-wrong    status ok, wrong_set violations, verdict fail
#   faulty-arrival  status ok, tie-rule or order violations (arrival order), verdict fail
#   bitonic         still ok and pass on every record, after each fault
# and the run exits 1 with a complete report and no process left behind. Then a run stopped by
# SIGINT while a backend hangs exits 130 with a report marked incomplete.
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
for name in plugin_hang plugin_oob plugin_wrong plugin_arrival; do
    if [ ! -f "$PLUGINS/$name.so" ]; then
        fail "$PLUGINS/$name.so is not built"
        finish
        exit 1
    fi
done

# Two records with boundary ties (arrival order shows there), small enough to replay fast.
CAPTURE="$TMP/small.bin"
"$AUDIT" synth -f tie -b 8 -L 4096 -k 64 --ties 16 -o "$CAPTURE" >/dev/null &&
    "$AUDIT" synth -f tie -b 8 -L 4096 -k 64 --ties 16 --seed 1 -a -o "$CAPTURE" >/dev/null ||
    { fail "synth could not make the capture"; finish; exit 1; }

# No worker of an earlier test is still around (the binary's children are what we look for).
children_of_audit() { pgrep -f -- "$AUDIT run" | grep -vx "$$" || true; }

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
    # of NAME: the entries of backend NAME in every record, as a Python expression.
    of() { echo "[b for r in j['records'] for b in r['backends'] if b['name'] == '$1']"; }
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
sleep 1
LEFT=$(children_of_audit)
if [ -z "$LEFT" ]; then pass "no process of the run is left"; else
    fail "processes left behind: $LEFT"; ps -o pid,ppid,stat,cmd -p $LEFT; fi

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
sleep 1
LEFT=$(children_of_audit)
if [ -z "$LEFT" ]; then pass "SIGINT: no process of the run is left"; else
    fail "SIGINT: processes left behind: $LEFT"; ps -o pid,ppid,stat,cmd -p $LEFT; fi

finish
