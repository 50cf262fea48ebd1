"""CaptureHook: turns an engine's top-k calls into capture records without stalling it.

On the caller's thread: count the call, check shapes and dtypes, decide whether to keep it
(sampling), check the budget, start the host copies (asynchronous for CUDA tensors) and hand
them to the writer thread. Everything else happens on the writer (writer.py).
"""

import atexit
import contextlib
import json
import logging
import os
import threading
import time
import weakref

from . import staging
from .records import MAX_K, CaptureInputError, metadata_bytes, prepare_indices
from .sampling import Sampler, kept_rows
from .syncer import DEFAULT_INTERVAL, DEFAULT_POLICY, check_policy
from .writer import Appender, Writer

log = logging.getLogger("dsatopk_capture")

CONTRACT_ORDERS = ("sorted", "index_ascending", "none")
CONTRACT_TIE_BREAKS = ("small", "large", "none")

# Keys the hook writes itself; a call's metadata keywords may not use them.
RESERVED_KEYS = ("call", "record", "dropped", "rows_total", "rows_kept")

_live_hooks = weakref.WeakSet()


def check_contract(contract):
    """A copy of contract checked: {"order": one of CONTRACT_ORDERS, "tie_break": one of
    CONTRACT_TIE_BREAKS}, both keys required. None stays None."""
    if contract is None:
        return None
    if not isinstance(contract, dict) or set(contract) != {"order", "tie_break"}:
        raise ValueError('contract: {"order": ..., "tie_break": ...} expected, got '
                         f"{contract!r}")
    if contract["order"] not in CONTRACT_ORDERS:
        raise ValueError(f"contract order {contract['order']!r}: one of "
                         f"{', '.join(CONTRACT_ORDERS)}")
    if contract["tie_break"] not in CONTRACT_TIE_BREAKS:
        raise ValueError(f"contract tie_break {contract['tie_break']!r}: one of "
                         f"{', '.join(CONTRACT_TIE_BREAKS)}")
    return {"order": contract["order"], "tie_break": contract["tie_break"]}


def detect_rank():
    """torch.distributed's rank when a process group is initialised, else $RANK, else 0."""
    torch = staging.torch_module()
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


