"""Host copies of a call's arrays: what must happen on the caller's thread before the engine
reuses its buffers, and nothing more.

- numpy arrays (and torch CPU tensors): copied now, C-contiguous, whatever their layout.
- torch CUDA tensors: an asynchronous device-to-pinned-host copy, ordered after the producer
  (the top-k kernel, on the caller's current stream) so that it sees what the kernel read and
  wrote. By default (guard) the copies are queued on the caller's stream itself: a later
  kernel of the engine that overwrites these buffers runs after they were read, by the
  stream's own order. A side stream ordered by events would give the engine the same wait on
  the GPU and cost the calling thread two events, a wait, a stream switch and their look-ups,
  about a fifth of a capture's 0.5 ms on the H200 (docs/PERF.md). With guard=False the copies
  run on a side stream that waits on an event recorded on the caller's stream, and the engine's
  stream does not wait for them. Either way the calling thread never synchronises, and never
  pins memory (the buffers come from a PinnedPool, pinned.py); the writer thread waits for the
  event recorded after the copies before it reads the host memory.

PyTorch is never imported here: a tensor can only come from a process that already imported
it, so the module is looked up in sys.modules.
"""

import sys

import numpy as np

from .pinned import PinnedPool
from .records import CaptureInputError

ARRAY_NAMES = ("scores", "lengths", "row_starts", "page_table", "page_table_row_starts",
               "engine_indices")
FLOAT_WIDENED = ("float16", "bfloat16")   # every value is an fp32 value: widening is exact


def torch_module():
    """The torch module when this process imported it, else None (never imports it)."""
    return sys.modules.get("torch")


def is_tensor(value):
    torch = torch_module()
    return torch is not None and isinstance(value, torch.Tensor)


_DTYPE_NAMES = {}   # dtype -> its name: str(torch dtype) costs microseconds a call


def dtype_name(value):
    dtype = value.dtype
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = (str(dtype).replace("torch.", "") if is_tensor(value)
                                      else np.dtype(dtype).name)
    return name


def as_described(name, value):
    """value as something with .shape, .dtype, .ndim (a tensor or an ndarray)."""
    if is_tensor(value) or isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as error:
        raise CaptureInputError(f"{name}: cannot be read as an array: {error}") from None


def check_dtype(name, value):
    """Refuses dtypes the format cannot store exactly, naming the fix."""
    kind = dtype_name(value)
    if name == "scores":
        if kind == "float32" or kind in FLOAT_WIDENED:
            return
        fix = ("narrowing float64 would change the values: pass the float32 scores the kernel "
               "read" if kind == "float64" else "pass the float32 scores the kernel read")
        raise CaptureInputError(f"scores: dtype {kind}; the capture stores float32 (float16 and "
                                f"bfloat16 are widened exactly): {fix}")
    if not (kind.startswith("int") or kind.startswith("uint")):
        raise CaptureInputError(f"{name}: dtype {kind}; integers expected (int32 or int64 "
                                f"values within int32)")


