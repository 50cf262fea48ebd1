#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/device-bundle.sh was carried:
# the GPU suite, compute-sanitizer (memcheck, racecheck, initcheck), `run` on the seed-harness
# captures and on the shipped ones, and the benchmark with torch.topk beside it. Everything that
# matters lands in $OUT (at most 8 files come back): logs.txt, seed-report.json,
# shipped-report.json, bench.json, torch-bench.json.
# Usage: scripts/device-check.sh [STEP...]
#   steps: suite split cluster kernel sanitize sanitize-run sanitize-plugins run isolation
#   devices devices-parallel devices-all handover breakdown ab ab-suite bench bench-ab phases
#   profile bench-paths racecheck racecheck-split hash-share flashinfer fidelity peers grid
#   (default: suite sanitize run isolation devices bench; the others are slow or only needed
#   when what they test changed)
set -u
OUT=${OUT:-/tmp/dsatopk-device-out}
mkdir -p "$OUT"
. device-bundle/env.sh
LOG="$OUT/logs.txt"
steps=${*:-suite sanitize run isolation devices bench}
# Empty: the bench command's default grid (B in {1,4,16,64} x L in {8192..131072} x k in {512,2048}).
BENCH_SHAPES=${BENCH_SHAPES:-}
shape_args=()
[ -n "$BENCH_SHAPES" ] && shape_args=(--shapes "$BENCH_SHAPES")

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

# timed_run NAME ARGS...: `dsatopk-audit run ARGS...` (its output in /tmp/NAME.txt; RUN_BINARY
# names another build), then one line in logs.txt and on stdout: NAME, the exit code and the
# process's wall time in ms; "NAME RC WALL_MS" is also appended to /tmp/timed-runs.txt.
timed_run() {
    local name=$1 started rc wall
    shift
    started=$(date +%s%N)
    timeout 500 "${RUN_BINARY:-dsatopk-audit}" run "$@" >"/tmp/$name.txt" 2>&1
    rc=$?
    wall=$((($(date +%s%N) - started) / 1000000))
    echo "$name: rc $rc, wall ${wall} ms (run $*)" | tee -a "$LOG"
    echo "$name $rc $wall" >>/tmp/timed-runs.txt
}

# seed_captures: the seed-harness captures in /tmp/seed, made unless a complete set is there
# (make-seed-captures.sh writes random_64x262144.bin last, each file under a temporary name).
seed_captures() {
    [ -f /tmp/seed/random_64x262144.bin ] || step seed-captures 120 \
        scripts/make-seed-captures.sh /tmp/seed device-bundle/bin/dsatopk-audit
}

# build_binary NAME: the binary of an A/B build: "new" is this one, any other NAME the older
# build carried as device-bundle/bin/dsatopk-audit-NAME (steps ab and bench-ab).
build_binary() {
    if [ "$1" = new ]; then echo dsatopk-audit; else echo "dsatopk-audit-$1"; fi
}

# grid_shapes B...: the shapes B x L for L in 8192-262144 and k in 512, 2048, as --shapes takes them.
grid_shapes() {
    local rows length k list=()
    for rows in "$@"; do
        for length in 8192 32768 65536 131072 262144; do
            for k in 512 2048; do list+=("${rows}x$length:$k"); done
        done
    done
    local IFS=,
    echo "${list[*]}"
}

