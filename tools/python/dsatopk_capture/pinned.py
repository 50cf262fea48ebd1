"""Pinned host buffers for the device-to-host copies, allocated off the calling thread.

Pinning memory (cudaHostAlloc) costs milliseconds per tens of MiB and blocks the thread that asks:
about 25 ms for 32 MiB on the H200's host. torch's caching host allocator calls it on the thread
that asks for pinned memory whenever its cache has no free block of the size, which for a capture
hook is the engine's thread each time the writer falls a record further behind. So the pool keeps
its own buffers: the calling thread only takes free ones (a look-up under a lock), the writer
gives them back once the record is written, and a thread of the pool allocates, ahead of demand
(one spare call's worth of each size in use) and after a miss. A call that finds no free buffer
is not kept, unless the hook blocks.

Buffers are uint8 tensors sized in powers of two (as torch's allocator rounds anyway), at least
SMALLEST_BYTES so that the small arrays of every batch size share one size. The pool holds at most
limit_bytes, counted in those sizes; to make room it lets go of free buffers of the sizes used
least recently. PyTorch is never imported: the pool is only used with CUDA tensors.
"""

import collections
import logging
import sys
import threading
import time

log = logging.getLogger("dsatopk_capture")

SMALLEST_BYTES = 64 << 10
RETRY_SECONDS = 1.0        # after a failed allocation, before the pool asks for one again


def size_class(nbytes):
    """The buffer size that holds nbytes: a power of two, at least SMALLEST_BYTES."""
    return max(SMALLEST_BYTES, 1 << max(0, int(nbytes) - 1).bit_length())


class PinnedPool:
    def __init__(self, limit_bytes):
        self.limit_bytes = int(limit_bytes)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._free = collections.defaultdict(list)       # size -> free buffers
        self._used_at = {}                               # size -> when a call last took one
        self._allocating = collections.Counter()         # size -> buffers being allocated
        self._requests = collections.deque()
        self._held = 0            # bytes of every buffer, free or lent
        self._lent = 0            # buffers lent to calls
        self._failed_at = None
        self._thread = None
        self._closed = False
        self.allocated = 0        # buffers allocated, for stats
        self.last_error = None

    # ---- the calling thread -------------------------------------------------------------------

    def take(self, sizes):
        """Free buffers for arrays of these byte sizes, in order, or None when one is missing
        (its size is then asked for). After a take, each size left without a free buffer is
        asked for too, so that the next call finds one."""
        with self._lock:
            return self._take(sizes)

    def take_waiting(self, sizes):
        """take(), waiting for the pool's thread instead of returning None (block=True)."""
        with self._changed:
            while True:
                taken = self._take(sizes)
                if taken is not None:
                    return taken
                if self._closed:
                    raise RuntimeError("the pinned-memory pool is closed")
                self._changed.wait(RETRY_SECONDS)

    # ---- any thread ---------------------------------------------------------------------------

    def give(self, buffers):
        """Buffers whose copies are complete and read, back to the pool."""
        with self._changed:
            self._lent -= len(buffers)
            if self._closed:
                self._held -= sum(buffer.numel() for buffer in buffers)
                return
            for buffer in buffers:
                self._free[buffer.numel()].append(buffer)
            self._changed.notify_all()

    def reserve(self, sizes, count, wait=True):
        """Asks for free buffers for `count` calls with arrays of these byte sizes (beyond those
        already free); with wait, returns when they are there (or the limit left no room).
        Returns how many calls' buffers are free."""
        wanted = collections.Counter(size_class(n) for n in sizes)
        with self._changed:
            now = time.monotonic()
            for size, per_call in wanted.items():
                self._used_at[size] = now
                missing = per_call * count - len(self._free[size]) - self._allocating[size]
                for _ in range(max(0, missing)):
                    if not self._request(size):
                        break
            if wait:
                self._changed.wait_for(lambda: self._closed or
                                       not any(self._allocating[s] for s in wanted))
            return min(len(self._free[size]) // per_call for size, per_call in wanted.items())

    def stats(self):
        with self._lock:
            free = sum(len(buffers) for buffers in self._free.values())
            return {"pinned_bytes": self._held, "pinned_buffers": free + self._lent,
                    "pinned_allocated": self.allocated}

    def close(self):
        """Stops the thread and lets go of the buffers (torch's host cache keeps them)."""
        with self._changed:
            self._closed = True
            self._requests.clear()
            self._allocating.clear()
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._lock:
            self._held -= sum(s * len(buffers) for s, buffers in self._free.items())
            self._free.clear()

    # ---- under the lock -----------------------------------------------------------------------

    def _take(self, sizes):
        wanted = [size_class(n) for n in sizes]
        per_call = collections.Counter(wanted)
        now = time.monotonic()
        for size in per_call:
            self._used_at[size] = now
        taken = []
        for size in wanted:
            buffer = self._pop_free(size)
            if buffer is None:
                for lent in taken:
                    self._free[lent.numel()].append(lent)
                self._ask_for(per_call)
                return None
            taken.append(buffer)
        self._ask_for(per_call)            # the spare: one more call's worth
        self._lent += len(taken)
        return taken

    def _ask_for(self, per_call):
        """Asks for the buffers one call of these sizes would still lack."""
        for size, count in per_call.items():
            for _ in range(count - len(self._free[size]) - self._allocating[size]):
                if not self._request(size):
                    break

    def _pop_free(self, size):
        fits = sorted(s for s, buffers in self._free.items() if s >= size and buffers)
        return self._free[fits[0]].pop() if fits else None

    def _request(self, size):
        """Queues the allocation of one buffer of `size`, making room under the limit by letting
        go of free buffers of sizes last used before this one (never those of the same call);
        False when there is no room (or just after a failure)."""
        if self._closed or (self._failed_at is not None and
                            time.monotonic() - self._failed_at < RETRY_SECONDS):
            return False
        pending = sum(s * n for s, n in self._allocating.items())
        while self._held + pending + size > self.limit_bytes:
            recent = self._used_at.get(size, float("inf"))
            idle = [s for s, buffers in self._free.items()
                    if buffers and self._used_at.get(s, 0.0) < recent]
            if not idle:
                break
            oldest = min(idle, key=lambda s: self._used_at.get(s, 0.0))
            self._free[oldest].pop()
            self._held -= oldest
        if self._held + pending + size > self.limit_bytes and (self._lent or self._held or pending):
            return False      # a single call larger than the limit passes on an empty pool
        self._allocating[size] += 1
        self._requests.append(size)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dsatopk-pinned", daemon=True)
            self._thread.start()
        self._changed.notify_all()
        return True

    # ---- the pool's thread --------------------------------------------------------------------

    def _run(self):
        torch = sys.modules["torch"]
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._requests or self._closed)
                if self._closed:
                    return
                size = self._requests.popleft()
            buffer, error = None, None
            try:
                buffer = torch.empty(size, dtype=torch.uint8, pin_memory=True)
            except Exception as caught:  # noqa: BLE001 -- reported in stats, the pool goes on
                error = f"pinning {size} bytes of host memory: {type(caught).__name__}: {caught}"
                log.error("dsatopk_capture: %s", error)
            with self._changed:
                if self._closed:
                    return
                self._allocating[size] -= 1
                if buffer is not None:
                    self._free[size].append(buffer)
                    self._held += size
                    self.allocated += 1
                if error is not None:
                    self._failed_at = time.monotonic()
                    self.last_error = error
                self._changed.notify_all()
