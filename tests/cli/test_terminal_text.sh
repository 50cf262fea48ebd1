#!/usr/bin/env bash
# File names and JSON strings reach the terminal escaped (src/common/terminal_text.h): a name
# with a newline cannot forge a table line, one with an escape sequence cannot drive the
# terminal. Every command that prints a path or a string from a report, in its table and in its
# messages, is run on such names; no raw control byte (other than newline and tab between
# lines and columns) may reach stdout or stderr, and the names still appear, escaped.
. "$(dirname "$0")/lib.sh"

LIMIT=60
T() { timeout "$LIMIT" "$@"; }
D="$TMP/dir"
mkdir "$D"
# A name with a newline that would start a forged table line, and one with ESC and C1 CSI.
NL="$D/evil
  forged.bin:0   8 x 64  passed everything.bin"
ESC="$D/"$'\e[2J\e[31mred\xc2\x9b2Jc1'".bin"
cp /dev/null "$TMP/x"

# check_streams WHAT: stdout and stderr of the last command carry no control byte but \n and \t,
# no C1 control and no forged line.
check_streams() {
    if LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$TMP/out" "$TMP/err"; then
        fail "$1: a raw control character reached the terminal"
        LC_ALL=C grep -naP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$TMP/out" "$TMP/err" | cat -A | head -3
    elif grep -q '^  forged\.bin' "$TMP/out" "$TMP/err"; then
        fail "$1: a file name forged a line"
    else
        pass "$1: no raw control character, no forged line"
    fi
}

# run_check WHAT EXPECTED_EXIT -- command...
run_check() {
    local what=$1 want=$2
    shift 3
    T "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then pass "$what (exit $got)"; else
        fail "$what: exit $got, wanted $want"; head -5 "$TMP/err" | cat -A | sed 's/^/    /'; fi
    check_streams "$what"
}

# Without a GPU no backend ran: the policy lets a report that audited nothing pass (docs/GATE.md).
echo '{"allow_nothing_audited": true}' >"$TMP/policy.json"
for NAME in "$NL" "$ESC"; do
    label=$([ "$NAME" = "$NL" ] && echo newline || echo escape)
    run_check "$label: synth" 0 -- "$AUDIT" synth -f random -b 2 -L 64 -k 4 -o "$NAME"
    run_check "$label: inspect" 0 -- "$AUDIT" inspect "$NAME"
    expect_grep 'evil\\n  forged|\\x1b\[2J\\x1b\[31mred\\xc2\\x9b2Jc1' "$TMP/out" "$label: inspect names the file, escaped"
    run_check "$label: census" 0 -- "$AUDIT" census --format table "$NAME"
    run_check "$label: run" 0 -- "$AUDIT" run --reps 1 --out "$TMP/report-$label.json" "$NAME"
    run_check "$label: diff" 0 -- "$AUDIT" diff "$NAME" "$NAME"
    run_check "$label: extract" 0 -- "$AUDIT" extract --records 0 -o "$NAME.x" "$NAME"
    run_check "$label: gate" 0 -- "$AUDIT" gate --policy "$TMP/policy.json" --baseline "$TMP/report-$label.json" --out "$TMP/g.json" "$TMP/report-$label.json"
    run_check "$label: a missing file named so" 3 -- "$AUDIT" inspect --verify "$NAME.missing"
    run_check "$label: a truncated capture named so" 3 -- \
        bash -c 'head -c 100 "$1" >"$1.cut" && "$2" inspect --verify "$1.cut"' _ "$NAME" "$AUDIT"
    run_check "$label: an unknown option" 2 -- "$AUDIT" inspect "--$(basename "$NAME")"
    run_check "$label: report --gate of a missing verdict" 3 -- \
        "$AUDIT" report --gate "$NAME.json" -o "$TMP/p.html" "$TMP/report-$label.json"
done

# JSON strings: a report whose files and verdict reasons hold control characters, gated.
python3 - "$TMP/report-newline.json" "$TMP/hostile.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["records"]:
    r["file"] = "a\n  FORGED\x1b[1m.bin"
    for b in r["backends"]:
        b["verdict"] = "fail"
        b["verdict_reasons"] = ["reason\x1b]0;title\x07\n  forged"]
json.dump(j, open(sys.argv[2], "w"))
EOF
run_check "gate on a report with control characters in its strings" 1 -- \
    "$AUDIT" gate --baseline "$TMP/report-newline.json" --out "$TMP/g2.json" "$TMP/hostile.json"
run_check "extract --from-report naming such a file" 3 -- \
    "$AUDIT" extract --from-report "$TMP/hostile.json" -o "$TMP/e.bin" "$NL"
finish
