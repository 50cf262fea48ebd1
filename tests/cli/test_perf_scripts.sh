#!/usr/bin/env bash
# The measurement scripts on the standing bench document (docs/bench/h200.json):
# scripts/perf-targets.py's verdicts (targets met and not, exit status, bad input) and
# scripts/bench_json.py merge (results of every part, an existing output left alone); then
# scripts/sass-lines.py on a small listing and profile (counts per line, weights, another build).
. "$(dirname "$0")/lib.sh"
H200=docs/bench/h200.json
TARGETS=(python3 scripts/perf-targets.py)

expect_exit 1 "perf-targets: a target is not met on the H200 table" -- "${TARGETS[@]}" "$H200"
cp "$TMP/out" "$TMP/h200-targets.txt"
expect_grep '^22 shapes x families \(random, relu\)' "$TMP/h200-targets.txt" "perf-targets: counts the shapes"
expect_grep '^- torch .*: met, 22 of 22 shapes; worst 5\.15 \(random 64 x 262144 k 2048\)$' \
    "$TMP/h200-targets.txt" "perf-targets: torch.topk target met, with its worst shape"
expect_grep '^- floor .*: NOT met, 2 of 12 shapes; worst 3\.32 \(random 64 x 262144 k 2048\)' \
    "$TMP/h200-targets.txt" "perf-targets: floor target counts only floors of 4 us or more"
expect_grep '^- flashinfer .*: NOT met, 8 of 22 shapes; worst 1\.23 \(relu 16 x 8192 k 512\)' \
    "$TMP/h200-targets.txt" "perf-targets: the fastest fi-* mode per shape"
expect_grep '^- small .*: NOT met, 0 of 2 shapes; worst 13\.35 ' "$TMP/h200-targets.txt" \
    "perf-targets: the small-batch target"
expect_grep '^\| 1024 \| 2\.67 \(0 / 2\) \| 1\.73 \(0 / 2\) \| 5\.85 \(2 / 2\) \|$' \
    "$TMP/h200-targets.txt" "perf-targets: worst per row count"
expect_grep '^\| 262144 \| 3\.32 \(0 / 2\) ' "$TMP/h200-targets.txt" "perf-targets: worst per row length"

# bitonic ten times faster: every target met, exit 0.
python3 - "$H200" "$TMP/faster.json" <<'PY'
import json, sys
document = json.load(open(sys.argv[1]))
for item in document["results"]:
    if item["backend"] == "bitonic" and item["status"] == "ok":
        item["median_us"] /= 10
json.dump(document, open(sys.argv[2], "w"))
PY
expect_exit 0 "perf-targets: every target met" -- "${TARGETS[@]}" "$TMP/faster.json"
if grep -q "NOT met" "$TMP/out"; then fail "perf-targets: 'NOT met' printed with every target met"
else pass "perf-targets: no target printed as not met"; fi

echo '{"results": [' >"$TMP/truncated.json"
expect_exit 2 "perf-targets: a truncated document" -- "${TARGETS[@]}" "$TMP/truncated.json"
expect_grep "perf-targets: .*bench --out" "$TMP/err" "perf-targets: says what it expected"
expect_exit 2 "perf-targets: a missing file" -- "${TARGETS[@]}" "$TMP/missing.json"

expect_exit 0 "bench_json merge: two parts" -- python3 scripts/bench_json.py merge "$TMP/merged.json" \
    "$H200" "$TMP/faster.json"
python3 -c 'import json, sys
merged, a, b = (json.load(open(p)) for p in sys.argv[1:])
assert merged["results"] == a["results"] + b["results"], "results not concatenated in order"
assert merged["context"] == a["context"] and merged["schema"] == a["schema"]' \
    "$TMP/merged.json" "$H200" "$TMP/faster.json" &&
    pass "bench_json merge: the first context, every result in order" ||
    fail "bench_json merge: merged document"
cp "$TMP/merged.json" "$TMP/merged.before"
expect_exit 1 "bench_json merge: refuses an existing output" -- python3 scripts/bench_json.py merge \
    "$TMP/merged.json" "$H200"
cmp -s "$TMP/merged.json" "$TMP/merged.before" && pass "bench_json merge: existing output intact" ||
    fail "bench_json merge: existing output changed"

# sass-lines.py: a listing of two kernels (nvdisasm -g's shape) and ncu's SASS source page.
cat >"$TMP/k.sass" <<'SASS'
	.section	.text._Z1kv,"ax",@progbits
.text._Z1kv:
	//## File "/src/kernels/bitonic/cluster.cuh", line 59
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/               @P0 BRA `(.L_x_1) ;
	//## File "/src/kernels/bitonic/output.cuh", line 34
        /*0020*/                   IMAD R2, R3, R4, RZ ;
	.section	.text._Z5otherv,"ax",@progbits
.text._Z5otherv:
        /*0000*/                   EXIT ;
SASS
cat >"$TMP/k.csv" <<'CSV'
"Kernel Name","void k()",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"
"0x7f0000001000","      LDC R1, c[0x0][0x28]","10","100"
"0x7f0000001010","  @P0 BRA `(.L_x_1)","0","300"
"0x7f0000001020","      IMAD R2, R3, R4, RZ","30","600"
CSV
LINES=(python3 scripts/sass-lines.py "$TMP/k.sass" _Z1kv)
expect_exit 0 "sass-lines: static counts" -- "${LINES[@]}"
expect_grep '^3 instructions in _Z1kv$' "$TMP/out" "sass-lines: the kernel's instructions alone"
expect_grep '^ +2  66\.7%  bitonic/cluster\.cuh:59 ' "$TMP/out" "sass-lines: instructions per line"
expect_exit 0 "sass-lines: weighted by a profile" -- "${LINES[@]}" --profile "$TMP/k.csv"
expect_grep '^1000 warp instructions executed in _Z1kv$' "$TMP/out" "sass-lines: executed in all"
expect_grep '^ +600  60\.0%  75\.0%  bitonic/output\.cuh:34 ' "$TMP/out" \
    "sass-lines: executed and stall share per line"
sed 's/IMAD R2/IADD3 R2/' "$TMP/k.csv" >"$TMP/other.csv"
expect_exit 2 "sass-lines: a profile of another build" -- "${LINES[@]}" --profile "$TMP/other.csv"
expect_grep "offset 0x20 holds 'IADD3 .*another build" "$TMP/err" "sass-lines: names the offset"
expect_exit 2 "sass-lines: a kernel not in the listing" -- python3 scripts/sass-lines.py \
    "$TMP/k.sass" _Z4nonev
tail -n +3 "$TMP/k.csv" >"$TMP/headless.csv"
expect_exit 2 "sass-lines: a CSV without ncu's header" -- "${LINES[@]}" --profile "$TMP/headless.csv"
expect_grep "no 'Address','Source' header" "$TMP/err" "sass-lines: says which header it wants"

finish