nvidia-smi -L >>"$LOG" 2>&1
dsatopk-audit --version >>"$LOG" 2>&1
for s in $steps; do
    case $s in
    suite)
        step devices 60 dsatopk-audit devices
        step devices-gb10 60 dsatopk-audit --emulate-smem-per-sm 102400 devices
        step gpu-suite 450 test_gpu_backends
        step gpu-row-hash 60 test_gpu_row_hash
        step gpu-run 450 tests/gpu/test_gpu_run.sh device-bundle/bin/dsatopk-audit
        ;;
    split)
        # bitonic's tree path with leaves of 2048 (several leaves and tree levels on every shape),
        # then the one-CTA path alone (plans forced: kernels/include/bitonic_plan.h).
        step gpu-suite-split 300 test_gpu_backends --backend bitonic --plan tree_deep
        step gpu-suite-nosplit 300 test_gpu_backends --backend bitonic --plan one_cta
        step memcheck-split 150 compute-sanitizer --tool memcheck \
            --error-exitcode 9 test_gpu_backends --backend bitonic --plan tree_deep --quick
        step initcheck-split 150 compute-sanitizer --tool initcheck \
            --error-exitcode 9 test_gpu_backends --backend bitonic --plan tree_deep --quick --k 100
        ;;
    cluster)
        # bitonic's cluster path: as auto chooses it, forced on every shape (rows of one slice
        # too), with 16, 32, 64 and 128 keys per thread, the tree path alone for comparison; clusters
        # of 3-16 CTAs through --longest; the sanitizers.
        for mode in auto cluster cluster16 cluster32 cluster64 cluster128 tree; do
            step "gpu-suite-$mode" 300 test_gpu_backends --backend bitonic --plan "$mode"
        done
        for run in cluster:20000 cluster:40000 cluster:57000 cluster64:70000 cluster64:100000 \
                   cluster64:200000 cluster128:100000 cluster128:150000 cluster128:300000; do
            step "longest-${run%%:*}-${run##*:}" 100 test_gpu_backends --backend bitonic \
                --plan "${run%%:*}" --quick --longest "${run##*:}"
        done
        step longest-cluster64-32768 200 test_gpu_backends --backend bitonic --plan cluster64 \
            --longest 32768
        for mode in cluster cluster64 cluster128; do
            step "memcheck-$mode" 200 compute-sanitizer \
                --tool memcheck --error-exitcode 9 test_gpu_backends --backend bitonic --plan "$mode" --quick
        done
        for mode in cluster cluster64 cluster128; do
            step "initcheck-$mode" 200 compute-sanitizer \
                --tool initcheck --error-exitcode 9 test_gpu_backends --backend bitonic --plan "$mode" --quick --k 100
        done
        # Barrier use: the relaxed split cluster barrier of rows of 5+ CTAs (cluster) and the
        # bulk load's mbarriers (cluster64).
        for mode in cluster cluster64; do
            step "synccheck-$mode" 200 compute-sanitizer \
                --tool synccheck --error-exitcode 9 test_gpu_backends --backend bitonic --plan "$mode" --quick
        done
        for run in cluster:2048 cluster64:100 cluster128:2048 tree:2048; do
            step "racecheck-${run%%:*}" 240 compute-sanitizer \
                --tool racecheck --error-exitcode 9 test_gpu_backends --backend bitonic \
                --plan "${run%%:*}" --quick --k "${run##*:}"
        done
        # Random rows of 262144 and 300000 at k 2048: the whole-bin gather into both leader
        # buffers, by plain stores (4 CTAs) and asynchronous ones (5).
        for longest in 262144 300000; do
            step "racecheck-cluster128-$longest" 240 compute-sanitizer --tool racecheck \
                --error-exitcode 9 test_gpu_backends --backend bitonic --plan cluster128 \
                --longest "$longest" --k 2048 --family random
        done
        ;;
    kernel)
        # A quick check of bitonic after a kernel change: the suite in every plan (the
        # cluster path's, the tree's with leaves of 8192 and of 2048), rows of 3-16 CTAs
        # (--longest), memcheck and racecheck on the quick cases (the full sweep: cluster, split).
        for mode in auto cluster cluster16 cluster32 cluster64 cluster128 tree tree_deep one_cta; do
            step "suite-$mode" 120 test_gpu_backends --backend bitonic --plan "$mode"
        done
        for run in cluster:57000 cluster64:200000 cluster128:300000; do
            step "longest-${run%%:*}-${run##*:}" 100 test_gpu_backends --backend bitonic \
                --plan "${run%%:*}" --quick --longest "${run##*:}"
        done
        # Rows of one bulk-loaded slice (one CTA per row: what auto runs on many rows of
        # 16385-32768 elements), every k; --quick above takes k 1, 100 and 2048 only.
        step longest-cluster64-32768 200 test_gpu_backends --backend bitonic --plan cluster64 \
            --longest 32768
        for mode in cluster cluster128; do
            step "memcheck-$mode" 200 compute-sanitizer \
                --tool memcheck --error-exitcode 9 test_gpu_backends --backend bitonic --plan "$mode" --quick
        done
        step racecheck-cluster64 200 compute-sanitizer \
            --tool racecheck --error-exitcode 9 test_gpu_backends --backend bitonic --plan cluster64 \
            --quick --k 100
        ;;
    ab-suite)
        # The GPU suite for bitonic (as auto plans, then the 16-key cluster kernel on ReLU rows of
        # 8192 at k 2048, its plateau path) with each build in AB_BUILDS (default "old"):
        # device-bundle/bin/test_gpu_backends-NAME, carried by DEVICE_VARIANTS.
        for build in ${AB_BUILDS:-old}; do
            step "ab-suite-$build" 200 "test_gpu_backends-$build" --backend bitonic
            step "ab-suite-$build-relu" 200 "test_gpu_backends-$build" --backend bitonic \
                --plan cluster16 --longest 8192 --k 2048 --family relu
        done
        ;;
    bench-ab)
        # bitonic's speed, this binary ("new") against device-bundle/bin/dsatopk-audit-NAME for
        # each NAME in AB_BUILDS (default "old"), AB_ROUNDS rounds alternating, BENCH_SHAPES.
        # Compare the JSON files (bench-NAME-ROUND.json) with scripts/bench-compare.py (the old
        # build first).
        for round in $(seq "${AB_ROUNDS:-2}"); do
            for build in ${AB_BUILDS:-old} new; do
                binary=$(build_binary "$build")
                step "bench-$build-$round" 300 "$binary" bench --backends bitonic \
                    "${shape_args[@]}" --out "$OUT/bench-$build-$round.json"
            done
        done
        ;;
    phases)
        # Where the bitonic kernels' CTAs spend a call (the measurement build of
        # scripts/device-bundle.sh): mean microseconds from a CTA's start to each mark, as auto
        # chooses and with each path forced (bitonic@PLAN). Then the same shapes timed by the
        # normal build.
        for mode in auto cluster tree; do
            step "phases-$mode" 300 dsatopk-audit-phases bench \
                --backends "bitonic@$mode" "${shape_args[@]}" --out "$OUT/phases-$mode.json"
        done
        step bench-shapes 300 dsatopk-audit bench --backends bitonic,radix "${shape_args[@]}" \
            --out "$OUT/bench-shapes.json"
        ;;
    profile)
        # Nsight Compute over one bitonic launch (the sixth) for each PROFILE_FAMILIES x
        # PROFILE_SHAPES: the issue rate, warp states and stall reasons, instruction mix,
        # occupancy and throughputs in logs.txt, and the instructions executed and stall samples
        # per SASS instruction in profile-FAMILY-BxL-kK-source.csv (per source line here:
        # PROFILE_CSV=that NVDISASM=... scripts/kernel-codesize.sh KERNEL). ncu locks the clocks
        # at base and flushes the caches: its durations are proportions, bench's table the speed.
        for family in ${PROFILE_FAMILIES:-relu random}; do
            for shape in ${PROFILE_SHAPES:-4096x8192:2048 4096x8192:512}; do
                name="profile-$family-${shape/:/-k}"
                step "$name" 200 ncu --launch-skip 5 --launch-count 1 --kernel-name regex:k_cluster \
                    --section LaunchStats --section Occupancy --section SpeedOfLight \
                    --section SchedulerStats --section WarpStateStats --section InstructionStats \
                    --section MemoryWorkloadAnalysis --section SourceCounters --import-source yes \
                    -f -o "/tmp/$name" dsatopk-audit bench --backends bitonic --families "$family" \
                    --shapes "$shape" --format none --out /tmp/profile.json
                step "$name-details" 60 ncu --import "/tmp/$name.ncu-rep" --print-details all
                step "$name-source" 60 bash -c "ncu --import '/tmp/$name.ncu-rep' --page source \
                    --csv --print-source sass >'$OUT/$name-source.csv'"
            done
        done
        ;;
    bench-paths)
        # bitonic alone, as auto chooses (cluster path) and with the tree path, same shapes.
        step bench-auto 300 dsatopk-audit bench --backends bitonic,radix "${shape_args[@]}" \
            --out "$OUT/bench-auto.json"
        step bench-tree 300 dsatopk-audit bench --backends bitonic@tree \
            "${shape_args[@]}" --out "$OUT/bench-tree.json"
        ;;
    sanitize)
        step memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 test_gpu_backends --quick
        step initcheck 120 compute-sanitizer --tool initcheck --error-exitcode 9 test_gpu_backends --quick --k 100
        ;;
    racecheck)
        # Without the negative control (--backend), which is too slow under racecheck.
        # sort (CUB's radix sort) takes about 150 s under racecheck on the H200 (thirteenth run;
        # it never finished within the 100 s the others get).
        for backend in bitonic filtered-det sort; do
            limit=100
            [ "$backend" = sort ] && limit=300
            step "racecheck-$backend" "$limit" compute-sanitizer --tool racecheck --error-exitcode 9 \
                test_gpu_backends --backend "$backend" --quick --k 100
        done
        ;;
    racecheck-split)
        # bitonic's tree path with leaves of 2048 on every shape (racecheck above lets bitonic
        # choose: the tree path for k <= 4096, leaves of 8192).
        step racecheck-split 150 compute-sanitizer --tool racecheck \
            --error-exitcode 9 test_gpu_backends --backend bitonic --plan tree_deep --quick --k 100
        ;;
    sanitize-run)
        # `run` itself under memcheck: the replay's streams, events and noise queue (keeper,
        # workers, graph and batch replays) on three records of the shipped edge capture, with the
        # default gemm noise. The CUDA work is in forked children: sanitizer-run.sh judges every
        # process's ERROR SUMMARY. Record 1 is left out: fi-* fail it by design (BACKENDS.md).
        step run-memcheck 300 bash scripts/sanitizer-run.sh memcheck dsatopk-audit run --reps 3 \
            --graph --batch-invariance --records 0,2-3 --out /tmp/run-memcheck.json captures/edge.bin
        # The same with --devices 0,0: a pass process beside the main one, each with its own
        # session worker (plateau.bin's 8 MiB records reach them in a memfd). Records 0 and 2 of
        # each file: every backend passes there, fi-* included, so the run must exit 0.
        step run-memcheck-devices 300 bash scripts/sanitizer-run.sh memcheck dsatopk-audit run \
            --reps 3 --devices 0,0 --records 0,2 --out /tmp/run-memcheck-devices.json \
            captures/edge.bin captures/plateau.bin
        ;;
    sanitize-plugins)
        # The example plugin under memcheck and initcheck: test_gpu_plugins' cases (every synth
        # family, eager and graph replays, k 100) and `run --plugin` on the shipped edge records
        # (k 2048, row starts, padding, page tables). The faulty plugins fault on purpose and are
        # left out, except plugin_oob as the negative control: memcheck must report its invalid
        # read, or the tool does not see plugin kernels (their CUDA runtime is the plugin's own)
        # or the forked children at all. The CUDA work happens in forked children, so
        # sanitizer-run.sh judges every process's ERROR SUMMARY, not the exit code.
        step plugin-memcheck 150 bash scripts/sanitizer-run.sh memcheck \
            test_gpu_plugins device-bundle/plugins --only example_plugin --k 100
        step plugin-initcheck 150 bash scripts/sanitizer-run.sh initcheck \
            test_gpu_plugins device-bundle/plugins --only example_plugin --k 100
        rm -f /tmp/plugin-memcheck-report.json
        step plugin-memcheck-run 120 bash scripts/sanitizer-run.sh memcheck \
            dsatopk-audit run --reps 3 --graph --noise none \
            --plugin device-bundle/plugins/example_plugin.so --backends example-simple \
            --out /tmp/plugin-memcheck-report.json captures/edge.bin
        # ... and it did replay: example-simple ran and passed on all 11 records.
        step plugin-memcheck-ran 30 python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print("example-simple under memcheck:", s["status"]["ok"], "ok,", s["backends_pass"], "pass of 11")
