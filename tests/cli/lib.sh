# Shared helpers for the command-line tests. Source it; $1 of the test is the binary.
set -u
AUDIT=${1:?usage: test_NAME.sh PATH/TO/dsatopk-audit}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dsatopk-cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
FAILURES=0
PASSES=0

pass() { PASSES=$((PASSES + 1)); echo "ok - $*"; }
fail() { FAILURES=$((FAILURES + 1)); echo "not ok - $*"; }

# expect_exit CODE DESCRIPTION -- command...   (stdout/stderr kept in $TMP/out, $TMP/err)
expect_exit() {
    local want=$1 what=$2
    shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then pass "$what (exit $got)"; else
        fail "$what: exit $got, wanted $want"; sed 's/^/    stderr: /' "$TMP/err" | head -20; fi
}

# expect_grep PATTERN FILE DESCRIPTION
expect_grep() {
    if grep -qE -- "$1" "$2"; then pass "$3"; else fail "$3: no /$1/ in $2"; head -20 "$2" | sed 's/^/    /'; fi
}

# json_check FILE PYTHON-EXPRESSION DESCRIPTION: the expression sees the parsed file as `j`.
json_check() {
    if python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>"$TMP/pyerr"; then
        pass "$3"
    else
        fail "$3: ($2) is false for $1"; sed 's/^/    /' "$TMP/pyerr" | tail -5
    fi
}

finish() {
    echo "$PASSES passed, $FAILURES failed"
    [ "$FAILURES" -eq 0 ]
}

# need_python_with_numpy: sets PYTHON to a python3 that imports numpy (Debian's python3-numpy
# serves /usr/bin/python3, which may not be the first python3 on PATH) and puts tools/python on
# PYTHONPATH; fails the test when there is none.
need_python_with_numpy() {
    PYTHON=
    for candidate in ${PYTHON_WITH_NUMPY:-} python3 /usr/bin/python3; do
        if "$candidate" -c 'import numpy' 2>/dev/null; then PYTHON=$candidate; break; fi
    done
    if [ -z "$PYTHON" ]; then
        fail "no python3 with numpy found (install python3-numpy, or set PYTHON_WITH_NUMPY)"
        finish
        exit 1
    fi
    export PYTHONPATH="$PWD/tools/python${PYTHONPATH:+:$PYTHONPATH}"
}
