#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/device-bundle.sh was carried:
# the GPU suite, compute-sanitizer (memcheck, racecheck, initcheck), `run` on the seed-harness
# captures and on the shipped ones, and the benchmark with torch.topk beside it. Everything that
# matters lands in $OUT (at most 8 files come back): logs.txt, seed-report.json,
# shipped-report.json, bench.json, torch-bench.json.
# Usage: scripts/device-check.sh [STEP...]
#   steps: suite split sanitize run isolation devices bench racecheck (default: all but split
#   and racecheck, which are slow or only needed when bitonic's split path changed)
set -u
OUT=${OUT:-/tmp/dsatopk-device-out}
mkdir -p "$OUT"
. device-bundle/env.sh
LOG="$OUT/logs.txt"
steps=${*:-suite sanitize run isolation devices bench}
BENCH_SHAPES=${BENCH_SHAPES:-16x8192:512,4x32768:2048,16x65536:2048,16x131072:2048,64x32768:2048,64x131072:2048}

# step NAME SECONDS COMMAND...: runs with a time limit, appends its output to logs.txt and prints
# one summary line (the reply of the device tool keeps only the end of the output).
step() {
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    echo "===== $name: $*" >>"$LOG"
    timeout "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    printf '%-22s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - start))" \
        "$(grep -v '^\s*$' "$LOG" | tail -1 | cut -c1-120)"
}

nvidia-smi -L >>"$LOG" 2>&1
dsatopk-audit --version >>"$LOG" 2>&1
for s in $steps; do
    case $s in
    suite)
        step devices 60 dsatopk-audit devices
        step devices-gb10 60 dsatopk-audit --emulate-smem-per-sm 102400 devices
        step gpu-suite 300 test_gpu_backends
        step gpu-run 300 tests/gpu/test_gpu_run.sh device-bundle/bin/dsatopk-audit
        ;;
    split)
        # bitonic's multi-CTA path on every shape, then the one-CTA path alone.
        step gpu-suite-split 300 env DSATOPK_BITONIC_SPLIT=always test_gpu_backends --backend bitonic
        step gpu-suite-nosplit 300 env DSATOPK_BITONIC_SPLIT=never test_gpu_backends --backend bitonic
        step memcheck-split 150 env DSATOPK_BITONIC_SPLIT=always compute-sanitizer --tool memcheck \
            --error-exitcode 9 test_gpu_backends --backend bitonic --quick
        step initcheck-split 150 env DSATOPK_BITONIC_SPLIT=always compute-sanitizer --tool initcheck \
            --error-exitcode 9 test_gpu_backends --backend bitonic --quick --k 100
        ;;
    sanitize)
        step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 test_gpu_backends --quick
        step initcheck 120 compute-sanitizer --tool initcheck --error-exitcode 9 test_gpu_backends --quick --k 100
        ;;
    racecheck)
        # Without the negative control (--backend), which is too slow under racecheck.
        for backend in bitonic filtered-det sort; do
            step "racecheck-$backend" 100 compute-sanitizer --tool racecheck --error-exitcode 9 \
                test_gpu_backends --backend "$backend" --quick --k 100
        done
        ;;
    isolation)
        step gpu-plugins 200 test_gpu_plugins device-bundle/plugins
        step gpu-isolation 240 tests/gpu/test_gpu_isolation.sh device-bundle/bin/dsatopk-audit \
            device-bundle/plugins
        ;;
    devices)
        step run-devices 200 dsatopk-audit run --devices 0,0 --reps 5 --out "$OUT/devices-report.json" \
            --baseline-out /tmp/baseline.json captures
        step gate-devices 60 dsatopk-audit gate --baseline /tmp/baseline.json \
            --out /tmp/gate.json "$OUT/devices-report.json"
        ;;
    run)
        step seed-captures 120 scripts/make-seed-captures.sh /tmp/seed device-bundle/bin/dsatopk-audit
        step run-seed 300 dsatopk-audit run --reps 25 --out "$OUT/seed-report.json" /tmp/seed
        step run-shipped 300 dsatopk-audit run --reps 10 --graph --batch-invariance \
            --out "$OUT/shipped-report.json" captures
        ;;
    bench)
        step bench 400 dsatopk-audit bench --shapes "$BENCH_SHAPES" --out "$OUT/bench.json"
        step torch-bench 200 python3 scripts/bench_torch.py --shapes "$BENCH_SHAPES" \
            --out "$OUT/torch-bench.json"
        ;;
    *) echo "device-check.sh: unknown step '$s'" >&2; exit 2 ;;
    esac
done
