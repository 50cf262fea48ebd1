#!/usr/bin/env bash
# Usage conventions of every command, as getopt tools have them: -h/--help and --version print
# and exit 0 only when the whole command line parses; an unknown option is exit 2 wherever it
# stands, before or after --help; help COMMAND and --help COMMAND print the command's usage.
. "$(dirname "$0")/lib.sh"

expect_exit 0 "--version" -- "$AUDIT" --version
expect_grep '^dsatopk-audit [0-9]' "$TMP/out" "--version prints the version"
expect_exit 0 "--help" -- "$AUDIT" --help
expect_grep '^commands:' "$TMP/out" "--help lists the commands"
for args in "--version --bogus" "--bogus --version" "--help -Z" "-Z --help" "--version -Z" \
            "--help --bogus" "--version run" "--version --help extra" "--help run extra" \
            "help run extra" "help nope" "--help nope"; do
    # shellcheck disable=SC2086
    expect_exit 2 "dsatopk-audit $args" -- "$AUDIT" $args
done
expect_grep "no command 'nope'" "$TMP/err" "an unknown command is named"
expect_exit 0 "--help run is help run" -- "$AUDIT" --help run
cp "$TMP/out" "$TMP/help-run.txt"
expect_exit 0 "help run" -- "$AUDIT" help run
if cmp -s "$TMP/out" "$TMP/help-run.txt"; then pass "--help run and help run print the same"; else
    fail "--help run and help run differ"; fi

COMMANDS=$("$AUDIT" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }')
[ "$(echo "$COMMANDS" | wc -w)" -ge 12 ] && pass "the command list has every command" ||
    fail "the command list: $COMMANDS"
for command in $COMMANDS; do
    expect_exit 0 "$command --help" -- "$AUDIT" "$command" --help
    expect_grep "^dsatopk-audit $command: " "$TMP/out" "$command --help prints its usage"
    expect_exit 2 "$command --help -Z" -- "$AUDIT" "$command" --help -Z
    expect_exit 2 "$command -Z --help" -- "$AUDIT" "$command" -Z --help
    expect_exit 2 "$command --help --bogus" -- "$AUDIT" "$command" --help --bogus
    if [ -s "$TMP/out" ]; then fail "$command --help --bogus printed its usage on stdout"; else
        pass "$command --help --bogus prints no usage"; fi
done

# --format: one parser and one message for every command that prints a table or writes JSON.
for command in census inspect diff devices compare; do
    expect_exit 2 "$command --format xml" -- "$AUDIT" "$command" --format xml captures/edge.bin captures/edge.bin
    expect_grep "^dsatopk-audit $command: --format: 'xml' is not table or json" "$TMP/err" \
        "$command names the --format value it refuses"
done
finish