sys.exit(0 if s["status"]["ok"] == 11 and s["backends_pass"] == 11 else 1)' \
            /tmp/plugin-memcheck-report.json
        step plugin-oob-control 60 bash scripts/sanitizer-run.sh --expect 'Invalid __global__ read' \
            memcheck test_gpu_plugins device-bundle/plugins --only plugin_oob
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
    devices-parallel)
        # Wall time of `run --devices 0` against `--devices 0,0` at once (two pass processes
        # sharing the GPU) and in turn (--devices-sequential), on the seed captures, rounds
        # alternating (DEVICES_ROUNDS, default 2). Prints the table of docs/PERF.md "Several
        # devices at once" (each run's wall time, the median, the ratio to --devices 0, the
        # kernel time summed over every entry), then whether the deterministic backends' outputs
        # are the same in all three (last round's reports).
        seed_captures
        rm -f /tmp/timed-runs.txt
        for round in $(seq "${DEVICES_ROUNDS:-2}"); do
            timed_run "devices-one-$round" --reps 25 --devices 0 --out /tmp/devices-one.json /tmp/seed
            timed_run "devices-at-once-$round" --reps 25 --devices 0,0 \
                --out /tmp/devices-at-once.json /tmp/seed
            timed_run "devices-in-turn-$round" --reps 25 --devices 0,0 --devices-sequential \
                --out /tmp/devices-in-turn.json /tmp/seed
        done
        cp /tmp/devices-at-once.json "$OUT/devices-at-once-report.json"
        python3 - /tmp/timed-runs.txt /tmp/devices-one.json /tmp/devices-at-once.json \
            /tmp/devices-in-turn.json <<'PY' | tee -a "$LOG"
