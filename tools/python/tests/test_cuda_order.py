"""The CUDA path's ordering, against a stand-in for the few torch calls it makes (the real thing
runs on a GPU: scripts/hook-overhead.py). What must hold: the copies go asynchronously to pinned
host memory after the producer and before the engine's later work: on the caller's stream
itself (guard), or, with guard=False, on a side stream that first waits on an event recorded on
the caller's stream, the tensors marked used there, and no wait on the caller's stream; an
event is recorded after the copies; the calling thread never synchronises; the writer
synchronises on that event before reading the host memory."""

import contextlib
import os
import sys
import tempfile
import threading
import time
import types
import unittest
from unittest import mock

import numpy as np

from dsatopk_capture import CaptureHook, pinned, read_records


class Log(list):
    def add(self, *entry):
        self.append(entry + (threading.current_thread().name,))


def fake_torch(log):
    torch = types.ModuleType("torch")

    class Dtype:
        def __init__(self, name, numpy_type):
            self.name, self.numpy_type = name, np.dtype(numpy_type)

        def __str__(self):
            return "torch." + self.name

    dtypes = {np.dtype(np.float32): Dtype("float32", np.float32),
              np.dtype(np.int32): Dtype("int32", np.int32),
              np.dtype(np.int64): Dtype("int64", np.int64),
              np.dtype(np.uint8): Dtype("uint8", np.uint8)}

    class Tensor:
        def __init__(self, array, device="cuda:0", pinned=False):
            self.array, self.device, self.pinned = array, device, pinned
            self.dtype = dtypes[array.dtype]

        is_cuda = property(lambda self: self.device.startswith("cuda"))
        shape = property(lambda self: self.array.shape)
        ndim = property(lambda self: self.array.ndim)

        def detach(self):
            return self

        def __getitem__(self, key):
            return Tensor(self.array[key], self.device, self.pinned)

        def narrow(self, dim, start, length):
            assert dim == 0
            return self[start:start + length]

        def view(self, how):
            array = self.array.view(how.numpy_type) if isinstance(how, Dtype) else \
                self.array.reshape(how)
            return Tensor(array, self.device, self.pinned)

        def numel(self):
            return self.array.size

        def element_size(self):
            return self.array.itemsize

        def record_stream(self, stream):
            log.add("record_stream", stream.name)

        def copy_(self, source, non_blocking=False):
            log.add("copy", torch.cuda._current.name, non_blocking, self.pinned)
            self.array[...] = source.array

        def numpy(self):
            assert not self.is_cuda
            return self.array

    class Stream:
        def __init__(self, name):
            self.name = name

        def wait_event(self, event):
            log.add("wait", self.name, event.name)

    class Event:
        count = 0

        def __init__(self):
            Event.count += 1
            self.name = f"event{Event.count}"

        def record(self, stream=None):
            log.add("record", self.name, (stream or torch.cuda._current).name)

        def synchronize(self):
            log.add("synchronize", self.name)

    def empty(shape, dtype=None, pin_memory=False):
        torch.allocations.append((threading.current_thread().name, pin_memory))
        return Tensor(np.empty(shape, dtype.numpy_type), "cpu", pin_memory)

    cuda = types.SimpleNamespace(capturing=False)
    main = Stream("main")
    cuda._current = main
    cuda.current_stream = lambda device=None: main
    cuda.Stream = lambda device=None: Stream("side")
    cuda.Event = Event
    cuda.is_current_stream_capturing = lambda: cuda.capturing

    @contextlib.contextmanager
    def stream(chosen):
        previous, cuda._current = cuda._current, chosen
        try:
            yield
        finally:
            cuda._current = previous

    cuda.stream = stream
    torch.Tensor, torch.empty, torch.cuda = Tensor, empty, cuda
    torch.uint8, torch.allocations = dtypes[np.dtype(np.uint8)], []
    return torch


class StandIn(unittest.TestCase):
    def setUp(self):
        if "torch" in sys.modules:
            self.skipTest("the real torch is imported; the stand-in cannot replace it")
        self.log = Log()
        self.torch = fake_torch(self.log)
        patcher = mock.patch.dict(sys.modules, {"torch": self.torch})
        patcher.start()
        self.addCleanup(patcher.stop)
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def arrays(self, lengths=(16, 16)):
        Tensor = self.torch.Tensor
        return (Tensor(np.arange(32, dtype=np.float32).reshape(2, 16)),
                Tensor(np.array(lengths, np.int32)), Tensor(np.zeros((2, 4), np.int64)))

    def capture(self, lengths=(16, 16), reserve=True, **options):
        hook = CaptureHook(os.path.join(self.dir.name, "c.bin"), rank=0, compress=False,
                           **options)
        self.addCleanup(hook.close)
        scores, lengths, indices = self.arrays(lengths)
        if reserve:
            self.assertEqual(hook.reserve_pinned(scores, lengths, engine_indices=indices,
                                                 count=1), 1)
        kept = hook.capture(scores, lengths, 4, engine_indices=indices)
        hook.flush()
        return hook, kept


