#!/usr/bin/env bash
# devices: the listing without a GPU (or with one, on the device machine), its JSON document, the
# decisions on an emulated 102400 B/SM device (GB10), and the exit codes for bad options.
. "$(dirname "$0")/lib.sh"

expect_exit 0 "devices lists without options" -- "$AUDIT" devices
cp "$TMP/out" "$TMP/table.txt"
if grep -q '^no CUDA device: ' "$TMP/table.txt"; then
    HAVE_GPU=0
    expect_grep '^no CUDA device: .+' "$TMP/table.txt" "the table names why there is no device"
    if grep -q '^device [0-9]' "$TMP/table.txt"; then fail "a device is listed although there is none"; else
        pass "no device is listed"; fi
    expect_grep 'give --emulate-smem-per-sm' "$TMP/table.txt" "the table says how to see decisions"
else
    HAVE_GPU=1
    expect_grep '^device 0: ' "$TMP/table.txt" "the table lists device 0"
    expect_grep 'compute capability +[0-9]+\.[0-9]+' "$TMP/table.txt" "device 0 has a compute capability"
fi
for backend in radix filtered filtered-det bitonic sort fi-auto fi-det fi-det-sorted fi-graph-safe; do
    expect_grep "^  $backend +(not_guaranteed|run_to_run|gpu_to_gpu) " "$TMP/table.txt" \
        "the table lists backend $backend with its level"
done
expect_grep '^  +limits: ' "$TMP/table.txt" "the table shows the backends' limits"

# JSON: schema, the backend table, and the device section that fits this machine.
expect_exit 0 "devices --format json" -- "$AUDIT" devices --format json
cp "$TMP/out" "$TMP/plain.json"
json_check "$TMP/plain.json" 'j["schema"] == "dsatopk-audit/devices" and j["schema_version"] == 3' \
    "JSON names its schema and version"
json_check "$TMP/plain.json" 'all(v is None or isinstance(v, str) for v in (j["cuda"]["driver_version"], j["cuda"]["runtime_version"])) and isinstance(j["cuda"]["runtime_version_number"], int)' \
    "the CUDA versions as the report writes them: text, and CUDA's number"
json_check "$TMP/plain.json" '"devices" in j["context"]["command_line"] and j["context"]["utc_time"].endswith("Z")' \
    "JSON opens with the context block"
json_check "$TMP/plain.json" \
    '[b["name"] for b in j["backends"]] == ["radix", "filtered", "filtered-det", "bitonic", "sort", "fi-auto", "fi-det", "fi-det-sorted", "fi-graph-safe"]' \
    "JSON lists the nine backends of the table in order"
json_check "$TMP/plain.json" \
    'all(b["level"] in ("not_guaranteed", "run_to_run", "gpu_to_gpu") and isinstance(b["limits"], str) for b in j["backends"])' \
    "every backend has a CCCL determinism level and limits"
json_check "$TMP/plain.json" \
    '[b["level"] for b in j["backends"] if b["name"] in ("bitonic", "sort")] == ["gpu_to_gpu"] * 2' \
    "bitonic and sort claim gpu_to_gpu"
json_check "$TMP/plain.json" \
    'all(b["exact_set"] and b["smallest_index_ties"] and b["canonical_order"] for b in j["backends"] if b["name"] in ("bitonic", "sort"))' \
    "bitonic and sort promise exact sets, smallest-index ties and canonical order"
json_check "$TMP/plain.json" 'j["query"]["k"] == [512, 1024, 2048, 4096] and j["query"]["length"] == 131072' \
    "the default query is k 512,1024,2048,4096 at length 131072"
if [ "$HAVE_GPU" -eq 0 ]; then
    json_check "$TMP/plain.json" \
        'j["cuda"]["device_count"] == 0 and len(j["cuda"]["no_device_reason"]) > 0 and j["devices"] == []' \
        "JSON without a GPU: zero devices, a reason, nothing to decide for"
else
    json_check "$TMP/plain.json" \
        'j["cuda"]["device_count"] == len(j["devices"]) > 0 and j["cuda"]["no_device_reason"] is None' \
        "JSON with a GPU: one entry per device"
    json_check "$TMP/plain.json" \
        'all(len(b["decisions"]) == 4 for d in j["devices"] for b in d["backends"])' \
        "every backend has a decision for every k on every device"
fi

# Emulated GB10 (102400 B per SM), as the global option and as the command's own option.
expect_exit 0 "global --emulate-smem-per-sm 102400" -- \
    "$AUDIT" --emulate-smem-per-sm 102400 devices --format json --k 512,1024,2048,4096,8192,16384
cp "$TMP/out" "$TMP/gb10.json"
expect_exit 0 "devices --emulate-smem-per-sm 102400" -- \
    "$AUDIT" devices --emulate-smem-per-sm 102400 --format json --k 512,1024,2048,4096,8192,16384
# The documents compared without their context (the command line differs).
without_context() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j.pop("context"); print(json.dumps(j))' "$1"; }
if cmp -s <(without_context "$TMP/gb10.json") <(without_context "$TMP/out"); then
    pass "the global and the command option give the same document"
else
    fail "the global and the command option give different documents"
fi
json_check "$TMP/gb10.json" \
    'len(j["devices"]) > 0 and all(d["smem_emulated"] and d["smem_per_sm_bytes"] == 102400 and d["smem_per_block_optin_bytes"] <= 102400 for d in j["devices"])' \
    "every listed device reports the emulated 102400 B per SM"