import json, statistics, sys
deterministic = ("bitonic", "sort", "filtered-det", "fi-graph-safe")
modes = (("one", "`--devices 0`"), ("at-once", "`--devices 0,0`"),
         ("in-turn", "`--devices 0,0 --devices-sequential`"))
walls = {mode: [] for mode, _ in modes}
for line in open(sys.argv[1]):
    name, rc, wall = line.split()
    mode = name[len("devices-"):name.rindex("-")]
    walls[mode].append(int(wall) if rc == "0" else None)
reports = [json.load(open(path)) for path in sys.argv[2:]]
def kernel_s(report):
    return sum((d.get("time_breakdown_ms") or {}).get("kernel_ms") or 0 for r in report["records"]
               for b in r["backends"] for d in b.get("per_device", [])) / 1000.0
first = reports[0]
print(f"devices-parallel: {len(first['records'])} records x {len(first['context']['backends'])} "
      f"backends, --reps 25, on {(first['context']['device'] or {}).get('name')}")
print("| run | wall time per round (s) | median | vs `--devices 0` | kernels, all entries (s) |")
print("| --- | --- | --- | --- | --- |")
base = None
for (mode, label), report in zip(modes, reports):
    ok = [w for w in walls[mode] if w is not None]
    median = statistics.median(ok) / 1000.0 if ok else None
    base = base or median
    rounds = ", ".join("failed" if w is None else f"{w / 1000.0:.2f}" for w in walls[mode])
    ratio = f"{median / base:.2f}x" if median and base else "-"
    print(f"| {label} | {rounds} | {median or 0:.2f} | {ratio} | {kernel_s(report):.2f} |")
