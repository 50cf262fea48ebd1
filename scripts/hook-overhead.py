#!/usr/bin/env python3
"""Measures what CaptureHook costs an engine (tools/python/README.md "Measuring the calling thread").

For each shape (rows x row length, float32 scores with engine indices (rows, k) int32) and each
compression setting:

- paced: one capture every --interval-ms (50), as an engine capturing one call per decode step
  would: the calling-thread time of each capture() (median, p99, max) and its CPU time
  (time.thread_time(): the rest of the wall time the thread waited, for the GIL, a lock or the
  driver), the calls dropped, and
  on CUDA how long the engine's stream waits for the copies (the GPU time from an event before
  the capture to one after the next kernel on that stream);
- burst: --burst captures back to back with the default queue: how many were dropped;
- writer: the same burst with block=True, from the first capture to the end of flush() (the
  last fsync included, unless --fsync none): the writer's throughput in raw and stored MB/s.

Each hook runs with the --fsync policy (default the hook's, "interval") and, on CUDA, first
pins host memory for --reserve calls (default as many as the queue holds), as an engine would
at startup (CaptureHook.reserve_pinned).

The engine's buffers are overwritten in place after every capture (as engines reuse them), and
every tenth capture is checked against a copy taken right after it, so a copy that read a buffer
too late shows as a mismatch. First, the SGLang and vLLM wrappers (dsatopk_capture.engines) run
on the same kind of arrays through stand-ins with the engines' signatures, checked the same way.

CUDA tensors when torch and a GPU are there, numpy arrays otherwise (or with --numpy). Needs
only numpy (and torch for the GPU), with the package importable (PYTHONPATH=python, or the
tools/python/ folder beside this script is used). Prints a table; --out FILE writes JSON.

    PYTHONPATH=python python3 scripts/hook-overhead.py --out hook-overhead.json
    python3 scripts/hook-overhead.py --numpy --quick        # a quick check without a GPU
"""

import argparse
import cProfile
import json
import os
import platform
import pstats
import shutil
import statistics
import sys
import tempfile
import time
import traceback

import numpy as np

try:
    import dsatopk_capture
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
    import dsatopk_capture
from dsatopk_capture import CaptureHook, read_records

GOAL_MEDIAN_MS = 0.5
GOAL_SHAPE = (64, 131072)


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the results as JSON to this file")
    parser.add_argument("--dir", help="where the capture files go (default: a temporary folder)")
    parser.add_argument("--shapes", default="16x65536,64x131072",
                        help="rows x row length, comma-separated (default %(default)s)")
    parser.add_argument("-k", type=int, default=2048, help="top-k size (default %(default)s)")
    parser.add_argument("--levels", default="0,1,6",
                        help="zlib levels, 0 for uncompressed (default %(default)s)")
    parser.add_argument("--compress-threads", type=int, default=min(8, os.cpu_count() or 1),
                        help="writer compression threads (default %(default)s)")
    parser.add_argument("--fsync", default="interval", choices=("record", "interval", "close",
                                                                "none"),
                        help="the hook's fsync policy (default %(default)s)")
    parser.add_argument("--fsync-interval", type=float, default=1.0,
                        help="seconds between fsyncs with --fsync interval (default %(default)s)")
    parser.add_argument("--reserve", default="queue",
                        help="calls to pin host memory for before capturing (CUDA): a number, "
                             "or 'queue' for as many as the queue holds (default %(default)s)")
    parser.add_argument("--captures", type=int, default=100, help="paced captures per case")
    parser.add_argument("--interval-ms", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=48, help="back-to-back captures per case")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--numpy", action="store_true", help="numpy arrays even with a GPU")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="profile the paced captures' calling thread (cProfile) and write "
                             "PREFIX-ROWSxLENGTH-zLEVEL.txt, the functions by own time")
    parser.add_argument("--switch-interval", type=float, metavar="SECONDS",
                        help="sys.setswitchinterval() for the run (how long a thread that "
                             "wants the GIL waits before asking its holder to let go)")
    parser.add_argument("--quick", action="store_true",
                        help="small shapes and few captures (a check of the script itself)")
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.shapes = "16x8192,64x16384"
        arguments.captures, arguments.burst, arguments.warmup = 12, 12, 2
        arguments.interval_ms = 5.0
        arguments.k = min(arguments.k, 256)
    return arguments


