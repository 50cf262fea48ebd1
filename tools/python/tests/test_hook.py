"""CaptureHook on numpy arrays: numbering, input checks, sampling, the bounded queue, rotation,
the tail check, fork and exit."""

import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings
from unittest import mock

import numpy as np

import dsatopk_capture
from dsatopk_capture import CaptureError, CaptureHook, CaptureInputError, read_records
from dsatopk_capture import staging, writer


def scores_of(rows=4, width=64, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, width)).astype(np.float32)


class HookTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name="caps.bin"):
        return os.path.join(self.dir.name, name)

    def hook(self, name="caps.bin", **options):
        options.setdefault("compress", False)
        hook = CaptureHook(self.path(name), rank=0, **options)
        self.addCleanup(hook.close)
        return hook

    def records(self, name="caps.bin"):
        return list(read_records(self.path(name)))


class Numbering(HookTest):
    def test_call_record_and_refusals(self):
        hook = self.hook(metadata={"engine": "test"})
        self.assertTrue(hook.capture(scores_of(), [64] * 4, 8, layer=0))
        with self.assertRaisesRegex(CaptureInputError, "float64"):
            hook.capture(np.zeros((4, 64)), [64] * 4, 8)
        self.assertTrue(hook.capture(scores_of(), [64] * 4, 8, layer=2))
        hook.close()
        records = self.records()
        self.assertEqual([(r.metadata["call"], r.metadata["record"]) for r in records],
                         [(0, 0), (2, 1)])
        self.assertEqual(records[0].metadata["engine"], "test")
        stats = hook.stats()
        self.assertEqual((stats["calls"], stats["records"], stats["refused"]), (3, 2, 1))
        with self.assertRaisesRegex(RuntimeError, "closed"):
            hook.capture(scores_of(), [64] * 4, 8)

    def test_reserved_keys(self):
        hook = self.hook()
        with self.assertRaisesRegex(CaptureInputError, "'call' is written by the hook"):
            hook.capture(scores_of(), [64] * 4, 8, call=5)

    def test_context(self):
        hook = self.hook()
        with hook.context(layer=5, step=1):
            with hook.context(step=2):
                hook.capture(scores_of(), [64] * 4, 8)
        hook.capture(scores_of(), [64] * 4, 8)
        hook.close()
        self.assertEqual([(r.metadata.get("layer"), r.metadata.get("step"))
                          for r in self.records()], [(5, 2), (None, None)])