def outputs(report):
    return {(r["file"], r["index"], b["name"], d["device"]["index"]): tuple(sorted(set(d["output_sha256_per_rep"])))
            for r in report["records"] for b in r["backends"] if b["name"] in deterministic
            for d in b.get("per_device", []) if d["status"] == "ok"}
one = {key[:3]: value for key, value in outputs(reports[0]).items()}
for name, report in zip(("at once", "in turn"), reports[1:]):
    got = outputs(report)
    differ = [key for key, value in got.items() if one.get(key[:3]) != value or len(value) != 1]
    print(f"devices-parallel {name}: devices_concurrent {report['context']['devices_concurrent']}, "
          f"{len(got)} deterministic entries, {len(differ)} differ from --devices 0 {differ[:3]}")
PY
        ;;
    devices-all)
        # Every GPU of the host at once (the cross-GPU audit): `run --devices all --baseline-out`
        # over the shipped and seed captures, timed against one GPU (`--devices 0`, same inputs),
        # then `gate` of every device's entries (per_device[]) against the baseline. Goal: the wall
        # time within 1.3x of one GPU's; deterministic backends identical on every GPU.
        seed_captures
        nvidia-smi -L | tee -a "$LOG"
        timed_run devices-all-one --reps 25 --devices 0 --out /tmp/devices-all-one.json \
            captures /tmp/seed
        timed_run devices-all --reps 25 --devices all --baseline-out "$OUT/devices-all-baseline.json" \
            --out "$OUT/devices-all-report.json" captures /tmp/seed
        grep '^# cross-device' /tmp/devices-all.txt | tee -a "$LOG"
        step gate-devices-all 120 dsatopk-audit gate --baseline "$OUT/devices-all-baseline.json" \
            --out "$OUT/devices-all-gate.json" "$OUT/devices-all-report.json"
        python3 - /tmp/devices-all-one.json "$OUT/devices-all-report.json" <<'PY' | tee -a "$LOG"
