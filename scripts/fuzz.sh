#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -fsanitize=fuzzer,address,undefined) in build-fuzz and
# runs each for a bounded time or number of runs, then prints one line per harness: executions,
# seconds, executions per second, corpus size, crashes. Exit status 1 when any harness crashed
# (the inputs are kept under BUILD/fuzz-artifacts/HARNESS/); see docs/RELIABILITY.md.
#
#   scripts/fuzz.sh [-t SECONDS] [-r RUNS] [-b BUILD_DIR] [-o RESULTS.tsv] [HARNESS...]
#
#   -t SECONDS   time per harness (default 60)
#   -r RUNS      at most this many executions per harness (default: no limit)
#   -b DIR       build directory (default build-fuzz), configured here when missing
#   -o FILE      also append the results, tab-separated, to FILE
#   HARNESS      capture npy safetensors json_report json_strict options (default: all six)
#
# The corpus grows in BUILD/fuzz-corpus/HARNESS/ (the seeds of tests/fuzz/corpus/ and the
# inputs of tests/fuzz/regressions/ are read, never written). Environment: CC (default clang),
# FUZZ_EXTRA_ARGS (more libFuzzer flags), DSATOPK_FUZZ_TOLERATE (see tests/fuzz/README.md).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

seconds=60
runs=-1
build="build-fuzz"
results=
while getopts "t:r:b:o:h" option; do
    case "$option" in
    t) seconds=$OPTARG ;;
    r) runs=$OPTARG ;;
    b) build=$OPTARG ;;
    o) results=$OPTARG ;;
    *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(capture npy safetensors json_report json_strict options)

declare -A max_len=([capture]=16384 [npy]=8192 [safetensors]=8192 [json_report]=8192
                    [json_strict]=8192 [options]=2048)
for harness in "${harnesses[@]}"; do
    if [ -z "${max_len[$harness]:-}" ]; then
        echo "fuzz.sh: no harness '$harness' (capture npy safetensors json_report json_strict options)" >&2
        exit 2
    fi
done

if [ ! -f "$build/build.ninja" ]; then
    # -Dflashinfer=disabled: no harness reaches the kernels, and FlashInfer's translation unit
    # compiles for over a minute.
    CC=${CC:-clang} meson setup "$build" -Dfuzzing=true -Dbuildtype=debugoptimized \
        -Dflashinfer=disabled >"$build.setup.log" 2>&1 || { cat "$build.setup.log" >&2; exit 2; }
    rm -f "$build.setup.log"
fi
meson configure "$build" -Dfuzzing=true >/dev/null || exit 2
targets=()
for harness in "${harnesses[@]}"; do targets+=("tests/fuzz/fuzz_$harness"); done
ninja -C "$build" -j "${FUZZ_BUILD_JOBS:-2}" "${targets[@]}" >/dev/null || {
    ninja -C "$build" -j 1 "${targets[@]}" 2>&1 | tail -30 >&2
    exit 2
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
printf '%-12s %12s %8s %10s %8s  %s\n' harness executions seconds exec/s corpus crashes
for harness in "${harnesses[@]}"; do
    corpus="$build/fuzz-corpus/$harness"
    artifacts="$build/fuzz-artifacts/$harness"
    log="$build/fuzz-logs/$harness.log"
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    inputs=("$corpus" "tests/fuzz/corpus/fuzz_$harness")
    regressions="tests/fuzz/regressions/fuzz_$harness"
    [ -d "$regressions" ] && inputs+=("$regressions")
    before=$(find "$artifacts" -type f | wc -l)
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$build/tests/fuzz/fuzz_$harness" -max_total_time="$seconds" -runs="$runs" \
        -max_len="${max_len[$harness]}" -timeout=20 -rss_limit_mb=4096 -close_fd_mask=3 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" ${FUZZ_EXTRA_ARGS:-} \
        "${inputs[@]}" >"$log" 2>&1
    code=$?
    elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    executions=${executions:-0}
    corpus_size=$(find "$corpus" -type f | wc -l)
    after=$(find "$artifacts" -type f | wc -l)
    crashes=$((after - before))
    if [ "$code" -ne 0 ] && [ "$crashes" -eq 0 ]; then
        crashes=1 # it died without leaving an input (setup failure): count it, show the log
        tail -20 "$log" >&2
    fi
    rate=$(awk -v n="$executions" -v t="$elapsed" 'BEGIN { printf "%d", n / (t + 0.001) }')
    note=$crashes
    if [ "$crashes" -gt 0 ]; then
        status=1
        note="$crashes (see $artifacts/, $log)"
    fi
    printf '%-12s %12s %8.1f %10s %8s  %s\n' "$harness" "$executions" "$elapsed" "$rate" \
        "$corpus_size" "$note"
    if [ -n "$results" ]; then
        printf '%s\t%s\t%s\t%.1f\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$harness" \
            "$executions" "$elapsed" "$corpus_size" "$crashes" "$(uname -m) $(nproc) cores" \
            >>"$results"
    fi
done
exit $status