class Engine:
    """Buffers an engine reuses: scores (ReLU-summed indexer scores have exact-zero plateaus,
    so half of them are 0.0 here) and the top-k output, refilled in place for every call."""

    def __init__(self, rows, length, k, use_cuda, seed=0):
        self.rows, self.length, self.k = rows, length, k
        self.cuda = use_cuda
        if use_cuda:
            import torch
            self.torch = torch
            self.generator = torch.Generator(device="cuda").manual_seed(seed)
            self.scores = torch.empty((rows, length), dtype=torch.float32, device="cuda")
            self.indices = torch.empty((rows, k), dtype=torch.int32, device="cuda")
            self.lengths = torch.full((rows,), length, dtype=torch.int32, device="cuda")
            self.marker = torch.zeros(1, device="cuda")
        else:
            self.rng = np.random.default_rng(seed)
            self.scores = np.empty((rows, length), np.float32)
            self.indices = np.empty((rows, k), np.int32)
            self.lengths = np.full(rows, length, np.int32)
        self.refill()

    def refill(self):
        """The next call's values, written over the previous ones (on the engine's stream)."""
        if self.cuda:
            self.scores.normal_(generator=self.generator).relu_()
            self.indices.random_(0, self.length, generator=self.generator)
        else:
            self.scores[:] = np.maximum(self.rng.standard_normal(self.scores.shape,
                                                                 np.float32), 0)
            self.indices[:] = self.rng.integers(0, self.length, self.indices.shape)

    def snapshot(self):
        if self.cuda:
            return self.scores.cpu().numpy(), self.indices.cpu().numpy()
        return self.scores.copy(), self.indices.copy()

    def record_bytes(self):
        return 4 * self.rows * (self.length + 1 + self.k)

    def synchronize(self):
        if self.cuda:
            self.torch.cuda.synchronize()


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def summary_ms(seconds):
    milliseconds = [s * 1e3 for s in seconds]
    return {"median": round(statistics.median(milliseconds), 4),
            "p99": round(percentile(milliseconds, 0.99), 4),
            "max": round(max(milliseconds), 4), "mean": round(statistics.fmean(milliseconds), 4),
            "count": len(milliseconds)}


def hook_for(path, level, arguments, engine, **options):
    hook = CaptureHook(path, rank=0, compress=level > 0, compress_level=max(level, 1),
                       compress_threads=arguments.compress_threads, fsync=arguments.fsync,
                       fsync_interval=arguments.fsync_interval,
                       metadata={"bench": "hook-overhead"}, **options)
    if engine.cuda:
        count = None if arguments.reserve == "queue" else int(arguments.reserve)
        if count != 0:
            hook.reserve_pinned(engine.scores, engine.lengths, engine_indices=engine.indices,
                                count=count)
    return hook


def write_profile(profiler, path, captures):
    """The profiled captures' functions by own time, in microseconds per capture() call, with
    their cumulative time beside (pstats prints milliseconds of the total, too coarse here)."""
    rows = []
    for (filename, line, name), (_, calls, own, cumulative, _) in \
            pstats.Stats(profiler).stats.items():
        where = name if filename == "~" else f"{os.path.basename(filename)}:{line}({name})"
        rows.append((own, cumulative, calls, where))
    rows.sort(reverse=True)
    with open(path, "w") as f:
        f.write(f"# {captures} profiled capture() calls; us per call: own, cumulative, calls\n")
        for own, cumulative, calls, where in rows[:60]:
            f.write(f"{own * 1e6 / captures:9.1f} {cumulative * 1e6 / captures:9.1f} "
                    f"{calls / captures:7.2f}  {where}\n")