import json, sys
one, every = (json.load(open(path)) for path in sys.argv[1:])
block = every.get("cross_device", {})
print(f"devices-all: {len(every['context']['devices'])} device(s) {every['context']['devices']}, "
      f"devices_concurrent {every['context']['devices_concurrent']}, complete {every['complete']}, "
      f"exit {every['exit_code']}; cross_device {block.get('summary')}")
PY
        ;;
    handover)
        # A record too big for the session's socket copy (1.1 GiB of scores: older builds forked
        # a worker, with its own CUDA start, for any record over 1 GiB) between two small ones:
        # the session worker maps it from a memfd and keeps its CUDA context. Prints the wall
        # time and each record's backends_ms and device_open_ms, for this build and each build
        # NAME in HANDOVER_BUILDS (device-bundle/bin/dsatopk-audit-NAME). docs/PERF.md "The
        # audit itself".
        rm -f /tmp/handover.bin
        step handover-synth 120 bash -c 'dsatopk-audit synth -f relu -b 16 -L 131072 -k 2048 -s 1 \
            -o /tmp/handover.bin && dsatopk-audit synth -f relu -b 2304 -L 131072 -k 2048 -s 2 \
            -a -o /tmp/handover.bin && dsatopk-audit synth -f relu -b 16 -L 131072 -k 2048 -s 3 \
            -a -o /tmp/handover.bin'
        for build in new ${HANDOVER_BUILDS:-}; do
            RUN_BINARY=$(build_binary "$build") timed_run "handover-$build" --reps 3 \
                --backends bitonic,sort --out "/tmp/handover-$build.json" /tmp/handover.bin
            python3 - "/tmp/handover-$build.json" "$build" <<'PY' | tee -a "$LOG"
import json, sys
report = json.load(open(sys.argv[1]))
for r in report["records"]:
    opened = sum(b["time_breakdown_ms"]["device_open_ms"] for b in r["backends"])
    print(f"handover {sys.argv[2]}: record {r['index']} ({r['rows']} rows): backends_ms "
          f"{r['time_breakdown_ms']['backends_ms']:.0f}, device_open_ms {opened:.0f}, "
          f"{[b['status'] for b in r['backends']]}")
