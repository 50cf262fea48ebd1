"""When appended records reach the disk: the hook's fsync policy.

A record is in the kernel's page cache once write() returned, so a process that is killed
(kill -9, a crash, the OOM killer) loses nothing it wrote: only the record being written can be
torn, and readers stop there. fsync only matters when the machine itself goes down (power loss,
a kernel crash), and it costs the writer the time the disk takes. The policies:

- "record": fsync after every record, on the writer thread (the writer waits for the disk).
- "interval": a thread of its own fsyncs what was appended every `interval` seconds while
  records arrive, and at flush() and close(); the writer never waits for the disk.
- "close": fsync at flush() and close() only.
- "none": never; the kernel writes the pages back on its own schedule.

The syncer fsyncs duplicates of the appender's descriptors, so rotating to the next file never
waits for it; a file left behind is fsynced once more and then closed.
"""

import logging
import os
import threading
import time

log = logging.getLogger("dsatopk_capture")

POLICIES = ("record", "interval", "close", "none")
DEFAULT_POLICY = "interval"
DEFAULT_INTERVAL = 1.0


def check_policy(policy, interval):
    """The policy name and interval (seconds) checked; True and False stand for "record" and
    "none"."""
    if policy is True:
        policy = "record"
    elif policy is False or policy is None:
        policy = "none"
    if policy not in POLICIES:
        raise ValueError(f"fsync: {policy!r}: one of {', '.join(POLICIES)}")
    interval = float(interval)
    if not interval > 0:
        raise ValueError(f"fsync_interval: {interval}: more than 0 seconds")
    return policy, interval


class Syncer:
    """fsyncs the files an Appender wrote to, off the writer thread. interval: seconds between
    fsyncs while records arrive; None: only when sync() asks."""

    def __init__(self, interval=None):
        self.interval = interval
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._files = {}          # file number -> [duplicate descriptor, retired]
        self._appended = 0        # appends so far
        self._synced = 0          # appends known to be on disk
        self._asked = 0           # appends a sync() call waits for
        self._stopping = False
        self._thread = None
        self.errors = 0
        self.last_error = None

    def appended(self, number, fd):
        """After an append to the file `number` (its descriptor fd), on the writer thread."""
        with self._changed:
            if number not in self._files:
                self._files[number] = [os.dup(fd), False]
            self._appended += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dsatopk-fsync",
                                                daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def retired(self, number):
        """The file `number` gets no more appends (rotation): closed after its last fsync."""
        with self._lock:
            if number in self._files:
                self._files[number][1] = True

    def sync(self, timeout=None):
        """fsyncs everything appended so far and waits for it; False if timeout (seconds)
        passed first."""
        with self._changed:
            target = self._appended
            if self._synced >= target:
                return True
            self._asked = max(self._asked, target)
            self._changed.notify_all()
            return self._changed.wait_for(lambda: self._synced >= target or self._thread is None,
                                          timeout)

    def close(self):
        """A last fsync, then the thread stops and the duplicates are closed."""
        self.sync()
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        for fd, _ in self._files.values():
            os.close(fd)
        self._files = {}

    def abandon(self):
        """In a forked child: closes the child's copies of the duplicates, syncing nothing (the
        parent's thread does not exist here and its lock may be held)."""
        for fd, _ in self._files.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._files = {}

    def _due(self, last):
        if self._stopping or self._asked > self._synced:
            return True
        return self.interval is not None and self._appended > self._synced and \
            time.monotonic() - last >= self.interval

    def _run(self):
        last = time.monotonic()
        while True:
            with self._changed:
                while not self._due(last):
                    wait = None
                    if self.interval is not None and self._appended > self._synced:
                        wait = max(0.0, self.interval - (time.monotonic() - last))
                    self._changed.wait(wait)
                if self._stopping and self._synced >= self._appended:
                    self._thread = None
                    self._changed.notify_all()
                    return
                target = self._appended
                files = [(number, entry[0], entry[1]) for number, entry in self._files.items()]
            last = time.monotonic()
            for number, fd, retired in files:
                try:
                    os.fsync(fd)
                except OSError as error:
                    message = f"fsync: {error}"
                    log.error("dsatopk_capture: %s", message)
                    with self._lock:
                        self.errors += 1
                        self.last_error = message
                if retired:
                    with self._lock:
                        del self._files[number]
                    os.close(fd)
            with self._changed:
                self._synced = max(self._synced, target)
                self._changed.notify_all()
