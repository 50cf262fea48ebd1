#!/usr/bin/env bash
# Every option a command's --help prints is documented: in the command's row of README.md's
# command table or in the doc file that row names (an option given as "-o, --output" counts as
# documented by either spelling). A new option without docs fails here.
. "$(dirname "$0")/lib.sh"

# The rows of README.md's "## Commands" table (the section up to the next heading).
table=$(awk '/^## /{inside = ($0 == "## Commands")} inside && /^\| `/' README.md)
commands=$(grep -o '^| `[a-z-]*` |' <<<"$table" | tr -d '|` ')
"$AUDIT" --help | awk '/^commands:/{inside = 1; next} inside && NF == 0 {exit} inside {print $1}' |
    sort >"$TMP/binary-commands"
sort <<<"$commands" >"$TMP/readme-commands"
if [ -s "$TMP/binary-commands" ] && cmp -s "$TMP/binary-commands" "$TMP/readme-commands"; then
    pass "README.md's command table lists exactly the commands of --help"
else
    fail "README.md's command table and --help list different commands"
    diff "$TMP/binary-commands" "$TMP/readme-commands" | sed 's/^/    /'
fi
for command in $commands; do
    row=$(grep "^| \`$command\` |" <<<"$table")
    doc=$(awk -F'|' '{gsub(/ /, "", $(NF - 1)); print $(NF - 1)}' <<<"$row")
    if [ ! -f "$doc" ]; then
        fail "$command: README.md's row names '$doc', which is not a file"
        continue
    fi
    if ! "$AUDIT" "$command" --help >"$TMP/help" 2>&1; then
        fail "$command --help failed"
        continue
    fi
    missing=""
    for option in $(grep -o -- '--[a-z][a-z0-9-]*' "$TMP/help" | sort -u); do
        [ "$option" = --help ] && continue
        grep -qF -- "$option" <<<"$row" && continue
        grep -qF -- "$option" "$doc" && continue
        short=$(grep -F -- "$option" "$TMP/help" | grep -oE -- '(^|[ ,])-[a-zA-Z]\b' | head -1 |
            tr -d ' ,')
        [ -n "$short" ] && grep -qE -- "(^|[^a-zA-Z0-9-])$short([^a-zA-Z0-9-]|\$)" "$doc" && continue
        missing="$missing $option"
    done
    if [ -z "$missing" ]; then
        pass "$command: every option of its --help is in README.md or $doc"
    else
        fail "$command: not in README.md's row nor $doc:$missing"
    fi
done
finish