def paced(engine, level, arguments, directory):
    path = os.path.join(directory, "paced.bin")
    hook = hook_for(path, level, arguments, engine)
    times, cpu_times, delays, expected = [], [], [], {}
    torch = engine.torch if engine.cuda else None
    interval = arguments.interval_ms / 1e3
    total = arguments.warmup + arguments.captures
    profiler = cProfile.Profile() if arguments.profile else None
    next_start = time.perf_counter()
    for call in range(total):
        engine.refill()
        if engine.cuda:
            before = torch.cuda.Event(enable_timing=True)
            after = torch.cuda.Event(enable_timing=True)
            before.record()
        profiling = profiler is not None and call >= arguments.warmup
        if profiling:
            profiler.enable()
        start, start_cpu = time.perf_counter(), time.thread_time()
        hook.capture(engine.scores, engine.lengths, engine.k, engine_indices=engine.indices,
                     layer=call)
        elapsed = time.perf_counter() - start
        elapsed_cpu = time.thread_time() - start_cpu
        if profiling:
            profiler.disable()
        if engine.cuda:
            engine.marker.add_(1)        # the engine's next kernel on its stream
            after.record()
        if call >= arguments.warmup:
            times.append(elapsed)
            cpu_times.append(elapsed_cpu)
            if engine.cuda:
                after.synchronize()
                delays.append(before.elapsed_time(after) / 1e3)
            if call % 10 == 0:
                expected[call] = engine.snapshot()
        next_start += interval
        pause = next_start - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        else:
            next_start = time.perf_counter()
    hook.close()
    if profiler is not None:
        write_profile(profiler, f"{arguments.profile}-{engine.rows}x{engine.length}-z{level}.txt",
                      arguments.captures)
    stats = hook.stats()
    checked = mismatched = 0
    for record in read_records(path):
        snapshot = expected.get(record.metadata["layer"])
        if snapshot is None:
            continue
        checked += 1
        if record.scores.tobytes() != snapshot[0].tobytes() or \
                record.engine_indices.tobytes() != snapshot[1].astype(np.int32).tobytes():
            mismatched += 1
    os.unlink(path)
    result = {"calling_thread_ms": summary_ms(times),
              "calling_thread_cpu_ms": summary_ms(cpu_times), "dropped": stats["dropped"],
              "dropped_no_pinned": stats["dropped_no_pinned"], "records": stats["records"],
              "checked": checked, "mismatched": mismatched,
              "pinned_bytes": stats["pinned_bytes"], "fsync_errors": stats["fsync_errors"]}
    if delays:
        result["engine_stream_delay_ms"] = summary_ms(delays)
    return result


def burst(engine, level, arguments, directory, block):
    path = os.path.join(directory, "burst.bin")
    hook = hook_for(path, level, arguments, engine, block=block)
    engine.synchronize()
    start = time.perf_counter()
    for call in range(arguments.burst):
        engine.refill()
        hook.capture(engine.scores, engine.lengths, engine.k, engine_indices=engine.indices,
                     layer=call)
    hook.flush()
    seconds = time.perf_counter() - start
    hook.close()
    stats = hook.stats()
    os.unlink(path)
    raw_mb = stats["records"] * engine.record_bytes() / 1e6
    return {"captures": arguments.burst, "dropped": stats["dropped"],
            "dropped_no_pinned": stats["dropped_no_pinned"],
            "records": stats["records"], "seconds": round(seconds, 3),
            "raw_mb_per_s": round(raw_mb / seconds, 1),
            "stored_mb_per_s": round(stats["bytes"] / 1e6 / seconds, 1),
            "stored_fraction": round(stats["bytes"] / 1e6 / raw_mb, 3) if raw_mb else None}