class CudaOrder(StandIn):
    def test_ordering(self):
        hook, kept = self.capture()
        self.assertTrue(kept)
        caller = threading.current_thread().name
        mine = [entry[:-1] for entry in self.log if entry[-1] == caller]
        self.assertEqual(mine, [
            ("copy", "main", True, True),            # scores, lengths, engine indices:
            ("copy", "main", True, True),            #   asynchronous, to pinned memory, on
            ("copy", "main", True, True),            #   the caller's stream: after the
                                                     #   producer, before the engine's next work
            ("record", "event1", "main"),            # after the copies
        ])
        writer = [entry for entry in self.log if entry[-1] != caller]
        self.assertEqual([entry[:2] for entry in writer], [("synchronize", "event1")])
        hook.close()
        (record,) = read_records(hook.path)
        self.assertEqual(record.scores.tolist(), np.arange(32).reshape(2, 16).tolist())

    def test_unguarded(self):
        self.capture(guard=False)
        caller = threading.current_thread().name
        mine = [entry[:-1] for entry in self.log if entry[-1] == caller]
        self.assertEqual(mine, [
            ("record", "event1", "main"),            # after the producer, on its stream
            ("wait", "side", "event1"),              # the side stream waits for it
            ("copy", "side", True, True),            # each copy on the side stream, its
            ("record_stream", "side"),               #   tensor marked used there
            ("copy", "side", True, True),
            ("record_stream", "side"),
            ("copy", "side", True, True),
            ("record_stream", "side"),
            ("record", "event2", "side"),            # after the copies; the caller's stream
        ])                                           #   does not wait for them
        writer = [entry for entry in self.log if entry[-1] != caller]
        self.assertEqual([entry[:2] for entry in writer], [("synchronize", "event2")])

    def test_graph_capture_skips(self):
        self.torch.cuda.capturing = True
        hook, kept = self.capture()
        self.assertFalse(kept)
        self.assertEqual(hook.stats()["skipped_graph"], 1)
        self.assertEqual(self.log, [])

    def test_values_checked_by_the_writer(self):
        with self.assertLogs("dsatopk_capture", "WARNING") as logged:
            hook, kept = self.capture(lengths=(16, 17))
        self.assertTrue(kept)            # the values were on the GPU at call time
        self.assertIn("row 1: window [0, 17) ends past row_stride 16", logged.output[0])
        self.assertEqual((hook.stats()["rejected"], hook.stats()["records"]), (1, 0))



class PinnedMemory(StandIn):
    """The calling thread never pins memory (cudaHostAlloc blocks it for milliseconds): the
    buffers come from a pool grown on a thread of its own, ahead of demand."""

    def allocations(self, thread=None):
        return [name for name, pinned in self.torch.allocations
                if pinned and (thread is None or name == thread)]

    def wait_for_pool(self, hook, buffers):
        deadline = time.monotonic() + 10
        while hook.stats()["pinned_buffers"] < buffers and time.monotonic() < deadline:
            time.sleep(0.005)

    def test_a_miss_drops_and_the_pool_grows_off_the_caller(self):
        hook, kept = self.capture(reserve=False)
        self.assertFalse(kept)
        stats = hook.stats()
        self.assertEqual((stats["dropped"], stats["dropped_no_pinned"]), (1, 1))
        self.wait_for_pool(hook, 3)      # one buffer per array
        self.assertTrue(hook.capture(*self.arrays()[:2], 4, engine_indices=self.arrays()[2]))
        hook.close()
        self.assertEqual(self.allocations(threading.current_thread().name), [])
        self.assertTrue(self.allocations("dsatopk-pinned"))
        (record,) = read_records(hook.path)
        self.assertEqual((record.metadata["call"], record.metadata["dropped"]), (1, 1))

    def test_a_spare_follows_each_call(self):
        hook, kept = self.capture()
        self.assertTrue(kept)
        self.wait_for_pool(hook, 6)      # 3 reserved (one per array), 3 spare
        self.assertEqual(hook.stats()["pinned_buffers"], 6)
        self.assertEqual(self.allocations(threading.current_thread().name), [])

    def test_block_waits_for_the_pool(self):
        hook, kept = self.capture(reserve=False, block=True)
        self.assertTrue(kept)
        self.assertEqual(hook.stats()["dropped"], 0)
        self.assertEqual(self.allocations(threading.current_thread().name), [])

    def test_buffers_are_reused(self):
        hook, _ = self.capture()
        for _ in range(20):
            scores, lengths, indices = self.arrays()
            self.assertTrue(hook.capture(scores, lengths, 4, engine_indices=indices))
            hook.flush()
        stats = hook.stats()
        self.assertLessEqual(stats["pinned_allocated"], 6)
        self.assertEqual(stats["records"], 21)

    def test_limit_lets_go_of_idle_sizes(self):
        pool = pinned.PinnedPool(limit_bytes=3 * pinned.SMALLEST_BYTES)
        self.addCleanup(pool.close)
        self.assertEqual(pool.reserve([1000], 2), 2)
        self.assertEqual(pool.stats()["pinned_bytes"], 2 * pinned.SMALLEST_BYTES)
        taken = pool.take([1000])
        self.assertIsNotNone(taken)
        bigger = 2 * pinned.SMALLEST_BYTES
        self.assertIsNone(pool.take([bigger]))     # no room until the free small one goes
        deadline = time.monotonic() + 10
        while pool.take([bigger]) is None and time.monotonic() < deadline:
            time.sleep(0.005)
        self.assertEqual(pool.stats()["pinned_bytes"], 3 * pinned.SMALLEST_BYTES)
        pool.give(taken)

    def test_size_classes(self):
        self.assertEqual(pinned.size_class(1), pinned.SMALLEST_BYTES)
        self.assertEqual(pinned.size_class(32 << 20), 32 << 20)
        self.assertEqual(pinned.size_class((32 << 20) + 1), 64 << 20)


if __name__ == "__main__":
    unittest.main()