class InputChecks(HookTest):
    def test_layouts_are_copied_contiguous_and_now(self):
        hook = self.hook()
        base = scores_of(8, 64)
        fortran = np.asfortranarray(base)
        strided = scores_of(8, 128)[:, ::2]
        flipped = base[::-1]
        engine = np.arange(8 * 4, dtype=np.int64).reshape(8, 4) % 64
        for array in (fortran, strided, flipped):
            hook.capture(array, np.full(8, 64), 4, engine_indices=engine.T.copy().T)
        expected = [np.ascontiguousarray(a).copy() for a in (fortran, strided, flipped)]
        base[:] = 0           # the engine reuses its buffers right after the call
        engine[:] = -1
        hook.close()
        for record, want in zip(self.records(), expected):
            self.assertEqual(record.scores.tobytes(), want.tobytes())
            self.assertEqual(record.engine_indices.tolist(),
                             (np.arange(32).reshape(8, 4) % 64).tolist())

    def test_dtypes(self):
        hook = self.hook()
        cases = [
            (dict(scores=np.zeros((2, 8))), "scores: dtype float64.*narrowing"),
            (dict(scores=np.zeros((2, 8), np.int32)), "scores: dtype int32"),
            (dict(lengths=np.array([8.0, 8.0])), "lengths: dtype float64; integers"),
            (dict(engine_indices=np.zeros((2, 4), bool)), "engine_indices: dtype bool"),
            (dict(engine_indices=np.zeros((2, 5), np.int32)), r"shape \(2, 5\), expected"),
            (dict(lengths=[8, 9]), "row 1: window \\[0, 9\\) ends past row_stride 8"),
            (dict(scores=np.zeros((8,), np.float32)), "a 2-D array"),
            (dict(engine_indices=np.full((2, 4), 2**40)), "outside int32"),
        ]
        for changes, pattern in cases:
            arguments = dict(scores=np.zeros((2, 8), np.float32), lengths=[8, 8], k=4)
            arguments.update(changes)
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(CaptureInputError, pattern):
                    hook.capture(**arguments)
        self.assertEqual(hook.stats()["refused"], len(cases))

    def test_k_over_row(self):
        with self.assertRaisesRegex(CaptureInputError, r"k 16 > row length 8.*allow_k_over_row"):
            self.hook().capture(np.zeros((2, 8), np.float32), [8, 8], 16)
        hook = self.hook("padded.bin", allow_k_over_row=True)
        self.assertTrue(hook.capture(np.zeros((2, 8), np.float32), [8, 3], 16,
                                     engine_indices=np.full((2, 16), -1)))
        hook.close()
        self.assertEqual(self.records("padded.bin")[0].k, 16)

    def test_half_precision_widened_exactly(self):
        hook = self.hook()
        half = scores_of(3, 32).astype(np.float16)
        hook.capture(half, [32, 32, 32], 4)
        hook.close()
        self.assertEqual(self.records()[0].scores.tobytes(),
                         half.astype(np.float32).tobytes())

    def test_contract(self):
        with self.assertRaisesRegex(ValueError, "contract order 'ascending'"):
            self.hook(contract={"order": "ascending", "tie_break": "small"})
        hook = self.hook(contract={"order": "index_ascending", "tie_break": "small"})
        hook.capture(scores_of(), [64] * 4, 8)
        hook.capture(scores_of(), [64] * 4, 8, contract={"order": "none", "tie_break": "none"})
        with self.assertRaisesRegex(CaptureInputError, "tie_break"):
            hook.capture(scores_of(), [64] * 4, 8, contract={"order": "none", "tie_break": "x"})
        hook.close()
        self.assertEqual([r.metadata["contract"] for r in self.records()],
                         [{"order": "index_ascending", "tie_break": "small"},
                          {"order": "none", "tie_break": "none"}])