def run_case(shape, level, arguments, use_cuda, directory):
    rows, length = shape
    case = {"rows": rows, "row_length": length, "k": arguments.k, "zlib_level": level,
            "compress_threads": arguments.compress_threads if level else 0,
            "record_raw_bytes": 4 * rows * (length + 1 + arguments.k), "error": None}
    try:
        engine = Engine(rows, length, arguments.k, use_cuda)
        case["paced"] = paced(engine, level, arguments, directory)
        case["burst"] = burst(engine, level, arguments, directory, block=False)
        case["writer"] = burst(engine, level, arguments, directory, block=True)
    except Exception as error:  # noqa: BLE001 -- one case failing must not lose the others
        case["error"] = f"{type(error).__name__}: {error}"
        case["traceback"] = traceback.format_exc()
    return case


class Arrays:
    """The few array operations the engine stand-ins need, on torch CUDA tensors or numpy."""

    def __init__(self, use_cuda):
        self.cuda = use_cuda
        if use_cuda:
            import torch
            self.torch = torch

    def scores(self, rows, cols, seed):
        values = np.maximum(np.random.default_rng(seed).standard_normal((rows, cols)), 0)
        return self.put(values.astype(np.float32))

    def put(self, array):
        return self.torch.from_numpy(np.ascontiguousarray(array)).cuda() if self.cuda else array

    def get(self, array):
        return array.cpu().numpy() if self.cuda else np.array(array)

    def window_topk(self, logits, starts, ends, k):
        """Window-relative top-k of each row of logits over [starts, ends), -1 padded."""
        if self.cuda:
            torch = self.torch
            cols = torch.arange(logits.shape[1], device=logits.device)[None, :]
            inside = (cols >= starts[:, None]) & (cols < ends[:, None])
            masked = torch.where(inside, logits, torch.full_like(logits, float("-inf")))
            order = torch.argsort(masked, dim=1, descending=True, stable=True)[:, :k]
            valid = torch.gather(inside, 1, order)
            return torch.where(valid, order - starts[:, None],
                               torch.full_like(order, -1)).to(torch.int32)
        cols = np.arange(logits.shape[1])[None, :]
        inside = (cols >= starts[:, None]) & (cols < ends[:, None])
        masked = np.where(inside, logits, -np.inf)
        order = np.argsort(-masked, axis=1, kind="stable")[:, :k]
        valid = np.take_along_axis(inside, order, 1)
        return np.where(valid, order - starts[:, None], -1).astype(np.int32)


