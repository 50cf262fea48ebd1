"""The format: the worked example of docs/FORMAT.md byte for byte, round trips, the reader's
refusals, and the tail check that guards appends."""

import os
import tempfile
import unittest

import numpy as np

from unittest import mock

from dsatopk_capture import (CaptureError, CaptureInputError, append_record, check_tail,
                             encode_record, read_records, repair_tail)
from dsatopk_capture import records as records_module

FORMAT_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs",
                         "FORMAT.md")


def worked_example_bytes():
    """The hex dump of docs/FORMAT.md "Worked example", as bytes."""
    with open(FORMAT_MD, encoding="utf-8") as f:
        text = f.read()
    dump = text[text.index("## Worked example"):]
    dump = dump[dump.index("```") + 3:]
    dump = dump[:dump.index("```")]
    data = bytearray()
    for line in dump.strip().splitlines():
        offset, rest = line.split(": ", 1)
        assert int(offset, 16) == len(data), line
        data += bytes.fromhex(rest[:48])
    return bytes(data)


def worked_example_arrays():
    return dict(scores=np.array([[1.0, 0.5], [-2.0, 0.0]], np.float32), lengths=[2, 1], k=1,
                metadata={"step": 7})


class Temp(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)


class WorkedExample(Temp):
    def test_bytes(self):
        expected = worked_example_bytes()
        self.assertEqual(len(expected), 170)
        self.assertEqual(encode_record(**worked_example_arrays()), expected)

    def test_compressed_differs_only_where_documented(self):
        data = encode_record(**worked_example_arrays(), compress=True)
        self.assertEqual(data[:12], worked_example_bytes()[:12])
        self.assertEqual(int.from_bytes(data[12:16], "little"), 1)
        self.assertEqual(int.from_bytes(data[24:32], "little"), 98)
        path = self.path("z.bin")
        with open(path, "wb") as f:
            f.write(data)
        (record,) = read_records(path)
        self.assertTrue(record.compressed)
        self.assertEqual(record.metadata, {"step": 7})
        self.assertEqual(record.scores.tolist(), [[1.0, 0.5], [-2.0, 0.0]])