def nbytes_of(value, rows_step):
    """Bytes of the host copy of value with every rows_step-th row kept."""
    shape = tuple(value.shape)
    rows = -(-shape[0] // rows_step) if shape else 1
    count = rows
    for extent in shape[1:]:
        count *= extent
    itemsize = value.element_size() if is_tensor(value) else np.dtype(value.dtype).itemsize
    return count * itemsize


def _host_copy_now(name, value, rows_step):
    """A C-contiguous host numpy copy made now (numpy arrays, torch CPU tensors)."""
    if is_tensor(value):
        value = value.detach()
        if rows_step > 1:
            value = value[::rows_step]
        if str(value.dtype) == "torch.bfloat16":
            # numpy has no bfloat16: keep the bits, the writer widens them.
            return np.array(value.view(torch_module().int16).numpy(), order="C",
                            copy=True).view(np.uint16), "bfloat16"
        return np.array(value.numpy(), order="C", copy=True), None
    if rows_step > 1:
        value = value[::rows_step]
    return np.array(value, order="C", copy=True), None


class Staged:
    """One call on its way to the writer: host copies (numpy, or pinned torch tensors until the
    `done` event fires), the call's number, its metadata and how many bytes it holds."""

    __slots__ = ("call", "k", "page_size", "arrays", "bits", "done", "nbytes", "metadata",
                 "checked", "dropped_before", "rows_total", "rows_step", "pinned")

    def __init__(self, call, k, page_size, metadata, nbytes, rows_total, rows_step):
        self.call = call
        self.k = k
        self.page_size = page_size
        self.arrays = {}
        self.bits = {}       # name -> "bfloat16" where the array holds raw bfloat16 bits
        self.done = None
        self.pinned = None   # the PinnedPool buffers the CUDA copies went to
        self.nbytes = nbytes
        self.metadata = metadata
        self.checked = None  # the PreparedRecord when the values were checked on the caller
        self.dropped_before = 0
        self.rows_total = rows_total
        self.rows_step = rows_step

    def host_arrays(self):
        """Waits for the asynchronous copies (writer thread) and returns numpy arrays, the
        scores widened to float32."""
        if self.done is not None:
            self.done.synchronize()
            self.done = None
            for name, value in list(self.arrays.items()):
                if is_tensor(value):
                    if str(value.dtype) in ("torch.bfloat16", "torch.float16"):
                        value = value.float()
                    self.arrays[name] = value.numpy()
        scores = self.arrays["scores"]
        if self.bits.get("scores") == "bfloat16":
            scores = (scores.astype(np.uint32) << 16).view(np.float32)
        elif scores.dtype == np.float16:
            scores = scores.astype(np.float32)
        self.arrays["scores"] = scores
        return self.arrays


class CudaStager:
    """The asynchronous copies of CUDA tensors into buffers of a PinnedPool (pinned.py) that
    the calling thread never allocates: on the caller's stream (guard=True), or on one side
    stream per device, ordered after the producer by an event (guard=False)."""

    def __init__(self, guard=True, pinned_limit_bytes=512 << 20):
        self.guard = guard
        self.pinned_limit_bytes = pinned_limit_bytes
        self.reset()

    def stage(self, staged, arrays, sizes, rows_step, wait=False):
        """Starts the copies (sizes: the host bytes of each array, by name); False (nothing
        started) when the pool has no free buffers for them and wait is False."""
        torch = torch_module()
        cuda_names = [name for name, value in arrays.items()
                      if is_tensor(value) and value.is_cuda]
        wanted = [sizes[name] for name in cuda_names]
        buffers = self.pool.take_waiting(wanted) if wait else self.pool.take(wanted)
        if buffers is None:
            return False
        staged.pinned = buffers
        hosts = dict(zip(cuda_names, zip(buffers, wanted)))
        device = arrays[cuda_names[0]].device
        current = torch.cuda.current_stream(device)
        if self.guard:
            self._copy(staged, arrays, hosts, rows_step, None)
            done = torch.cuda.Event()
            done.record(current)
        else:
            side = self._streams.get(device)
            if side is None:
                side = self._streams[device] = torch.cuda.Stream(device)
            produced = torch.cuda.Event()
            produced.record(current)
            side.wait_event(produced)
            with torch.cuda.stream(side):
                self._copy(staged, arrays, hosts, rows_step, side)
                done = torch.cuda.Event()
                done.record(side)
        staged.done = done
        return True

    @staticmethod
    def _copy(staged, arrays, hosts, rows_step, side):
        """Queues each CUDA tensor's copy on the current stream into its pinned buffer, and
        copies the others now. side: the side stream the copies run on (guard=False), else
        None."""
        for name, value in arrays.items():
            if value is None:
                continue
            if name not in hosts:
                staged.arrays[name], bits = _host_copy_now(name, value, rows_step)
                if bits:
                    staged.bits[name] = bits
                continue
            source = value.detach()
            if rows_step > 1:
                source = source[::rows_step]
            buffer, nbytes = hosts[name]
            host = buffer.narrow(0, 0, nbytes).view(source.dtype).view(source.shape)
            host.copy_(source, non_blocking=True)
            if side is not None:
                # The engine may free its tensor now: the allocator must not hand its memory
                # out again before the copy queued on the side stream has run. (On the caller's
                # stream, any later use of the memory is queued after the copy.)
                value.record_stream(side)
            staged.arrays[name] = host

    def release(self, staged):
        """The call's pinned buffers back to the pool (writer thread, once the record is
        written or given up). Buffers of copies that may still be running are not reused."""
        buffers, staged.pinned = staged.pinned, None
        if not buffers:
            return
        if staged.done is not None:       # the writer never waited for these copies
            try:
                staged.done.synchronize()
            except Exception:  # noqa: BLE001 -- a failed copy: let the buffers go
                return
            staged.done = None
        self.pool.give(buffers)

    def reserve(self, arrays, rows_step, count, wait):
        """Pinned buffers for `count` calls with arrays shaped like these (only the CUDA
        tensors, or anything with a shape and dtype, are sized). Returns the calls covered."""
        sizes = [nbytes_of(value, rows_step) for value in arrays.values() if value is not None]
        return self.pool.reserve(sizes, count, wait)

    def reset(self):
        """A fresh state (at construction, and in a forked child: the parent's pool thread
        does not exist there and its buffers are not the child's to use)."""
        self._streams = {}
        self.pool = PinnedPool(self.pinned_limit_bytes)

    def close(self):
        self.pool.close()


def stage_now(staged, arrays, rows_step):
    """Host copies made on the caller's thread (no CUDA tensor among arrays)."""
    for name, value in arrays.items():
        if value is None:
            continue
        staged.arrays[name], bits = _host_copy_now(name, value, rows_step)
        if bits:
            staged.bits[name] = bits


def has_cuda(arrays):
    return any(is_tensor(v) and v.is_cuda for v in arrays.values() if v is not None)


def capturing_graph(arrays):
    """True inside CUDA graph capture, when nothing can be copied."""
    torch = torch_module()
    return torch is not None and has_cuda(arrays) and torch.cuda.is_current_stream_capturing()
