# Shared helpers for the command-line tests. Source it; $1 of the test is the binary.
# DSATOPK_TEST_KEEP=DIR: a JSON document whose json_check failed is copied into DIR.
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

# gpu_like_gates REPORT GPU_DIR GATE_DIR MUTATION...: GPU-like copies of REPORT
# (tests/cli/gpu_like.py) as GPU_DIR/gpu_MUTATION.json, each gated against the clean copy (the
# first MUTATION is clean) into GATE_DIR/gate_MUTATION.json.
gpu_like_gates() {
    local report=$1 gpu_dir=$2 gate_dir=$3 mutation
    shift 3
    for mutation in "$@"; do
        python3 tests/cli/gpu_like.py "$report" "$gpu_dir/gpu_$mutation.json" "$mutation"
        "$AUDIT" gate --baseline "$gpu_dir/gpu_clean.json" --format none \
            --out "$gate_dir/gate_$mutation.json" "$gpu_dir/gpu_$mutation.json" >/dev/null 2>&1
    done
}

# json_check FILE PYTHON-EXPRESSION DESCRIPTION: the expression sees the parsed file as `j`.
# A copy of FILE is kept for finish(), which checks every document looked at against its schema.
json_check() {
    if python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>"$TMP/pyerr"; then
        pass "$3"
    else
        fail "$3: ($2) is false for $1"; sed 's/^/    /' "$TMP/pyerr" | tail -5
        # On the GPU machine the temporary folder goes away: keep what failed where asked.
        [ -n "${DSATOPK_TEST_KEEP:-}" ] && mkdir -p "$DSATOPK_TEST_KEEP" &&
            cp "$1" "$DSATOPK_TEST_KEEP/$(basename "$(dirname "$1")")-$(basename "$1")"
    fi
    mkdir -p "$TMP/checked-documents"
    CHECKED_DOCUMENTS=$((${CHECKED_DOCUMENTS:-0} + 1))
    cp "$1" "$TMP/checked-documents/$CHECKED_DOCUMENTS-$(basename "$1")" 2>/dev/null
}

# Every document json_check looked at matches its schema in docs/schemas/ (tests/cli/
# validate_documents.py). Without python3-jsonschema this is left out: cli_schemas fails in CI
# where it is missing.
check_documents_against_schemas() {
    [ -d "$TMP/checked-documents" ] || return 0
    python3 tests/cli/validate_documents.py --documents-in "$TMP/checked-documents" \
        >"$TMP/schema-check" 2>&1
    case $? in
        0) pass "the documents json_check read match their schemas ($(tail -1 "$TMP/schema-check"))" ;;
        77) echo "# SKIP schema check of the documents: python3-jsonschema is not installed" ;;
        *) fail "a document json_check read does not match its schema (docs/schemas/)"
           grep -v '^ok ' "$TMP/schema-check" | sed 's/^/    /' | head -20 ;;
    esac
}

finish() {
    check_documents_against_schemas
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