class Sampling(HookTest):
    def kept(self, hook, calls, **metadata_of):
        for call in range(calls):
            metadata = {key: f(call) for key, f in metadata_of.items()}
            hook.capture(scores_of(2, 16, call), [16, 16], 4, **metadata)
        hook.close()
        return [r.metadata["call"] for r in read_records(hook.path)]

    def test_every(self):
        self.assertEqual(self.kept(self.hook(every=3), 8), [0, 3, 6])

    def test_layers_and_steps(self):
        hook = self.hook(layers=[1, 2], steps=(1, 2), every=2)
        # call c: layer c % 3, step c // 3; eligible: steps 1..2, layers 1, 2 -> calls 4, 5, 7,
        # 8; every=2 keeps the first and third of them.
        self.assertEqual(self.kept(hook, 12, layer=lambda c: c % 3, step=lambda c: c // 3),
                         [4, 7])
        hook = self.hook("nolayer.bin", layers=[0])
        with self.assertRaisesRegex(CaptureInputError, "no layer="):
            hook.capture(scores_of(), [64] * 4, 8)

    def test_probability_is_seeded(self):
        runs = [self.kept(self.hook(f"p{i}.bin", probability=0.5, seed=seed), 40)
                for i, seed in enumerate((7, 7, 8))]
        self.assertEqual(runs[0], runs[1])
        self.assertNotEqual(runs[0], runs[2])
        self.assertTrue(5 < len(runs[0]) < 35, runs[0])

    def test_row_cap(self):
        hook = self.hook(max_rows=3)
        scores = scores_of(8, 16)
        lengths = np.arange(9, 17)
        engine = np.tile(np.arange(4), (8, 1)) + np.arange(8)[:, None]
        hook.capture(scores, lengths, 4, row_starts=np.zeros(8, int), engine_indices=engine)
        hook.capture(scores[:3], lengths[:3], 4)
        hook.close()
        capped, whole = self.records()
        self.assertEqual((capped.metadata["rows_total"], capped.metadata["rows_kept"]),
                         (8, [0, 3, 6]))
        self.assertEqual(capped.scores.tobytes(), scores[[0, 3, 6]].tobytes())
        self.assertEqual(capped.lengths.tolist(), [9, 12, 15])
        self.assertEqual(capped.engine_indices[:, 0].tolist(), [0, 3, 6])
        self.assertNotIn("rows_kept", whole.metadata)


class SlowDisk:
    """write_all that sleeps first: a writer slower than the caller."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.real = writer.write_all

    def __call__(self, fd, *parts):
        time.sleep(self.seconds)
        return self.real(fd, *parts)


class Queue(HookTest):
    def test_burst_drops_are_counted_and_reported(self):
        with mock.patch.object(writer, "write_all", SlowDisk(0.05)):
            hook = self.hook(queue_records=2)
            accepted = [hook.capture(scores_of(2, 16, i), [16, 16], 4) for i in range(10)]
            hook.flush()
            hook.capture(scores_of(2, 16), [16, 16], 4)   # carries the last drops
            hook.close()
        stats = hook.stats()
        self.assertGreater(stats["dropped"], 0)
        self.assertEqual(stats["dropped"], accepted.count(False))
        records = self.records()
        self.assertEqual(len(records), stats["records"])
        self.assertEqual(stats["records"] + stats["dropped"], stats["calls"])
        self.assertEqual(sum(r.metadata["dropped"] for r in records), stats["dropped"])
        calls = [r.metadata["call"] for r in records]
        for previous, record in zip(calls, records[1:]):
            self.assertEqual(record.metadata["call"] - previous - 1, record.metadata["dropped"])

    def test_byte_budget(self):
        with mock.patch.object(writer, "write_all", SlowDisk(0.05)):
            hook = self.hook(queue_bytes=3 * (2 * 16 * 4 + 2 * 4))
            lengths = np.array([16, 16], np.int32)
            accepted = [hook.capture(scores_of(2, 16, i), lengths, 4) for i in range(8)]
            hook.close()
        self.assertEqual(accepted[:3], [True] * 3)
        self.assertIn(False, accepted)

    def test_block_waits_instead(self):
        with mock.patch.object(writer, "write_all", SlowDisk(0.01)):
            hook = self.hook(queue_records=1, block=True)
            self.assertTrue(all(hook.capture(scores_of(2, 16, i), [16, 16], 4)
                                for i in range(6)))
            hook.close()
        self.assertEqual((hook.stats()["dropped"], len(self.records())), (0, 6))

    def test_flush_timeout(self):
        with mock.patch.object(writer, "write_all", SlowDisk(0.3)):
            hook = self.hook()
            hook.capture(scores_of(), [64] * 4, 8)
            self.assertFalse(hook.flush(timeout=0.01))
            self.assertTrue(hook.flush())
            hook.close()

    def test_compress_threads_keep_call_order(self):
        hook = self.hook(compress=True, compress_threads=3)
        for i in range(12):
            hook.capture(scores_of(8, 512 * (1 + i % 3), i), [512] * 8, 8, layer=i)
        hook.close()
        records = self.records()
        self.assertEqual([r.metadata["layer"] for r in records], list(range(12)))
        self.assertTrue(all(r.compressed for r in records))

    def test_values_refused_by_the_writer(self):
        # What the writer does when values still on the GPU at call time turn out invalid.
        hook = self.hook()
        staged = staging.Staged(0, 4, 0, {}, 80, 2, 1)
        staged.arrays = {"scores": np.zeros((2, 8), np.float32),
                         "lengths": np.array([8, 9], np.int32)}
        staged.dropped_before = 2
        hook._reserve(80)
        with hook._mutex:
            hook._counts["queued"] += 1
        with self.assertLogs("dsatopk_capture", "WARNING") as logged:
            hook._writer.put(staged)
            hook.flush()
        self.assertIn("ends past row_stride", logged.output[0])
        hook.capture(scores_of(), [64] * 4, 8)
        hook.close()
        self.assertEqual(hook.stats()["rejected"], 1)
        self.assertEqual(self.records()[0].metadata["dropped"], 2)


class FsyncRecorder:
    """os.fsync that notes the thread it ran on."""

    def __init__(self):
        self.real = os.fsync
        self.threads = []

    def __call__(self, fd):
        self.threads.append(threading.current_thread().name)
        return self.real(fd)


class Fsync(HookTest):
    def captured(self, calls=3, wait=0.0, **options):
        recorder = FsyncRecorder()
        with mock.patch.object(os, "fsync", recorder):
            hook = self.hook(**options)
            for i in range(calls):
                hook.capture(scores_of(2, 16, i), [16, 16], 4, layer=i)
            self.assertTrue(hook.flush() if wait == "flush" else True)
            time.sleep(wait if wait != "flush" else 0)
            before_close = list(recorder.threads)
            hook.close()
        return hook, before_close, recorder.threads

    def test_record_syncs_each_record_on_the_writer(self):
        hook, _, threads = self.captured(fsync="record")
        self.assertEqual(threads, ["dsatopk-writer"] * 3)
        self.assertEqual(hook.stats()["fsync"], "record")

    def test_interval_syncs_off_the_writer(self):
        _, before_close, threads = self.captured(fsync="interval", fsync_interval=0.05,
                                                 wait=0.5)
        self.assertTrue(before_close)                 # without flush or close
        self.assertEqual(set(threads), {"dsatopk-fsync"})

    def test_default_is_interval_and_flush_syncs(self):
        hook, before_close, _ = self.captured(wait="flush")
        self.assertEqual(hook.stats()["fsync"], "interval")
        self.assertTrue(before_close)

    def test_close_syncs_at_flush_and_close_only(self):
        _, before_close, threads = self.captured(fsync="close", wait=0.3)
        self.assertEqual(before_close, [])
        self.assertEqual(threads, ["dsatopk-fsync"])
        _, before_close, _ = self.captured(fsync="close", wait="flush")
        self.assertEqual(before_close, ["dsatopk-fsync"])

    def test_none_never_syncs(self):
        for setting in ("none", False):
            hook, _, threads = self.captured(fsync=setting, wait="flush")
            self.assertEqual((threads, hook.stats()["fsync"]), ([], "none"))

    def test_policy_is_checked(self):
        with self.assertRaisesRegex(ValueError, "fsync: 'sometimes': one of record, interval"):
            self.hook(fsync="sometimes")
        with self.assertRaisesRegex(ValueError, "fsync_interval"):
            self.hook(fsync_interval=0)
        self.assertEqual(self.hook(fsync=True).stats()["fsync"], "record")

    def test_rotated_files_are_synced_and_closed(self):
        descriptors = len(os.listdir("/proc/self/fd"))
        recorder = FsyncRecorder()
        with mock.patch.object(os, "fsync", recorder):
            hook = self.hook(max_file_bytes=600, fsync_interval=0.01)
            for i in range(5):
                hook.capture(scores_of(2, 64, i), [64, 64], 4, layer=i)
                hook.flush()
            hook.close()
        self.assertEqual(len(hook.paths), 5)
        self.assertGreaterEqual(len(recorder.threads), 5)
        self.assertEqual(len(os.listdir("/proc/self/fd")), descriptors)


class Rotation(HookTest):
    def test_numbered_files(self):
        hook = self.hook(max_file_bytes=2500)
        sizes = []
        for i in range(7):
            hook.capture(scores_of(2, 128, i), [128, 128], 4, layer=i)
        hook.capture(scores_of(4, 512), [512] * 4, 4, layer=7)    # over the cap: a file alone
        hook.close()
        paths = hook.paths
        self.assertEqual(paths[:2], [self.path("caps.bin"), self.path("caps.1.bin")])
        layers = []
        records = []
        for path in paths:
            sizes.append(os.path.getsize(path))
            for record in read_records(path):
                layers.append(record.metadata["layer"])
                records.append(record.metadata["record"])
        self.assertEqual(layers, list(range(8)))
        self.assertEqual(records, list(range(8)))
        self.assertTrue(all(size <= 2500 for size in sizes[:-1]), sizes)
        self.assertGreater(sizes[-1], 2500)
        self.assertEqual(len(list(read_records(paths[-1]))), 1)


class Tail(HookTest):
    def torn_file(self):
        hook = self.hook()
        for i in range(2):
            hook.capture(scores_of(2, 16, i), [16, 16], 4)
        hook.close()
        path = self.path()
        good = os.path.getsize(path)
        with open(path, "ab") as f:
            f.write(b"DSATOPK\n\x01\x00")
        return path, good

    def test_refuses_a_torn_tail(self):
        path, good = self.torn_file()
        with self.assertRaises(CaptureError) as caught:
            CaptureHook(path, rank=0)
        message = str(caught.exception)
        self.assertTrue(message.startswith(
            f"refusing to append: {path} ends in a torn record at byte {good} ("), message)
        self.assertIn(f"truncate -s {good} {path}", message)

    def test_repairs_when_asked(self):
        path, good = self.torn_file()
        with self.assertLogs("dsatopk_capture", "WARNING"):
            hook = CaptureHook(path, rank=0, repair_tail=True, compress=False)
        hook.capture(scores_of(2, 16, 5), [16, 16], 4)
        hook.close()
        self.assertEqual([r.offset for r in read_records(path)][2], good)


class ForkAndExit(HookTest):
    def test_child_gets_no_live_writer(self):
        with mock.patch.object(writer, "write_all", SlowDisk(0.05)):
            hook = self.hook("parent-{pid}.bin")
            for i in range(4):   # still queued when the process forks
                hook.capture(scores_of(2, 16, i), [16, 16], 4, who="parent")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
                child = os.fork()
            if child == 0:
                status = 1
                try:
                    fresh = hook.stats()
                    ok = fresh["calls"] == 0 and fresh["in_flight"] == 0
                    hook.capture(scores_of(2, 16), [16, 16], 4, who="child")
                    hook.close()
                    mine = list(read_records(hook.path))
                    ok = ok and hook.path.endswith(f"parent-{os.getpid()}.bin") and \
                        [r.metadata["who"] for r in mine] == ["child"] and \
                        mine[0].metadata["call"] == 0
                    status = 0 if ok else 1
                finally:
                    os._exit(status)
            _, status = os.waitpid(child, 0)
            hook.close()
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        parents = list(read_records(hook.path))
        self.assertEqual([r.metadata["who"] for r in parents], ["parent"] * 4)
        children = [n for n in os.listdir(self.dir.name) if n != os.path.basename(hook.path)]
        self.assertEqual(len(children), 1)

    def test_exit_flushes(self):
        path = self.path("exit.bin")
        script = (
            "import sys, numpy as np\n"
            "from dsatopk_capture import CaptureHook\n"
            "hook = CaptureHook(sys.argv[1], rank=0)\n"
            "for i in range(3):\n"
            "    hook.capture(np.ones((2, 4096), np.float32), [4096, 4096], 8, layer=i)\n")
        environment = dict(os.environ)
        package = os.path.dirname(os.path.dirname(os.path.abspath(dsatopk_capture.__file__)))
        environment["PYTHONPATH"] = package + os.pathsep + environment.get("PYTHONPATH", "")
        subprocess.run([sys.executable, "-c", script, path], check=True, env=environment)
        self.assertEqual([r.metadata["layer"] for r in read_records(path)], [0, 1, 2])


class TorchCpu(HookTest):
    def test_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        hook = self.hook()
        scores = torch.randn(3, 64).to(torch.bfloat16)
        expected = scores.float().numpy().tobytes()
        hook.capture(scores, torch.tensor([64, 10, 0]), 8,
                     engine_indices=torch.zeros(3, 8, dtype=torch.int32))
        scores.fill_(0)
        hook.close()
        self.assertEqual(self.records()[0].scores.tobytes(), expected)


if __name__ == "__main__":
    unittest.main()
