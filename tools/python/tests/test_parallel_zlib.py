"""One zlib stream compressed in parallel chunks: any inflater reads it, the checksums combine
as zlib's, and the hook's records made this way read back (the C reader reads them too:
tests/cli/test_hook.sh)."""

import concurrent.futures
import hashlib
import os
import random
import tempfile
import unittest
import zlib

import numpy as np

from dsatopk_capture import CaptureHook, encode_record, parallel_zlib, read_records


def relu_bytes(count, seed=0):
    rng = np.random.default_rng(seed)
    return np.maximum(rng.standard_normal(count, np.float32), 0).tobytes()


class Stream(unittest.TestCase):
    def setUp(self):
        self.pool = concurrent.futures.ThreadPoolExecutor(3)
        self.addCleanup(self.pool.shutdown)

    def compress(self, parts, level, chunk_bytes):
        futures = parallel_zlib.compress_chunks(parts, level, self.pool.submit, chunk_bytes)
        return b"".join(parallel_zlib.assemble(level, [f.result() for f in futures]))

    def test_inflates_to_the_payload(self):
        data = relu_bytes(100_000)
        for level in (1, 6, 9):
            for chunk_bytes in (1001, 65536, 100_000, len(data), 2 * len(data)):
                stream = self.compress([data], level, chunk_bytes)
                self.assertEqual(zlib.decompress(stream), data, (level, chunk_bytes))
                self.assertEqual(stream[:2], zlib.compress(b"", level)[:2])

    def test_parts_of_any_size(self):
        data = relu_bytes(50_000, 1)
        cuts = sorted(random.Random(3).sample(range(1, len(data)), 40))
        parts = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        self.assertEqual(zlib.decompress(self.compress(parts, 6, 7000)), data)
        self.assertEqual(zlib.decompress(self.compress([b"x"], 6, 7000)), b"x")

    def test_differs_from_one_stream_but_barely_in_size(self):
        data = relu_bytes(1_000_000, 2)
        chunked = self.compress([data], 6, parallel_zlib.CHUNK_BYTES)
        single = zlib.compress(data, 6)
        self.assertNotEqual(chunked, single)
        self.assertLess(abs(len(chunked) - len(single)), len(single) // 500)

    def test_adler32_combine(self):
        rng = random.Random(5)
        for _ in range(200):
            first = rng.randbytes(rng.randrange(0, 300))
            second = rng.randbytes(rng.choice([0, 1, 65520, 65521, 65522, rng.randrange(9999)]))
            self.assertEqual(
                parallel_zlib.adler32_combine(zlib.adler32(first), zlib.adler32(second),
                                              len(second)),
                zlib.adler32(first + second))

    def test_split(self):
        chunks = parallel_zlib.split([b"abc", b"", b"defgh"], 4)
        self.assertEqual([b"".join(bytes(v) for v in chunk) for chunk in chunks],
                         [b"abcd", b"efgh"])


class HookRecords(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        rng = np.random.default_rng(4)
        self.scores = np.maximum(rng.standard_normal((6, 100_000), np.float32), 0)
        self.indices = rng.integers(0, 100_000, (6, 32)).astype(np.int32)

    def write(self, name, **options):
        path = os.path.join(self.dir.name, name)
        hook = CaptureHook(path, rank=0, compress=True, compress_level=1, **options)
        hook.capture(self.scores, [100_000] * 6, 32, engine_indices=self.indices, layer=0)
        hook.capture(self.scores[:2, :50], [50, 50], 8, layer=1)    # one chunk: one stream
        hook.close()
        return path

    def test_chunked_records_read_back(self):
        path = self.write("chunked.bin", compress_threads=3)
        records = list(read_records(path))
        self.assertEqual([r.metadata["layer"] for r in records], [0, 1])
        self.assertTrue(all(r.compressed for r in records))
        self.assertEqual(records[0].scores.tobytes(), self.scores.tobytes())
        self.assertEqual(records[0].engine_indices.tobytes(), self.indices.tobytes())
        with open(path, "rb") as f:
            data = f.read()
        stored = data[72:72 + records[0].stored_bytes]
        self.assertEqual(hashlib.sha256(stored).hexdigest(), records[0].payload_sha256)
        # Several chunks: not the bytes one zlib stream makes; one chunk: exactly those.
        again = [encode_record(r.scores, r.lengths, r.k, engine_indices=r.engine_indices,
                               metadata=r.metadata, compress=True, level=1) for r in records]
        self.assertNotEqual(data[:len(again[0])], again[0])
        self.assertEqual(data[len(data) - len(again[1]):], again[1])

    def test_one_thread_writes_what_the_encoder_writes(self):
        path = self.write("single.bin")
        records = list(read_records(path))
        again = b"".join(encode_record(r.scores, r.lengths, r.k, engine_indices=r.engine_indices,
                                       metadata=r.metadata, compress=True, level=1)
                         for r in records)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), again)


if __name__ == "__main__":
    unittest.main()