PY
        done
        ;;
    run)
        step seed-captures 120 scripts/make-seed-captures.sh /tmp/seed device-bundle/bin/dsatopk-audit
        step run-seed 450 dsatopk-audit run --reps 25 --out "$OUT/seed-report.json" /tmp/seed
        step run-shipped 300 dsatopk-audit run --reps 10 --graph --batch-invariance \
            --out "$OUT/shipped-report.json" captures
        ;;
    breakdown)
        # Where `run` spends its time (issue 6): 25 reps x every backend on one 64 x 131072 record.
        step breakdown-synth 60 dsatopk-audit synth -f relu -b 64 -L 131072 -k 2048 -s 1 \
            -o /tmp/relu-64x131072.bin
        step breakdown 300 dsatopk-audit run --reps 25 --out "$OUT/breakdown.json" \
            /tmp/relu-64x131072.bin
        grep '^# time' "$LOG" | tail -8
        ;;
    ab)
        # The audit's own time, this binary ("new") against older ones carried as
        # device-bundle/bin/dsatopk-audit-NAME for each NAME in AB_BUILDS (default "old"),
        # AB_ROUNDS rounds, alternating: the quick start's `run` on the shipped captures and the
        # breakdown record. Prints each run's wall time (ms, the whole process) and its time
        # lines; reports go to /tmp.
        [ -f /tmp/relu-64x131072.bin ] || dsatopk-audit synth -f relu -b 64 -L 131072 -k 2048 \
            -s 1 -o /tmp/relu-64x131072.bin >>"$LOG" 2>&1
        for round in $(seq "${AB_ROUNDS:-3}"); do
            for build in ${AB_BUILDS:-old} new; do
                binary=$(build_binary "$build")
                for job in quickstart breakdown; do
                    inputs=captures
                    [ "$job" = breakdown ] && inputs=/tmp/relu-64x131072.bin
                    started=$(date +%s%N)
                    timeout 300 "$binary" run --reps 25 --out "/tmp/ab-$job-$build.json" \
                        $inputs >"/tmp/ab-$job.txt" 2>&1
                    rc=$?
                    wall=$((($(date +%s%N) - started) / 1000000))
                    echo "$job $build round $round: rc $rc, run ${wall} ms" | tee -a "$LOG"
                    grep '^# time \(records\|all backends\)' "/tmp/ab-$job.txt" | tee -a "$LOG"
                done
            done
        done
        for job in quickstart breakdown; do
            cp "/tmp/ab-$job-new.json" "$OUT/$job-new.json"
        done
        ;;
    hash-share)
        # The share of `run`'s wall time spent on SHA-256 (time_breakdown_ms.hash_ms summed over
        # every record x backend) on the seed captures, for this binary and each build named in
        # HASH_BUILDS (default "ossl": -Dsha256=openssl, carried as dsatopk-audit-ossl): the
        # measurement behind the sha256 option's default (docs/PERF.md "The audit itself").
        seed_captures
        for build in new ${HASH_BUILDS:-ossl}; do
            binary=$(build_binary "$build")
            started=$(date +%s%N)
            timeout 300 "$binary" run --reps 25 --out "/tmp/hash-$build.json" /tmp/seed \
                >"/tmp/hash-$build.txt" 2>&1
            rc=$?
            wall=$((($(date +%s%N) - started) / 1000000))
            python3 - "/tmp/hash-$build.json" "$build" "$rc" "$wall" <<'PY' | tee -a "$LOG"
import json, sys
report, build, rc, wall = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], float(sys.argv[4])
hash_ms = sum(b.get("time_breakdown_ms", {}).get("hash_ms", 0.0)
              for r in report["records"] for b in r.get("backends", []))
print(f"hash-share {build}: rc {rc}, run {wall:.0f} ms, SHA-256 {hash_ms:.1f} ms = "
      f"{100.0 * hash_ms / wall:.1f}% of the wall time")
