#!/usr/bin/env bash
# Runs a command under compute-sanitizer, every process it starts included, and judges the tool's
# own per-process summaries instead of exit codes: `run` and test_gpu_plugins do their CUDA work
# in forked children whose exit status the sanitizer's --error-exitcode cannot reach the top with.
# Used by scripts/device-check.sh (step sanitize-plugins) on the GPU machine.
# Usage: scripts/sanitizer-run.sh [--expect REGEX] TOOL COMMAND...
#   Without --expect: exit 0 when at least one "ERROR SUMMARY" was printed, every one of them
#   says 0 errors and the command exited 0; 9 when a process reported errors; 8 when no summary
#   appeared at all (the tool did not run); otherwise the command's exit status.
#   --expect REGEX, a negative control: exit 0 when a process reported errors and REGEX occurs in
#   the output (the tool does see what it should), 9 otherwise; the command's own exit status is
#   not judged (the fault is on purpose).
# The tool's output and the command's go to stdout; the last line is the verdict.
set -u
expect=
if [ "${1:-}" = --expect ]; then
    expect=${2:?--expect needs a REGEX}
    shift 2
fi
if [ $# -lt 2 ]; then
    echo "usage: scripts/sanitizer-run.sh [--expect REGEX] TOOL COMMAND..." >&2
    exit 2
fi
tool=$1
shift
log=$(mktemp "${TMPDIR:-/tmp}/sanitizer-run.XXXXXX")
trap 'rm -f "$log"' EXIT

compute-sanitizer --tool "$tool" --target-processes all --error-exitcode 9 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
summaries=$(grep -c 'ERROR SUMMARY:' "$log")
with_errors=$(grep -cE 'ERROR SUMMARY: [1-9][0-9]* error' "$log")
verdict="$tool: $summaries ERROR SUMMARY line(s), $with_errors with errors, command exit $rc"

if [ -n "$expect" ]; then
    if [ "$with_errors" -gt 0 ] && grep -qE -- "$expect" "$log"; then
        echo "sanitizer-run: $verdict; expected errors seen (/$expect/): ok"
        exit 0
    fi
    echo "sanitizer-run: $verdict; expected errors matching /$expect/ NOT seen: FAIL"
    exit 9
fi
if [ "$summaries" -eq 0 ]; then
    echo "sanitizer-run: $verdict; no ERROR SUMMARY at all: FAIL"
    exit 8
fi
if [ "$with_errors" -gt 0 ]; then
    echo "sanitizer-run: $verdict: FAIL"
    exit 9
fi
if [ "$rc" -ne 0 ]; then
    echo "sanitizer-run: $verdict: FAIL (the command failed)"
    exit "$rc"
fi
echo "sanitizer-run: $verdict: ok"
