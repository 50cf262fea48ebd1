#!/usr/bin/env bash
# The documents the tool writes on the shipped captures, pinned by digest (context, times and
# durations aside: tests/cli/normalize_document.py): run (no GPU), census, diff, extract's
# reproducer as a diff, a baseline, gate verdicts over GPU-like reports, and merge. A change
# that alters one of them on purpose updates tests/cli/documents.sha256 in the same commit
# (DOCUMENTS_UPDATE=1 rewrites it) and says why in NEWS when a user can see it.
. "$(dirname "$0")/lib.sh"
export TMP
PIN=tests/cli/documents.sha256
D="$TMP/docs"
mkdir -p "$D"
C=captures

"$AUDIT" run $C/*.bin --reps 3 --out "$D/run.json" --baseline-out "$D/baseline.json" \
    >"$TMP/run.log" 2>&1
"$AUDIT" run $C/*.bin --reps 3 --shard 0/2 --out "$D/shard1.json" >/dev/null 2>&1
"$AUDIT" run $C/*.bin --reps 3 --shard 1/2 --out "$D/shard2.json" >/dev/null 2>&1
"$AUDIT" merge -o "$D/merged.json" "$D/shard1.json" "$D/shard2.json" >/dev/null 2>&1
"$AUDIT" census $C/*.bin -o "$D/census.json" >/dev/null 2>&1
"$AUDIT" census --k 64,0 $C/edge.bin -o "$D/census_edge.json" >/dev/null 2>&1
"$AUDIT" diff --format json -o "$D/diff_same.json" $C/relu.bin $C/relu.bin >/dev/null 2>&1
"$AUDIT" extract $C/plateau.bin --records 0 --rows 0-1 -o "$TMP/small.bin" >/dev/null 2>&1
"$AUDIT" diff --format json -o "$D/diff_mismatch.json" $C/plateau.bin "$TMP/small.bin" \
    >/dev/null 2>&1
"$AUDIT" diff --format json -o "$D/diff_other.json" $C/tie.bin $C/plateau.bin >/dev/null 2>&1
gpu_like_gates "$D/run.json" "$TMP" "$D" clean sort-flaps radix-wrong filtered-unsupported \
    drop-record-2
"$AUDIT" gate --baseline "$D/baseline.json" --format none --out "$D/gate_cpu.json" \
    "$D/run.json" >/dev/null 2>&1

names=(run.json baseline.json merged.json census.json census_edge.json diff_same.json
       diff_mismatch.json diff_other.json gate_clean.json gate_sort-flaps.json
       gate_radix-wrong.json gate_filtered-unsupported.json gate_drop-record-2.json gate_cpu.json)
for name in "${names[@]}"; do
    if [ -s "$D/$name" ]; then pass "$name written"; else fail "$name was not written"; fi
done
mkdir -p "$TMP/normalized"
(cd "$D" && python3 "$OLDPWD/tests/cli/normalize_document.py" --dump "$TMP/normalized" \
    "${names[@]}") >"$TMP/digests" 2>"$TMP/pyerr" || { fail "normalize"; cat "$TMP/pyerr"; }
if [ "${DOCUMENTS_UPDATE:-0}" = 1 ]; then
    cp "$TMP/digests" "$PIN"
    pass "$PIN rewritten"
fi
while read -r digest name; do
    want=$(awk -v n="$name" '$2 == n {print $1}' "$PIN")
    if [ "$digest" = "$want" ]; then pass "$name: content as pinned"; else
        fail "$name: content differs from the pinned digest (normalized copy kept in" \
             "${DOCUMENTS_KEEP:-\$DOCUMENTS_KEEP}; DOCUMENTS_UPDATE=1 after a deliberate change)"
    fi
done <"$TMP/digests"
[ -n "${DOCUMENTS_KEEP:-}" ] && mkdir -p "$DOCUMENTS_KEEP" && cp "$TMP/normalized"/* "$DOCUMENTS_KEEP"/
finish