class CaptureHook:
    """Appends one capture record per kept call of capture(); see python/README.md.

    path: the capture file; "{rank}" and "{pid}" are replaced. Its directory is created.
    rank: this process's rank (None: detect_rank()).
    compress, compress_level, compress_threads: zlib the payloads (level 1..9). threads > 1:
        a pool of that many threads compresses each payload in chunks, one zlib stream whose
        bytes differ from single-threaded zlib's (parallel_zlib.py), or hashes uncompressed
        payloads; records are still appended in call order.
    metadata: a dict merged into every record's metadata (engine, model, GPU, ...).
    contract: what the engine's kernel promises about engine_indices, kept in every record:
        {"order": "sorted" | "index_ascending" | "none",
         "tie_break": "small" | "large" | "none"} (docs/FORMAT.md).
    every, layers, steps, probability, seed: which calls to keep (sampling.Sampler).
    max_rows: keep at most this many rows of a call, spread over the batch; the metadata says
        which (rows_total, rows_kept).
    max_file_bytes: rotate to path.1, path.2, ... (before the extension) past this size.
    queue_records, queue_bytes: the most calls and host bytes waiting for the writer; a call
        beyond them is dropped and counted (block=True: the caller waits for room instead).
        queue_bytes also bounds the pinned host memory held for CUDA copies (pinned.py).
    guard: for CUDA tensors, copy on the caller's stream, so that its later work waits (on the
        GPU) for the copies and the engine cannot overwrite a buffer before it was copied;
        False copies on a side stream the engine's stream does not wait for (staging.py).
    allow_k_over_row: accept k larger than the score row (engines that pad short rows with -1);
        refused by default as the sign of swapped arguments or a transposed array.
    lock: an fcntl lock around each append; None means "when the path depends on neither the
        rank nor the pid" (then several processes may share the file).
    repair_tail: when the file to append to ends in a torn record, cut it off instead of
        refusing (damage followed by more bytes is always refused).
    fsync, fsync_interval: when appended records are fsynced (syncer.py): "record" (after
        each), "interval" (every fsync_interval seconds, on a thread of its own, and at flush
        and close), "close" (at flush and close) or "none". Killing the process loses no
        record written under any of them; only a machine that goes down loses the records not
        yet fsynced.
    """

    def __init__(self, path="captures/{rank}.bin", rank=None, compress=True, metadata=None,
                 contract=None, every=1, layers=None, steps=None, probability=1.0, seed=0,
                 max_rows=None, max_file_bytes=None, queue_records=256, queue_bytes=512 << 20,
                 block=False, guard=True, allow_k_over_row=False, lock=None,
                 repair_tail=False, fsync=DEFAULT_POLICY, compress_level=6, compress_threads=1,
                 fsync_interval=DEFAULT_INTERVAL):
        if not isinstance(metadata, (dict, type(None))):
            raise ValueError("metadata: a dict (JSON object) expected")
        self.metadata = dict(metadata or {})
        metadata_bytes(self.metadata)
        self.contract = contract
        self.sampler = Sampler(every, layers, steps, probability, seed)
        if max_rows is not None and int(max_rows) < 1:
            raise ValueError(f"max_rows: {max_rows}: at least 1")
        self.max_rows = None if max_rows is None else int(max_rows)
        if max_file_bytes is not None and int(max_file_bytes) < 1:
            raise ValueError(f"max_file_bytes: {max_file_bytes}: at least 1")
        self.max_file_bytes = None if max_file_bytes is None else int(max_file_bytes)
        self.queue_records = int(queue_records)
        self.queue_bytes = int(queue_bytes)
        if self.queue_records < 1 or self.queue_bytes < 1:
            raise ValueError("queue_records and queue_bytes: at least 1")
        if not 1 <= int(compress_level) <= 9:
            raise ValueError(f"compress_level: {compress_level}: 1..9")
        self.compress = bool(compress)
        self.compress_level = int(compress_level)
        self.compress_threads = max(1, int(compress_threads))
        self.block = bool(block)
        self.allow_k_over_row = bool(allow_k_over_row)
        self.repair_tail = bool(repair_tail)
        self.fsync, self.fsync_interval = check_policy(fsync, fsync_interval)
        self.path_pattern = path
        self.explicit_rank = rank
        self.lock_setting = lock
        self._stager = staging.CudaStager(guard, self.queue_bytes)
        self._context = threading.local()
        self._init_state()
        self._start_writer()
        _live_hooks.add(self)

    # ---- state ----------------------------------------------------------------------------------

    def _init_state(self):
        """Counters and writer state, fresh (at construction and in a forked child)."""
        self._pid = os.getpid()
        self.rank = detect_rank() if self.explicit_rank is None else int(self.explicit_rank)
        self.path = self.path_pattern.format(rank=self.rank, pid=self._pid)
        if self.lock_setting is None:
            self.lock = "{rank}" not in self.path_pattern and "{pid}" not in self.path_pattern
        else:
            self.lock = bool(self.lock_setting)
        self._mutex = threading.Lock()
        self._room = threading.Condition(self._mutex)
        self._writer = None
        self._appender = None
        self._closed = False
        self.sampler.reset()
        self._stager.reset()
        self._counts = dict(calls=0, sampled_out=0, skipped_graph=0, refused=0, dropped=0,
                            dropped_no_pinned=0, queued=0, records=0, bytes=0, rejected=0,
                            write_errors=0)
        self._in_flight = 0          # calls handed to the writer, not yet finished
        self._in_flight_bytes = 0
        self._drops_pending = 0      # dropped since the last call handed to the writer
        self._next_record = 0
        self._finished = 0           # calls the writer is done with (written or not)
        self._last_error = None

    def _start_writer(self):
        appender = Appender(self.path, self.max_file_bytes, self.lock, self.fsync,
                            self.repair_tail, self.fsync_interval)
        appender.check_first_file()
        self._appender = appender
        self._writer = Writer(self, appender, self.compress, self.compress_level,
                              self.compress_threads)

    @property
    def contract(self):
        return self._contract

    @contract.setter
    def contract(self, value):
        self._contract = check_contract(value)

    @property
    def paths(self):
        """The files this hook has appended to (several after rotation)."""
        return list(self._appender.paths) if self._appender else []

    @contextlib.contextmanager
    def context(self, **metadata):
        """Metadata for the calls made inside the block on this thread (layer=..., step=...);
        blocks nest, the inner one winning."""
        check_call_metadata(metadata)
        stack = self._context.__dict__.setdefault("stack", [])
        stack.append(metadata)
        try:
            yield self
        finally:
            stack.pop()

    def _call_metadata(self, metadata):
        merged = {}
        for layer in getattr(self._context, "stack", ()):
            merged.update(layer)
        merged.update(metadata)
        return merged

    # ---- the caller's side --------------------------------------------------------------------

    def capture(self, scores, lengths, k, row_starts=None, page_table=None, page_size=0,
                page_table_row_starts=None, engine_indices=None, **metadata):
        """Offers one top-k call: scores (rows, row_stride) float32 (float16 and bfloat16
        widened exactly), lengths (rows,), k, optional row_starts (rows,), page_table
        (rows, cols) with page_size and page_table_row_starts (rows,), engine_indices
        (rows, k) as the engine selected them (window-relative, or translated through the
        page table), and metadata keywords (layer=3, step=11, ...). numpy arrays, torch CPU
        or CUDA tensors, or lists.

        Returns True when the call was handed to the writer, False when it was not kept
        (sampling, CUDA graph capture, or dropped: the queue was full, or no pinned buffer was
        free). Raises CaptureInputError (a ValueError) for arrays that cannot make a record."""
        return self._offer(scores, lengths, k, row_starts, page_table, page_size,
                           page_table_row_starts, engine_indices, metadata,
                           self.allow_k_over_row)

    def _offer(self, scores, lengths, k, row_starts, page_table, page_size,
               page_table_row_starts, engine_indices, metadata, allow_k_over_row):
        if os.getpid() != self._pid:
            self._after_fork_in_child()
        with self._mutex:
            if self._closed:
                raise RuntimeError(f"capture hook for {self.path} is closed")
            call = self._counts["calls"]
            self._counts["calls"] += 1
        arrays = dict(scores=scores, lengths=lengths, row_starts=row_starts,
                      page_table=page_table, page_table_row_starts=page_table_row_starts,
                      engine_indices=engine_indices)
        try:
            for name, value in arrays.items():
                if value is not None:
                    arrays[name] = staging.as_described(name, value)
            k, page_size = check_call(arrays, k, page_size, allow_k_over_row)
            check_call_metadata(metadata)
            if staging.capturing_graph(arrays):
                self._count("skipped_graph")
                return False
            merged = self._call_metadata(metadata)
            with self._mutex:
                keep = self.sampler.keep(merged)
        except (CaptureInputError, ValueError) as error:
            self._count("refused")
            if isinstance(error, CaptureInputError):
                raise
            raise CaptureInputError(str(error)) from None
        if not keep:
            self._count("sampled_out")
            return False
        if isinstance(self._writer, _LazyWriter):
            self._start_writer()   # a forked child's first kept call
        rows = arrays["scores"].shape[0]
        step = kept_rows(rows, self.max_rows)
        sizes = {name: staging.nbytes_of(value, step) for name, value in arrays.items()
                 if value is not None}
        nbytes = sum(sizes.values())
        if not self._reserve(nbytes):
            return False
        staged = staging.Staged(call, k, page_size, merged, nbytes, rows, step)
        try:
            if staging.has_cuda(arrays):
                if not self._stager.stage(staged, arrays, sizes, step, wait=self.block):
                    self._release(nbytes)
                    with self._mutex:
                        self._counts["dropped"] += 1
                        self._counts["dropped_no_pinned"] += 1
                        self._drops_pending += 1
                    return False
            else:
                staging.stage_now(staged, arrays, step)
                host = staged.arrays
                scores_shape = host["scores"].shape
                staged.checked = prepare_indices(
                    scores_shape[0], scores_shape[1], k, host["lengths"],
                    host.get("row_starts"), host.get("page_table"), page_size,
                    host.get("page_table_row_starts"), host.get("engine_indices"))
        except BaseException as error:
            self._stager.release(staged)
            self._release(nbytes)
            if isinstance(error, CaptureInputError):
                self._count("refused")
            raise
        with self._mutex:
            staged.dropped_before = self._drops_pending
            self._drops_pending = 0
            self._counts["queued"] += 1
        self._writer.put(staged)
        return True

    def _count(self, name):
        with self._mutex:
            self._counts[name] += 1

    def _count_unoffered(self, counter):
        """A call the engine wrappers counted without offering its arrays: "refused" (they could
        not be assembled) or "skipped_graph" (CUDA graph capture)."""
        with self._mutex:
            self._counts["calls"] += 1
            self._counts[counter] += 1

    def _reserve(self, nbytes):
        """Takes room for one call in the queue; False (the call dropped and counted) when
        there is none and the hook does not block."""
        with self._room:
            while self._in_flight >= self.queue_records or \
                    (self._in_flight and self._in_flight_bytes + nbytes > self.queue_bytes):
                if not self.block:
                    self._counts["dropped"] += 1
                    self._drops_pending += 1
                    return False
                self._room.wait()
            self._in_flight += 1
            self._in_flight_bytes += nbytes
            return True

    def _release(self, nbytes):
        with self._room:
            self._in_flight -= 1
            self._in_flight_bytes -= nbytes
            self._room.notify_all()

    # ---- the writer's side (called on the writer thread) ----------------------------------------

    def _record_metadata(self, item):
        metadata = dict(self.metadata)
        metadata.update(item.metadata)
        metadata.setdefault("rank", self.rank)
        if self._contract is not None:
            metadata.setdefault("contract", dict(self._contract))
        with self._mutex:
            record = self._next_record
            self._next_record += 1
        metadata["call"] = item.call
        metadata["record"] = record
        metadata["dropped"] = item.dropped_before
        if item.rows_step > 1:
            metadata["rows_total"] = item.rows_total
            metadata["rows_kept"] = list(range(0, item.rows_total, item.rows_step))
        return metadata

    def _done(self, item, counter, amount=1, error=None):
        self._stager.release(item)   # the pinned buffers back to the pool before room is made
        with self._room:
            self._counts[counter] += amount
            if error is not None:
                self._last_error = error
            self._in_flight -= 1
            self._in_flight_bytes -= item.nbytes
            self._finished += 1
            item.arrays = None
            self._room.notify_all()

    def _written(self, item, size, path):
        with self._room:
            self._counts["bytes"] += size
        self._done(item, "records")

    def _rejected(self, item, message):
        log.warning("dsatopk_capture: %s: not written: %s", self.path, message)
        with self._mutex:
            self._drops_pending += item.dropped_before
        self._done(item, "rejected", error=message)

    def _failed(self, item, message):
        log.error("dsatopk_capture: %s: %s", self.path, message)
        self._done(item, "write_errors", error=message)

    # ---- flush, close, stats ------------------------------------------------------------------

    def flush(self, timeout=None):
        """Waits until every call handed to the writer before this one is written (or refused)
        and, unless fsync="none", fsynced. Returns False if timeout (seconds) passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._room:
            target = self._counts["queued"]
            if not self._room.wait_for(lambda: self._finished >= target, timeout):
                return False
        appender = self._appender
        if appender is None or os.getpid() != self._pid:
            return True
        return appender.sync(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def reserve_pinned(self, scores, lengths, row_starts=None, page_table=None,
                       page_table_row_starts=None, engine_indices=None, count=2, wait=True):
        """Pins host memory for `count` calls with arrays shaped like these (CUDA tensors, or
        any arrays with the same shapes and dtypes, such as torch's "meta" tensors), so that
        even the first calls find their buffers; max_rows is applied as capture() would.
        count=None: as many calls as the queue holds (queue_records, queue_bytes). wait=False
        returns at once. Returns the number of calls the free buffers cover now (with
        wait=False, perhaps fewer than asked)."""
        if staging.torch_module() is None:
            raise RuntimeError("reserve_pinned: torch is not imported (pinned memory is for "
                               "CUDA tensors)")
        arrays = dict(scores=scores, lengths=lengths, row_starts=row_starts,
                      page_table=page_table, page_table_row_starts=page_table_row_starts,
                      engine_indices=engine_indices)
        step = kept_rows(int(scores.shape[0]), self.max_rows)
        if count is None:
            nbytes = sum(staging.nbytes_of(v, step) for v in arrays.values() if v is not None)
            count = max(1, min(self.queue_records, self.queue_bytes // max(1, nbytes)))
        return self._stager.reserve(arrays, step, int(count), wait)

    def close(self):
        """Flushes, stops the writer and closes the file. Later capture() calls raise."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        if self._writer is not None and os.getpid() == self._pid:
            self._writer.stop()
            self._stager.close()
        self._writer = None
        _live_hooks.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def stats(self):
        """Counters: calls (offered), records (written), bytes, dropped (queue full, or no free
        pinned buffer: dropped_no_pinned), sampled_out, skipped_graph, refused (caller's arrays
        invalid), rejected (values found invalid by the writer), write_errors, fsync_errors,
        queued/in_flight, the pinned memory held, the files, the fsync policy and the last
        error."""
        with self._mutex:
            counts = dict(self._counts)
            counts.update(in_flight=self._in_flight, in_flight_bytes=self._in_flight_bytes,
                          last_error=self._last_error, paths=self.paths,
                          sampling=self.sampler.describe(), max_rows=self.max_rows)
        syncer = self._appender.syncer if self._appender is not None else None
        counts["fsync"] = self.fsync
        counts["fsync_errors"] = syncer.errors if syncer is not None else 0
        if syncer is not None and syncer.last_error and not counts["last_error"]:
            counts["last_error"] = syncer.last_error
        counts.update(self._stager.pool.stats())
        return counts

    # ---- fork ---------------------------------------------------------------------------------

    def _before_fork(self):
        self._mutex.acquire()

    def _after_fork_in_parent(self):
        self._mutex.release()

    def _after_fork_in_child(self):
        """The child gets no writer: the parent's pending calls stay the parent's, the counters
        start again, the path is resolved again ({pid}), and a writer starts on the child's
        first kept call."""
        if self._pid == os.getpid():
            return
        appender = self._appender
        closed = self._closed
        self._init_state()
        self._closed = closed
        if appender is not None:
            try:
                appender.abandon()   # the child's copies of the descriptors only
            except OSError:
                pass
        if not closed:
            self._writer = _LazyWriter(self)


class _LazyWriter:
    """Stands in for the writer in a forked child until its first kept call starts one."""

    def __init__(self, hook):
        self.hook = hook

    def stop(self):
        pass


def check_call(arrays, k, page_size, allow_k_over_row):
    """Shape and dtype checks that need no values (cheap for CUDA tensors); returns k and
    page_size as ints. Raises CaptureInputError naming the array and the fix."""
    for name, value in arrays.items():
        if value is not None:
            staging.check_dtype(name, value)
    scores = arrays["scores"]
    if scores.ndim != 2:
        raise CaptureInputError(f"scores: shape {tuple(scores.shape)}; a 2-D array "
                                f"(rows, row_stride) expected")
    rows, row_stride = (int(x) for x in scores.shape)
    if rows < 1:
        raise CaptureInputError("scores: no rows")
    try:
        k = int(k)
    except (TypeError, ValueError):
        raise CaptureInputError(f"k: {k!r} is not an integer") from None
    if not 1 <= k <= MAX_K:
        raise CaptureInputError(f"k: {k}: 1..{MAX_K}")
    if k > row_stride and not allow_k_over_row:
        raise CaptureInputError(
            f"k {k} > row length {row_stride}: the top-k asks for more than a score row holds "
            f"(scores transposed, or k and a length swapped?); if the engine does pad short "
            f"rows with -1, create the hook with allow_k_over_row=True")
    expected = {"lengths": (rows,), "row_starts": (rows,), "page_table_row_starts": (rows,),
                "engine_indices": (rows, k)}
    for name, shape in expected.items():
        value = arrays[name]
        if value is not None and tuple(value.shape) != shape:
            raise CaptureInputError(f"{name}: shape {tuple(value.shape)}, expected {shape}")
    page_size = int(page_size or 0)
    table = arrays["page_table"]
    if page_size:
        if page_size < 0 or page_size & (page_size - 1):
            raise CaptureInputError(f"page_size {page_size} is not a power of two")
        if table is None:
            raise CaptureInputError("page_size given without page_table")
        if table.ndim != 2 or int(table.shape[0]) != rows:
            raise CaptureInputError(f"page_table: shape {tuple(table.shape)}, expected "
                                    f"({rows}, cols)")
    elif table is not None or arrays["page_table_row_starts"] is not None:
        raise CaptureInputError("page_table given without page_size")
    return k, page_size


def check_call_metadata(metadata):
    for key in RESERVED_KEYS:
        if key in metadata:
            raise CaptureInputError(f"metadata key {key!r} is written by the hook itself")
    if "contract" in metadata:
        metadata["contract"] = check_contract(metadata["contract"])
    if all(type(key) is str and type(value) in _PLAIN_JSON for key, value in metadata.items()):
        return   # the usual layer=, step=: JSON as they are, without encoding them to know
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise CaptureInputError(f"metadata: not JSON: {error}") from None


_PLAIN_JSON = (int, str, bool)   # exactly these types (not float: NaN is not JSON)


def _before_fork():
    for hook in list(_live_hooks):
        hook._before_fork()


def _after_fork_in_parent():
    for hook in list(_live_hooks):
        hook._after_fork_in_parent()


def _after_fork_in_child():
    for hook in list(_live_hooks):
        hook._after_fork_in_child()


def _close_all():
    for hook in list(_live_hooks):
        try:
            hook.close()
        except Exception as error:  # noqa: BLE001 -- at exit, report and go on
            log.error("dsatopk_capture: closing %s at exit: %s", hook.path, error)


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
atexit.register(_close_all)
