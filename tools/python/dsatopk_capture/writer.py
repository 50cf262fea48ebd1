"""The writer: a thread that turns staged calls into records and appends them.

Everything slow happens here, off the engine's thread: waiting for the device-to-host copies,
checking values that were still on the GPU at call time, widening float16/bfloat16, encoding,
SHA-256 and zlib (optionally on a small pool of threads: zlib and hashlib release the GIL),
appending with one writev, and rotating to the next numbered file at the size cap. Records are
appended in call order whatever the pool does; fsync follows the policy of syncer.py.
"""

import collections
import concurrent.futures
import fcntl
import hashlib
import logging
import os
import queue
import threading

from . import parallel_zlib
from .records import (CaptureError, CaptureInputError, check_tail, encode_parts,
                      payload_parts, prepare_indices, record_header, repair_tail, write_all)
from .syncer import DEFAULT_INTERVAL, DEFAULT_POLICY, Syncer, check_policy

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
    append, for files shared by several processes. fsync, fsync_interval: the policy of
    syncer.py ("record", "interval", "close" or "none")."""

    def __init__(self, path, max_file_bytes=None, lock=False, fsync=DEFAULT_POLICY,
                 repair=False, fsync_interval=DEFAULT_INTERVAL):
        self.path = path
        self.max_file_bytes = max_file_bytes
        self.lock = lock
        self.fsync, interval = check_policy(fsync, fsync_interval)
        self.repair = repair
        self.part = 0
        self.paths = []
        self._fd = None
        self._size = 0
        self._opened = 0          # files opened so far: the syncer's name for the current one
        self.syncer = None
        if self.fsync in ("interval", "close"):
            self.syncer = Syncer(interval if self.fsync == "interval" else None)

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
        self._opened += 1
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
        self._retire()
        os.close(self._fd)
        self._fd = None
        while True:
            self.part += 1
            if not os.path.exists(part_path(self.path, self.part)):
                break
        self._open()

    def append(self, header, stored):
        """Appends one record (its header and the buffers of its stored payload, with one
        writev); returns the path it went to. On a failed write the file is cut back to its size
        before the write, so no partial record stays behind."""
        size = len(header) + sum(memoryview(part).nbytes for part in stored)
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
                write_all(self._fd, header, *stored)
                if self.fsync == "record":
                    os.fsync(self._fd)
            except OSError:
                try:
                    os.ftruncate(self._fd, before)
                except OSError:
                    pass
                raise
            self._size = before + size
            if self.syncer is not None:
                self.syncer.appended(self._opened, self._fd)
            return part_path(self.path, self.part)
        finally:
            self._unlock()

    def sync(self, timeout=None):
        """fsyncs what was appended so far, under the "interval" and "close" policies (under
        "record" it already is); False if timeout passed first."""
        return True if self.syncer is None else self.syncer.sync(timeout)

    def _retire(self):
        if self.syncer is not None:
            self.syncer.retired(self._opened)

    def close(self):
        """Closes the file, after a last fsync under the "interval" and "close" policies."""
        if self.syncer is not None:
            self.syncer.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def abandon(self):
        """In a forked child: closes the child's copies of the descriptors, syncing nothing."""
        if self.syncer is not None:
            self.syncer.abandon()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Writer:
    """The writer thread of one hook. `hook` provides the shared state: its lock and condition,
    the counters, the metadata to assemble, and the budget to release.

    With threads > 1 a pool of that many threads does the heavy part of each record: the
    SHA-256 of an uncompressed payload, or the compression of a payload in chunks
    (parallel_zlib.py), so that one record uses every thread; the writer thread hashes the
    compressed stream and appends, in call order. The payload is never joined into one buffer:
    the header and the parts are appended with one writev."""

    def __init__(self, hook, appender, compress, level, threads):
        self.hook = hook
        self.appender = appender
        self.compress = compress
        self.level = level
        self.queue = queue.SimpleQueue()
        self.pool = None
        self.submit = _run_now
        if threads > 1:
            self.pool = concurrent.futures.ThreadPoolExecutor(
                threads, thread_name_prefix="dsatopk-compress")
            self.submit = self.pool.submit
        self.threads = threads
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
        pending = collections.deque()   # _Encoding, in call order
        while True:
            if pending:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    self._finish(pending.popleft())
                    continue
            else:
                item = self.queue.get()
            if item is _STOP:
                while pending:
                    self._finish(pending.popleft())
                return
            work = self._prepare(item)
            if work is None:
                continue
            pending.append(self._start(item, *work))
            while pending and (pending[0].done() or len(pending) > self.threads):
                self._finish(pending.popleft())

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

    def _start(self, item, prepared, metadata):
        """Starts encoding one record: uncompressed, its parts and their SHA-256; compressed on
        one thread, one zlib stream as `dsatopk-audit` writes it; compressed on the pool, one
        zlib stream made of chunks."""
        try:
            parts, size = payload_parts(prepared, metadata)
        except Exception as error:  # noqa: BLE001 -- reported in stats, never kills the thread
            return _Encoding(item, [_failed_future(error)], None)
        if not self.compress:
            def complete(results):
                return record_header(size, size, results[0], False), parts
            return _Encoding(item, [self.submit(_sha256, parts)], complete)
        if self.pool is None or size <= parallel_zlib.CHUNK_BYTES:
            def complete(results):
                header, stored = results[0]
                return header, [stored]
            return _Encoding(item, [self.submit(encode_parts, prepared, metadata, True,
                                                self.level)], complete)
        level = self.level

        def complete(results):
            stream = parallel_zlib.assemble(level, results)
            stored = sum(len(piece) for piece in stream)
            return record_header(stored, size, _sha256(stream), True), stream
        return _Encoding(item, parallel_zlib.compress_chunks(parts, level, self.submit), complete)

    def _finish(self, encoding):
        hook, item = self.hook, encoding.item
        try:
            header, stored = encoding.complete([f.result() for f in encoding.futures])
            path = self.appender.append(header, stored)
        except Exception as error:  # noqa: BLE001 -- reported in stats, never kills the thread
            concurrent.futures.wait(encoding.futures)   # none of them reads the arrays any more
            hook._failed(item, f"call {item.call}: {type(error).__name__}: {error}")
            return
        hook._written(item, len(header) + sum(memoryview(part).nbytes for part in stored), path)


class _Encoding:
    """One record being encoded: futures (on the pool, or already done) whose results
    complete() turns into the header and the buffers of the stored payload."""

    __slots__ = ("item", "futures", "complete")

    def __init__(self, item, futures, complete):
        self.item = item
        self.futures = futures
        self.complete = complete

    def done(self):
        return all(future.done() for future in self.futures)


def _sha256(parts):
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.digest()


def _run_now(function, *arguments):
    """A thread pool's submit() without the pool: runs function now, returns a done future."""
    future = concurrent.futures.Future()
    try:
        future.set_result(function(*arguments))
    except Exception as error:  # noqa: BLE001 -- raised again by result()
        future.set_exception(error)
    return future


def _failed_future(error):
    future = concurrent.futures.Future()
    future.set_exception(error)
    return future