if [ "$HAVE_GPU" -eq 0 ]; then
    json_check "$TMP/gb10.json" \
        'len(j["devices"]) == 1 and j["devices"][0]["described"] and j["devices"][0]["ordinal"] is None and j["devices"][0]["reported_smem_per_sm_bytes"] == 233472' \
        "without a GPU the decisions are for one described H200-like device"
fi
cat >"$TMP/decisions.py" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
backend, want = sys.argv[2], sys.argv[3]
ks = [int(k) for k in sys.argv[4].split(",")]
status = 0
for device in j["devices"]:
    for b in device["backends"]:
        if b["name"] != backend:
            continue
        for d in b["decisions"]:
            if d["k"] not in ks:
                continue
            if want == "refused-unless-unbuilt":
                if "not built yet" in d["reason"]:
                    print("skip: %s k=%d: %s" % (backend, d["k"], d["reason"]))
                    continue
                ok = not d["supported"] and len(d["reason"]) > 0
            elif want == "supported":
                ok = d["supported"]
            else:
                ok = not d["supported"] and want in d["reason"]
            if not ok:
                print("%s k=%d: supported=%s reason=%r" % (backend, d["k"], d["supported"], d["reason"]))
                status = 1
sys.exit(status)
EOF
check_decisions() { # BACKEND WANT KS DESCRIPTION
    if python3 "$TMP/decisions.py" "$TMP/gb10.json" "$1" "$2" "$3" >"$TMP/decisions.log" 2>&1; then
        pass "$4"; sed 's/^/    /' "$TMP/decisions.log"
    else fail "$4"; sed 's/^/    /' "$TMP/decisions.log"; fi
}
check_decisions filtered refused-unless-unbuilt 512,1024,2048,4096,8192,16384 \
    "GB10: filtered is refused for every k, with a reason"
check_decisions filtered-det refused-unless-unbuilt 512,1024,2048,4096,8192,16384 \
    "GB10: filtered-det is refused for every k, with a reason"
check_decisions bitonic supported 512,1024,2048,4096,8192 "GB10: bitonic runs up to k = 8192"
check_decisions bitonic "exceeds 8192" 16384 "GB10: bitonic refuses k = 16384 and names its limit"
check_decisions sort supported 512,1024,2048,4096,8192,16384 "GB10: sort runs at every k"
# FlashInfer's own kernels read the device themselves: under emulation they refuse, saying so
# (or, in a build without the flashinfer headers, that they are not built).
if grep -q 'built from FlashInfer' "$TMP/table.txt"; then
    fi_reason="cannot be emulated: FlashInfer reads the device itself"
    pass "the table says the fi backends are built from FlashInfer's headers"
else
    fi_reason="not built: flashinfer headers not found (pip install flashinfer-python, or -Dflashinfer_include=...)"
    expect_grep "limits: .*not built: flashinfer headers not found" "$TMP/table.txt" \
        "the table says the fi backends are not built, and how to build them"
fi
for backend in fi-auto fi-det; do
    check_decisions "$backend" "$fi_reason" 512,1024,2048,4096,8192,16384 \
        "GB10: $backend is refused for every k: $fi_reason"
done

expect_exit 0 "table with emulation" -- "$AUDIT" devices --emulate-smem-per-sm 102400
cp "$TMP/out" "$TMP/gb10.txt"
expect_grep 'shared memory per SM +102400 B emulated' "$TMP/gb10.txt" "the table marks emulated shared memory"
expect_grep 'k=512 +(supported|NOT supported) ' "$TMP/gb10.txt" "the table shows a decision per k"
if [ "$HAVE_GPU" -eq 0 ]; then
    expect_grep '^described device: ' "$TMP/gb10.txt" "the table says the device is described"
    expect_grep 'not for a device that is present' "$TMP/gb10.txt" "the table says no device is present"
fi

# A tight device: too little shared memory for bitonic's sort buffer at k = 4096.
expect_exit 0 "devices with 16384 B emulated" -- "$AUDIT" devices --emulate-smem-per-sm 16384 --format json --k 4096
json_check "$TMP/out" \
    'all(not d["supported"] and "shared memory" in d["reason"] for dev in j["devices"] for b in dev["backends"] if b["name"] == "bitonic" for d in b["decisions"])' \
    "bitonic refuses k = 4096 on 16384 B, naming shared memory"

expect_exit 0 "devices --help" -- "$AUDIT" devices --help
expect_grep '^usage: dsatopk-audit devices' "$TMP/out" "--help prints the usage"

# Bad options: exit 2.
expect_exit 2 "--k 0" -- "$AUDIT" devices --k 0
expect_exit 2 "--k with a word" -- "$AUDIT" devices --k 512,abc
expect_exit 2 "--k empty" -- "$AUDIT" devices --k ""
expect_exit 2 "--k with an empty item" -- "$AUDIT" devices --k 512,,1024
expect_exit 2 "--k without a value" -- "$AUDIT" devices --k
expect_exit 2 "--length negative" -- "$AUDIT" devices --length -1
expect_exit 2 "--length past 2^31 - 1" -- "$AUDIT" devices --length 2147483648
expect_exit 2 "--rows 0" -- "$AUDIT" devices --rows 0
expect_exit 2 "--format xml" -- "$AUDIT" devices --format xml
expect_exit 2 "--emulate-smem-per-sm not a number" -- "$AUDIT" devices --emulate-smem-per-sm lots
expect_exit 2 "global --emulate-smem-per-sm not a number" -- "$AUDIT" --emulate-smem-per-sm lots devices
expect_exit 2 "unknown option" -- "$AUDIT" devices --bogus
expect_exit 2 "stray argument" -- "$AUDIT" devices extra
expect_grep "unexpected argument 'extra'" "$TMP/err" "the stray argument is named"

finish