PY
        done
        ;;
    bench)
        step bench 400 dsatopk-audit bench "${shape_args[@]}" --out "$OUT/bench.json"
        step torch-bench 300 python3 scripts/bench_torch.py "${shape_args[@]}" \
            --out "$OUT/torch-bench.json"
        ;;
    flashinfer)
        # FlashInfer's own kernels (fi-*): the GPU suite for each, then memcheck and racecheck
        # on the quick cases. The binary must have been built with the flashinfer headers
        # (device-bundle.sh warns otherwise).
        for backend in fi-auto fi-det fi-det-sorted fi-graph-safe; do
            step "suite-$backend" 200 test_gpu_backends --backend "$backend"
        done
        for backend in fi-auto fi-det fi-det-sorted fi-graph-safe; do
            step "memcheck-$backend" 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
                test_gpu_backends --backend "$backend" --quick
        done
        for backend in fi-auto fi-graph-safe; do
            step "racecheck-$backend" 200 compute-sanitizer --tool racecheck --error-exitcode 9 \
                test_gpu_backends --backend "$backend" --quick --k 100
        done
        step run-memcheck-fi 300 bash scripts/sanitizer-run.sh memcheck dsatopk-audit run --reps 3 \
            --graph --backends fi-auto,fi-det,fi-det-sorted,fi-graph-safe \
            --out /tmp/run-memcheck-fi.json captures/edge.bin
        ;;
    fidelity)
        # Our models beside FlashInfer's kernels (docs/BACKENDS.md "Model fidelity"): the shipped
        # captures, the seed captures and the SGLang #36807 shape; the tables to model-fidelity.md.
        step model-fidelity 540 bash -c "python3 scripts/model-fidelity.py --out /tmp/model-fidelity \
            --seed-dir /tmp/seed >'$OUT/model-fidelity.md'"
        cp /tmp/model-fidelity/fidelity-report.json "$OUT/" 2>/dev/null
        ;;
    peers)
        # Ours and the peers in one bench process, timed the same way, then torch.topk in the
        # same device call, and docs/PERF.md's table with the ratios (peers-table-FAMILY.md).
        # BENCH_FAMILIES: default random; one family's default grid takes about five minutes,
        # so relu goes in a second device call.
        families=${BENCH_FAMILIES:-random}
        tag=${families//,/-}
        step bench-peers 420 dsatopk-audit bench "${shape_args[@]}" --families "$families" \
            --backends bitonic,radix,filtered,filtered-det,fi-auto,fi-det,fi-det-sorted,fi-graph-safe \
            --out "$OUT/bench-peers-$tag.json"
        step torch-peers 150 python3 scripts/bench_torch.py "${shape_args[@]}" \
            --families "$families" --out "$OUT/torch-peers-$tag.json"
        step peers-table 30 bash -c "python3 scripts/perf-table.py --ratio fi-auto/bitonic \
            --ratio fi-det/bitonic --ratio fi-det-sorted/bitonic --ratio fi-graph-safe/bitonic \
            --ratio torch.topk/bitonic --ratio bitonic/radix '$OUT/bench-peers-$tag.json' \
            '$OUT/torch-peers-$tag.json' | tee '$OUT/peers-table-$tag.md'"
        ;;
    grid)
        # The targets' grid (docs/PERF.md "Against the targets"): the default grid plus B 128-4096 x
        # L 8192-262144, k 512 and 2048; `bitonic`, `fi-auto` and torch.topk, one family
        # (BENCH_FAMILIES, default random) a device call. Each part is its own process with its
        # own time limit, so a part that runs over or breaks its CUDA context loses only itself;
        # the parts' results are merged into grid-bench-FAMILY.json and grid-torch-FAMILY.json,
        # the targets' verdict into grid-targets-FAMILY.md.
        family=${BENCH_FAMILIES:-random}
        parts=("" "$(grid_shapes 128 256 512)" "$(grid_shapes 1024 2048)" "$(grid_shapes 4096)")
        limits=(60 90 150 150)
        for i in "${!parts[@]}"; do
            args=(--families "$family")
            [ -n "${parts[$i]}" ] && args+=(--shapes "${parts[$i]}")
            step "grid-bench-$i" "${limits[$i]}" dsatopk-audit bench "${args[@]}" --format none \
                --backends bitonic,fi-auto --out "/tmp/grid-bench-$family-$i.json"
        done
        for i in "${!parts[@]}"; do
            args=(--families "$family")
            [ -n "${parts[$i]}" ] && args+=(--shapes "${parts[$i]}")
            step "grid-torch-$i" "$((${limits[$i]} + 30))" python3 scripts/bench_torch.py \
                "${args[@]}" --out "/tmp/grid-torch-$family-$i.json"
        done
        for what in bench torch; do
            step "grid-merge-$what" 30 python3 scripts/bench_json.py merge \
                "$OUT/grid-$what-$family.json" /tmp/grid-"$what-$family"-*.json
        done
        step grid-targets 30 bash -c "python3 scripts/perf-targets.py '$OUT/grid-bench-$family.json' \
            '$OUT/grid-torch-$family.json' | tee '$OUT/grid-targets-$family.md'"
        ;;
    *) echo "device-check.sh: unknown step '$s'" >&2; exit 2 ;;
    esac
done