def engine_recipes(use_cuda, directory):
    """The SGLang and vLLM wrappers (dsatopk_capture.engines) on the arrays those engines pass,
    through stand-ins with the engines' signatures that write their selections in place. The
    buffers are overwritten after each call; each record must hold what its call saw."""
    import types
    from dsatopk_capture.engines import install_sglang, install_vllm
    xp = Arrays(use_cuda)
    path = os.path.join(directory, "engines.bin")
    # block=True: each call's first one of its size waits for its pinned buffers instead of
    # being dropped (this checks what is captured, not how fast).
    hook = CaptureHook(path, rank=0, compress=False, block=True)
    expected = []

    def prefill(logits, ks, ke, out, num_rows, stride0, stride1, topk):
        out[:num_rows, :topk] = xp.window_topk(logits[:num_rows], ks[:num_rows],
                                               ke[:num_rows], topk)

    def decode(logits, next_n, seq_lens, out, num_rows, stride0, stride1, topk):
        rows = np.arange(num_rows)
        lengths = xp.get(seq_lens).reshape(-1)[rows // next_n] - next_n + rows % next_n + 1
        ends = xp.put(np.maximum(lengths, 0).astype(np.int32))
        out[:num_rows, :topk] = xp.window_topk(logits[:num_rows], ends * 0, ends, topk)

    class Backend:
        value = "stand-in"

        def topk_func(self, score, lengths, topk, row_starts=None):
            starts = lengths * 0 if row_starts is None else row_starts
            return xp.window_topk(score, starts, starts + lengths, topk)

        def topk_transform(self, logits, lengths, topk, topk_transform_method, attn_metadata,
                           cu_seqlens_q_topk=None, topk_indices_offset=None, row_starts=None,
                           batch_idx_list=None, force_unfused_topk=False):
            return self.topk_func(logits, lengths, topk, row_starts=row_starts)

    ops = types.SimpleNamespace(top_k_per_row_prefill=prefill, top_k_per_row_decode=decode)
    installs = [install_vllm(hook, ops, types.SimpleNamespace(), indexer=False),
                install_sglang(hook, Backend)]
    try:
        logits = xp.scores(8, 4096, 1)
        ks = xp.put(np.array([0, 0, 100, 100, 350, 490, 4000, 0], np.int32))
        ke = xp.put(np.array([40, 4096, 260, 3000, 500, 500, 4096, 1], np.int32))
        buffer = xp.put(np.full((10, 512), -1, np.int32))
        ops.top_k_per_row_prefill(logits, ks, ke, buffer, 7, 4096, 1, 256)
        expected.append((xp.get(logits[:7]), xp.get(buffer[:7, :256])))
        buffer[:] = -1
        logits[:] = 0
        decoded = xp.scores(6, 2048, 2)
        ops.top_k_per_row_decode(decoded, 2, xp.put(np.array([100, 2048, 30], np.int32)),
                                 buffer, 6, 2048, 1, 128)
        expected.append((xp.get(decoded), xp.get(buffer[:6, :128])))
        buffer[:] = -1
        decoded[:] = 0
        score = xp.scores(4, 1024, 3)
        selected = Backend().topk_transform(score, xp.put(np.array([1024, 10, 0, 500],
                                                                   np.int32)), 64, 1, None)
        expected.append((xp.get(score), xp.get(selected)))
        score[:] = 0
        selected[:] = -1
    finally:
        for installed in installs:
            installed.remove()
        hook.close()
    records = list(read_records(path))
    os.unlink(path)
    mismatched = [i for i, (record, (scores, indices)) in enumerate(zip(records, expected))
                  if record.scores.tobytes() != scores.tobytes() or
                  record.engine_indices.tobytes() != indices.astype(np.int32).tobytes()]
    return {"records": len(records), "expected": len(expected), "mismatched": mismatched,
            "sites": [r.metadata["topk_site"] for r in records],
            "ok": len(records) == len(expected) and not mismatched}


def context(use_cuda):
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "package": dsatopk_capture.__version__, "cpus": os.cpu_count(),
            "host": platform.node(), "mode": "cuda" if use_cuda else "numpy",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["torch"] = torch.__version__
        if use_cuda:
            info["gpu"] = torch.cuda.get_device_name()
    return info


def print_table(results):
    settings = results["settings"]
    print(f"# mode {results['context']['mode']}, "
          f"{results['context'].get('gpu', results['context']['host'])}; fsync "
          f"{settings['fsync']}"
          f"{' every %g s' % settings['fsync_interval'] if settings['fsync'] == 'interval' else ''}"
          f", compress threads {settings['compress_threads']}"
          f"{', pinned reserve ' + str(settings['reserve']) if results['context']['mode'] == 'cuda' else ''}")
    print(f"{'shape':>12} {'zlib':>4} {'median_ms':>9} {'cpu_ms':>7} {'p99_ms':>8} {'max_ms':>8} "
          f"{'stream_ms':>9} {'paced_drop':>10} {'burst_drop':>10} {'raw_MB/s':>9} "
          f"{'stored_MB/s':>11} {'checked':>7}")
    for case in results["cases"]:
        shape = f"{case['rows']}x{case['row_length']}"
        if case["error"]:
            print(f"{shape:>12} {case['zlib_level']:>4} error: {case['error']}")
            continue
        paced, burst, writer = case["paced"], case["burst"], case["writer"]
        calling = paced["calling_thread_ms"]
        stream = paced.get("engine_stream_delay_ms", {}).get("median", "-")
        cpu = paced["calling_thread_cpu_ms"]["median"]
        print(f"{shape:>12} {case['zlib_level']:>4} {calling['median']:>9} {cpu:>7} {calling['p99']:>8} "
              f"{calling['max']:>8} {stream:>9} {paced['dropped']:>10} "
              f"{burst['dropped']:>4}/{burst['captures']:<5} {writer['raw_mb_per_s']:>9} "
              f"{writer['stored_mb_per_s']:>11} "
              f"{paced['checked'] - paced['mismatched']}/{paced['checked']:<5}")
    verdict = {True: "met", False: "NOT met", None: "not measured (needs the GPU)"}
    print(f"# goal: median <= {GOAL_MEDIAN_MS} ms at {GOAL_SHAPE[0]}x{GOAL_SHAPE[1]} and no "
          f"paced drop: {verdict[results['goal']['met']]}")


def main():
    arguments = parse_arguments()
    if arguments.switch_interval:
        sys.setswitchinterval(arguments.switch_interval)
    use_cuda = False
    if not arguments.numpy:
        try:
            import torch
            use_cuda = torch.cuda.is_available()
        except ImportError:
            pass
    shapes = [tuple(int(x) for x in s.split("x")) for s in arguments.shapes.split(",")]
    levels = [int(x) for x in arguments.levels.split(",")]
    directory = arguments.dir or tempfile.mkdtemp(prefix="hook-overhead.")
    os.makedirs(directory, exist_ok=True)
    results = {"schema": "dsatopk-capture/hook-overhead", "version": 1,
               "context": context(use_cuda),
               "settings": {"interval_ms": arguments.interval_ms,
                            "paced_captures": arguments.captures, "burst": arguments.burst,
                            "warmup": arguments.warmup, "fsync": arguments.fsync,
                            "fsync_interval": arguments.fsync_interval,
                            "compress_threads": arguments.compress_threads,
                            "reserve": arguments.reserve,
                            "switch_interval_s": sys.getswitchinterval()},
               "cases": []}
    try:
        try:
            results["engines"] = engine_recipes(use_cuda, directory)
        except Exception as error:  # noqa: BLE001 -- reported, the measurement goes on
            results["engines"] = {"ok": False, "error": f"{type(error).__name__}: {error}",
                                  "traceback": traceback.format_exc()}
        print(f"# engine recipes: {'ok' if results['engines']['ok'] else results['engines']}",
              file=sys.stderr, flush=True)
        for shape in shapes:
            for level in levels:
                case = run_case(shape, level, arguments, use_cuda, directory)
                results["cases"].append(case)
                print(f"# {shape[0]}x{shape[1]} zlib {level}: "
                      f"{case['error'] or 'done'}", file=sys.stderr, flush=True)
    finally:
        if not arguments.dir:
            shutil.rmtree(directory, ignore_errors=True)
    goal_cases = [c for c in results["cases"] if (c["rows"], c["row_length"]) == GOAL_SHAPE
                  and not c["error"]]
    met = None
    if goal_cases and use_cuda:
        met = all(c["paced"]["calling_thread_ms"]["median"] <= GOAL_MEDIAN_MS and
                  c["paced"]["dropped"] == 0 and c["paced"]["mismatched"] == 0
                  for c in goal_cases)
    results["goal"] = {"median_ms_max": GOAL_MEDIAN_MS, "shape": list(GOAL_SHAPE), "met": met}
    print_table(results)
    if arguments.out:
        with open(arguments.out, "w") as f:
            json.dump(results, f, indent=1)
    failed = not results["engines"]["ok"] or \
        any(c["error"] or c["paced"]["mismatched"] for c in results["cases"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
