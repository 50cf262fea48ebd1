"""One zlib stream compressed in parallel chunks: any inflater reads it, and the checksums
combine as zlib's."""

import concurrent.futures
import random
import unittest
import zlib

import numpy as np

from dsatopk_capture import parallel_zlib


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


if __name__ == "__main__":
    unittest.main()