class RoundTrip(Temp):
    def test_every_section(self):
        rng = np.random.default_rng(3)
        scores = rng.standard_normal((3, 130)).astype(np.float32)
        scores[0, :4] = [-0.0, np.inf, -np.inf, np.nan]
        table = np.array([[4, 1, 2], [0, 3, 5], [9, 8, 7]], np.int64)
        path = self.path("r.bin")
        for compress in (False, True):
            append_record(path, scores, [100, 64, 0], 5, row_starts=[0, 66, 130],
                          page_table=table, page_size=64, page_table_row_starts=[0, 1, 3],
                          engine_indices=np.full((3, 5), -1), metadata={"layer": 3, "é": "ü"},
                          compress=compress)
        records = list(read_records(path))
        self.assertEqual([r.index for r in records], [0, 1])
        for record in records:
            self.assertEqual(record.scores.tobytes(), scores.tobytes())  # bit for bit
            self.assertEqual(record.row_starts.tolist(), [0, 66, 130])
            self.assertEqual(record.page_table.tolist(), table.tolist())
            self.assertEqual(record.page_table_row_starts.tolist(), [0, 1, 3])
            self.assertEqual(record.page_size, 64)
            self.assertEqual(record.metadata, {"layer": 3, "é": "ü"})
            self.assertTrue(record.scores.flags.writeable)
        self.assertEqual(records[1].offset, 72 + records[0].stored_bytes)

    def test_torch_tensors_when_asked(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        path = self.path("t.bin")
        append_record(path, np.ones((2, 4), np.float32), [4, 4], 2)
        (record,) = read_records(path, tensors="torch")
        self.assertIsInstance(record.scores, torch.Tensor)

    def test_bad_tensors_kind(self):
        path = self.path("t.bin")
        append_record(path, np.ones((1, 4), np.float32), [4], 2)
        with self.assertRaisesRegex(ValueError, "tensors"):
            list(read_records(path, tensors="jax"))


class PartialWrites(Temp):
    def test_writev_continued_where_the_kernel_wrote_less(self):
        real = os.writev
        calls = []

        def short_writev(fd, buffers):
            calls.append(len(buffers))
            data = b"".join(bytes(b) for b in buffers)[:7]
            return real(fd, [data])

        path = self.path("p.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT)
        with mock.patch.object(records_module.os, "writev", short_writev):
            records_module.write_all(fd, b"header:", np.arange(10, dtype=np.uint8), b"", b"end")
        os.close(fd)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"header:" + bytes(range(10)) + b"end")
        self.assertEqual(len(calls), 3)


class Refusals(unittest.TestCase):
    def refused(self, pattern, **changes):
        arguments = dict(scores=np.zeros((2, 8), np.float32), lengths=[8, 8], k=4)
        arguments.update(changes)
        with self.assertRaisesRegex(CaptureInputError, pattern):
            encode_record(**arguments)

    def test_inputs(self):
        self.refused("float32", scores=np.zeros((2, 8)))
        self.refused("ends past row_stride", lengths=[8, 9])
        self.refused(r"row 1: negative", lengths=[8, -1])
        self.refused("integer array", lengths=[8.0, 8.0])
        self.refused("outside int32", engine_indices=np.full((2, 4), 2**31))
        self.refused(r"shape \(2, 3\), expected \(2, 4\)", engine_indices=np.zeros((2, 3), int))
        self.refused("power of two", page_size=3, page_table=np.zeros((2, 1), int))
        self.refused("without page_table", page_size=4)
        self.refused("without page_size", page_table=np.zeros((2, 2), int))
        self.refused(r"row 0: needs page-table columns 0\.\.1, page table has 1", page_size=4,
                     page_table=np.zeros((2, 1), int))
        self.refused(r"row 1: page-table entry -1 at column 0", page_size=8,
                     page_table=np.array([[0], [-1]]))
        self.refused("out of range", k=0)
        self.refused("not JSON", metadata={"x": float("nan")})


class ReaderErrors(Temp):
    def write(self, data):
        path = self.path("bad.bin")
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_truncated_and_corrupt(self):
        good = encode_record(**worked_example_arrays())
        path = self.write(good + good[:100])
        records = []
        with self.assertRaises(CaptureError) as caught:
            for record in read_records(path):
                records.append(record)
        self.assertEqual(len(records), 1)
        self.assertTrue(caught.exception.truncated)
        self.assertIn("record 1 at byte 170: truncated: header promises 98 payload bytes, "
                      "28 remain", str(caught.exception))
        damaged = bytearray(good)
        damaged[0x90] ^= 1
        with self.assertRaisesRegex(CaptureError, "corrupt: payload SHA-256 mismatch"):
            list(read_records(self.write(bytes(damaged))))
        damaged = bytearray(good)
        damaged[9] = 2
        with self.assertRaisesRegex(CaptureError, "corrupt: header CRC-32 is 0x"):
            list(read_records(self.write(bytes(damaged))))
        with self.assertRaisesRegex(CaptureError, "no record magic"):
            list(read_records(self.write(good + b"garbage")))


class TailCheck(Temp):
    def test_clean_missing_and_torn(self):
        good = encode_record(**worked_example_arrays())
        self.assertTrue(check_tail(self.path("missing.bin")).clean)
        path = self.path("t.bin")
        with open(path, "wb") as f:
            f.write(good * 2)
        tail = check_tail(path)
        self.assertTrue(tail.clean)
        self.assertEqual((tail.records, tail.good_bytes), (2, 340))
        for cut in (1, 71, 72, 169):
            with open(path, "wb") as f:
                f.write(good * 2 + good[:cut])
            tail = check_tail(path)
            self.assertTrue(tail.torn, cut)
            self.assertEqual((tail.records, tail.good_bytes), (2, 340))
            self.assertTrue(tail.refusal().startswith(
                f"refusing to append: {path} ends in a torn record at byte 340 ("))
            self.assertIn(f"truncate -s 340 {path}", tail.refusal())
        repaired = repair_tail(path)
        self.assertTrue(repaired.torn)
        self.assertEqual(os.path.getsize(path), 340)
        self.assertTrue(check_tail(path).clean)

    def test_last_record_hash(self):
        good = encode_record(**worked_example_arrays())
        damaged = bytearray(good)
        damaged[-1] ^= 0x40
        path = self.path("h.bin")
        with open(path, "wb") as f:
            f.write(good + damaged)
        tail = check_tail(path)
        self.assertTrue(tail.torn)
        self.assertEqual(tail.good_bytes, 170)
        self.assertIn("SHA-256", tail.problem)

    def test_damage_in_the_middle_is_never_cut(self):
        good = encode_record(**worked_example_arrays())
        damaged = bytearray(good)
        damaged[20] ^= 1     # the header CRC no longer matches
        path = self.path("m.bin")
        with open(path, "wb") as f:
            f.write(good + damaged + good)
        tail = check_tail(path)
        self.assertFalse(tail.torn)
        self.assertIn("has a damaged record at byte 170 followed by 340 more bytes",
                      tail.refusal())
        with self.assertRaises(CaptureError):
            repair_tail(path)
        self.assertEqual(os.path.getsize(path), 510)


if __name__ == "__main__":
    unittest.main()
