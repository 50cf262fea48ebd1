"""Capture hook: appends the inputs of a serving engine's DSA top-k calls to a capture file
(docs/FORMAT.md), one record per call, for `dsatopk-audit run` to replay later on any GPU.

    from dsatopk_hook import CaptureHook

    hook = CaptureHook("captures/{rank}.bin", metadata={"engine": "sglang", "model": "DeepSeek-V3.2"})
    ...
    hook.capture(scores, lengths, 2048, row_starts=starts, engine_indices=selected, layer=3)

What it guarantees (docs/GATE.md "The capture hook"):

- The arrays are copied to host memory before anything else happens: torch tensors with
  `.detach().to("cpu", copy=True)`, numpy arrays with `np.array(copy=True)`. Fused top-k kernels
  overwrite their buffers in place, so a tensor read later would not be what the kernel saw.
- One file per rank ("{rank}" in the pattern: rank from torch.distributed when it is initialised,
  else the RANK environment variable, else 0), or, when several processes share one file, an
  fcntl lock around each append.
- Each record is encoded completely, then appended with one write (continued only if the kernel
  writes less) and fsync'ed. A process killed mid-append leaves at worst a truncated last record:
  `dsatopk-audit inspect --verify` reports it (exit 3) and every earlier record stays readable.

Only numpy is needed for numpy arrays. PyTorch is never imported here: a tensor can only come
from a process that already imported it, so the module is looked up in sys.modules.

The record encoding is tools/dsatopk_capture.py's (`encode_record`), unchanged.
"""

import fcntl
import os
import sys
import threading

import numpy as np

try:
    from dsatopk_capture import encode_record
except ImportError:  # imported by path, tools/ not on sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dsatopk_capture import encode_record

__all__ = ["CaptureHook", "detect_rank"]


def _torch():
    """The torch module when this process imported it, else None (never imports it)."""
    return sys.modules.get("torch")


def detect_rank():
    """torch.distributed's rank when a process group is initialised, else $RANK, else 0."""
    torch = _torch()
    distributed = getattr(torch, "distributed", None) if torch is not None else None
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        return int(distributed.get_rank())
    rank = os.environ.get("RANK", "")
    if rank.strip():
        try:
            return int(rank)
        except ValueError:
            raise ValueError(f"RANK={rank!r} is not an integer") from None
    return 0


def _is_tensor(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def _host_copy(value, name):
    """A host numpy copy of value, taken now (None stays None)."""
    if value is None:
        return None
    if _is_tensor(value):
        torch = _torch()
        # The copy is ordered after the work queued on the current stream (the one the top-k
        # kernel ran on, where engines call it), so this is what the kernel read (or wrote, for
        # engine indices), not what a later kernel leaves there.
        tensor = value.detach().to("cpu", copy=True)
        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.float()  # exact: every bf16 and fp16 value is an fp32 value
        return tensor.numpy()
    try:
        return np.array(value, copy=True)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: cannot be read as an array: {error}") from None


def _scores_float32(scores):
    if scores.dtype == np.float32:
        return scores
    if (scores.dtype.kind == "f" and scores.dtype.itemsize < 4) or scores.dtype.name == "bfloat16":
        return scores.astype(np.float32)  # widening is exact
    raise ValueError(f"scores: dtype {scores.dtype}; the top-k kernels read fp32 (float16 and "
                     f"bfloat16 are widened exactly, anything else must be converted by the caller)")


class CaptureHook:
    """Appends one capture record per call of capture().

    path_pattern: the capture file; "{rank}" and "{pid}" are replaced. Its directory is created.
    rank: this process's rank (None: detect_rank()).
    compress: zlib the payload (scores of real engines compress well: most are masked).
    metadata: a dict merged into every record's metadata (engine, model, GPU, ...).
    lock: take an fcntl lock around each append; None means "when the path does not depend on
        the rank or the pid" (then several processes may share it).
    """

    def __init__(self, path_pattern="captures/{rank}.bin", rank=None, compress=True,
                 metadata=None, lock=None):
        self.rank = detect_rank() if rank is None else int(rank)
        self.path = path_pattern.format(rank=self.rank, pid=os.getpid())
        if lock is None:
            lock = "{rank}" not in path_pattern and "{pid}" not in path_pattern
        self.lock = bool(lock)
        self.compress = bool(compress)
        if not isinstance(metadata, (dict, type(None))):
            raise ValueError("metadata: a dict (JSON object) expected")
        self.metadata = dict(metadata or {})
        self.calls = 0                    # capture() calls, including skipped ones
        self.records_written = 0
        self.bytes_written = 0
        self.skipped_during_graph_capture = 0
        # fcntl locks belong to the process: threads of one process take this lock first.
        self._thread_lock = threading.Lock()
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)

    def capture(self, scores, lengths, k, row_starts=None, page_table=None, page_size=0,
                page_table_row_starts=None, engine_indices=None, **metadata):
        """Appends one record: scores (rows, row_stride) fp32 (fp16/bf16 widened), lengths
        (rows,), k, optional row_starts (rows,), page_table (rows, cols) with page_size and
        page_table_row_starts (rows,), engine_indices (rows, k) as the engine selected them,
        and metadata keywords (layer=3, step=11, ...). Returns the bytes appended, 0 when the
        call was skipped because a CUDA graph is being captured (nothing can be copied then)."""
        call = self.calls
        self.calls += 1
        torch = _torch()
        if _is_tensor(scores) and scores.is_cuda and torch.cuda.is_current_stream_capturing():
            self.skipped_during_graph_capture += 1
            return 0
        # Copies first, all of them, before any check that could take time.
        copies = {name: _host_copy(value, name) for name, value in (
            ("scores", scores), ("lengths", lengths), ("row_starts", row_starts),
            ("page_table", page_table), ("page_table_row_starts", page_table_row_starts),
            ("engine_indices", engine_indices))}
        k = int(k)
        record_metadata = dict(self.metadata)
        record_metadata.update(metadata)
        record_metadata.setdefault("rank", self.rank)
        record_metadata.setdefault("call", call)
        record = encode_record(_scores_float32(copies["scores"]), copies["lengths"], k,
                               row_starts=copies["row_starts"], page_table=copies["page_table"],
                               page_size=int(page_size or 0),
                               page_table_row_starts=copies["page_table_row_starts"],
                               engine_indices=copies["engine_indices"],
                               metadata=record_metadata, compress=self.compress)
        self._append(record)
        self.records_written += 1
        self.bytes_written += len(record)
        return len(record)

    def _append(self, record):
        with self._thread_lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if self.lock:
                    fcntl.lockf(fd, fcntl.LOCK_EX)
                view = memoryview(record)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)  # also releases the fcntl lock
