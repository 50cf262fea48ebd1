"""The writer: a thread that turns staged calls into records and appends them.

Everything slow happens here, off the engine's thread: waiting for the device-to-host copies,
checking values that were still on the GPU at call time, widening float16/bfloat16, encoding,
zlib (optionally on a small pool of threads: zlib and hashlib release the GIL), appending with
one write, fsync, and rotating to the next numbered file at the size cap. Records are appended
in call order whatever the pool does.
"""

import collections
import concurrent.futures
import fcntl
import logging
import os
import queue
import threading

from .records import (CaptureError, CaptureInputError, check_tail, encode_parts,
                      prepare_indices, repair_tail, write_all)

log = logging.getLogger("dsatopk_capture")

_STOP = object()


def part_path(path, part):
    """The file of rotation part `part`: the path itself for part 0, else the number before
    the extension (captures/0.bin, captures/0.1.bin, captures/0.2.bin, ...)."""
    if part == 0:
        return path
    root, extension = os.path.splitext(path)
    return f"{root}.{part}{extension}"


class Appender:
    """Appends records to path, rotating to the next part when max_file_bytes would be passed
    (a record larger than the cap gets a file of its own). lock: an fcntl lock around each
    append, for files shared by several processes."""

    def __init__(self, path, max_file_bytes=None, lock=False, fsync=True, repair=False):
        self.path = path
        self.max_file_bytes = max_file_bytes
        self.lock = lock
        self.fsync = fsync
        self.repair = repair
        self.part = 0
        self.paths = []
        self._fd = None
        self._size = 0

    def check_first_file(self):
        """Checks the tail of the file the hook appends to first (repairing a torn tail when
        asked); raises CaptureError with the refusal otherwise."""
        self._open()
        try:
            self._lock()
            tail = check_tail(self.path)
            if not tail.clean:
                if not (self.repair and tail.torn):
                    raise CaptureError(tail.refusal(), tail.records, tail.good_bytes,
                                       tail.torn)
                repair_tail(self.path)
                log.warning("%s: cut the torn record at byte %d (%s)", self.path,
                            tail.good_bytes, tail.problem)
        except BaseException:
            self.close()
            raise
        finally:
            self._unlock()

    def _open(self):
        path = part_path(self.path, self.part)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        if path not in self.paths:
            self.paths.append(path)

    def _lock(self):
        if self.lock and self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)

    def _unlock(self):
        if self.lock and self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def _rotate(self):
        os.close(self._fd)
        self._fd = None
        while True:
            self.part += 1
            if not os.path.exists(part_path(self.path, self.part)):
                break
        self._open()

    def append(self, header, stored):
        """Appends one record (its header and stored payload, with one writev); returns the path
        it went to. On a failed write the file is cut back to its size before the write, so no
        partial record stays behind."""
        size = len(header) + memoryview(stored).nbytes
        if self._fd is None:
            self._open()
        self._lock()
        try:
            if self.lock or self.max_file_bytes:
                self._size = os.fstat(self._fd).st_size
            if self.max_file_bytes and self._size and \
                    self._size + size > self.max_file_bytes:
                self._unlock()
                self._rotate()
                self._lock()
                self._size = os.fstat(self._fd).st_size
            before = self._size
            try:
                write_all(self._fd, header, stored)
                if self.fsync:
                    os.fsync(self._fd)
            except OSError:
                try:
                    os.ftruncate(self._fd, before)
                except OSError:
                    pass
                raise
            self._size = before + size
            return part_path(self.path, self.part)
        finally:
            self._unlock()

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Writer:
    """The writer thread of one hook. `hook` provides the shared state: its lock and condition,
    the counters, the metadata to assemble, and the budget to release."""

    def __init__(self, hook, appender, compress, level, compress_threads):
        self.hook = hook
        self.appender = appender
        self.compress = compress
        self.level = level
        self.queue = queue.SimpleQueue()
        self.pool = None
        if compress and compress_threads > 1:
            self.pool = concurrent.futures.ThreadPoolExecutor(
                compress_threads, thread_name_prefix="dsatopk-compress")
        self.compress_threads = compress_threads
        self.thread = threading.Thread(target=self._run, name="dsatopk-writer", daemon=True)
        self.thread.start()

    def put(self, staged):
        self.queue.put(staged)

    def stop(self):
        self.queue.put(_STOP)
        self.thread.join()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        self.appender.close()

    # ---- the thread ---------------------------------------------------------------------------

    def _run(self):
        pending = collections.deque()   # (staged, future or encoded bytes), in call order
        while True:
            if pending:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    self._finish(*pending.popleft())
                    continue
            else:
                item = self.queue.get()
            if item is _STOP:
                while pending:
                    self._finish(*pending.popleft())
                return
            work = self._prepare(item)
            if work is None:
                continue
            prepared, metadata = work
            if self.pool is not None:
                encoded = self.pool.submit(encode_parts, prepared, metadata, True, self.level)
            else:
                encoded = self._encode(item, prepared, metadata)
            pending.append((item, encoded))
            while pending and (self.pool is None or pending[0][1].done() or
                               len(pending) > self.compress_threads):
                self._finish(*pending.popleft())

    def _encode(self, item, prepared, metadata):
        try:
            return encode_parts(prepared, metadata, self.compress, self.level)
        except Exception as error:  # noqa: BLE001 -- reported in stats, never kills the thread
            return error

    def _prepare(self, item):
        """The checked record and its metadata, or None when the values are refused."""
        hook = self.hook
        try:
            arrays = item.host_arrays()
            scores = arrays["scores"]
            prepared = item.checked
            if prepared is None:
                prepared = prepare_indices(scores.shape[0], scores.shape[1], item.k,
                                           arrays["lengths"], arrays.get("row_starts"),
                                           arrays.get("page_table"), item.page_size,
                                           arrays.get("page_table_row_starts"),
                                           arrays.get("engine_indices"))
            prepared.scores = scores
            metadata = hook._record_metadata(item)
            return prepared, metadata
        except CaptureInputError as error:
            hook._rejected(item, f"call {item.call}: {error}")
        except Exception as error:  # noqa: BLE001 -- reported in stats, never kills the thread
            hook._failed(item, f"call {item.call}: {type(error).__name__}: {error}")
        return None

    def _finish(self, item, encoded):
        hook = self.hook
        try:
            if isinstance(encoded, concurrent.futures.Future):
                encoded = encoded.result()
            if isinstance(encoded, Exception):
                raise encoded
            header, stored = encoded
            path = self.appender.append(header, stored)
        except Exception as error:  # noqa: BLE001 -- reported in stats, never kills the thread
            hook._failed(item, f"call {item.call}: {type(error).__name__}: {error}")
            return
        hook._written(item, len(header) + memoryview(stored).nbytes, path)
