"""Read and append dsatopk-audit capture records (docs/FORMAT.md) from Python.

Pure Python: struct, zlib, hashlib, json and os from the standard library, numpy for the arrays.

    append_record(path, scores, lengths, k, ...)   appends one record (one write, then fsync)
    read_records(path)                             yields CaptureRecord objects in file order

The format is little-endian and append-only: a file is a sequence of self-contained records
(a 72-byte header, then the payload), so concatenating capture files gives a capture file.
"""

import hashlib
import json
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np

MAGIC = b"DSATOPK\n"
FORMAT_MAJOR = 1
FORMAT_MINOR = 0
HEADER_BYTES = 72
FIXED_PART_BYTES = 64
HEADER_FLAG_ZLIB = 0x1
SECTION_ROW_STARTS = 0x1
SECTION_PAGE_TABLE = 0x2
SECTION_ENGINE_INDICES = 0x4
ZLIB_MAX_RATIO = 1032

# Limits (src/capture/capture.h); a record outside them is refused by every reader.
MAX_ROWS = 1 << 24
MAX_ROW_STRIDE = 2**31 - 1
MAX_K = 1 << 20
MAX_PAYLOAD_BYTES = 64 << 30
MAX_METADATA_BYTES = 16 << 20

# magic, major, minor, flags, stored bytes, raw bytes, sha256, reserved (the CRC follows).
_HEADER = struct.Struct("<8sHHIQQ32sI")
# rows, k, row_stride, sections, page_size, page_table_cols, metadata bytes, 24 reserved bytes.
_FIXED = struct.Struct("<IIQIIQQ24x")


class CaptureError(ValueError):
    """A record that cannot be read. truncated is True when the file ends inside the record
    (a writer killed mid-append), False when it is corrupt."""

    def __init__(self, message, index, offset, truncated):
        super().__init__(message)
        self.index = index
        self.offset = offset
        self.truncated = truncated


@dataclass
class CaptureRecord:
    index: int
    offset: int              # byte offset of the record header in its file
    k: int
    scores: np.ndarray       # float32, (rows, row_stride)
    lengths: np.ndarray      # int32, (rows,)
    row_starts: Optional[np.ndarray]             # int32, (rows,)
    page_size: int                               # 0: no page table
    page_table: Optional[np.ndarray]             # int32, (rows, page_table_cols)
    page_table_row_starts: Optional[np.ndarray]  # int32, (rows,)
    engine_indices: Optional[np.ndarray]         # int32, (rows, k)
    metadata: dict
    compressed: bool
    stored_bytes: int
    raw_bytes: int
    payload_sha256: str      # hex, of the stored payload bytes

    @property
    def rows(self):
        return self.scores.shape[0]

    @property
    def row_stride(self):
        return self.scores.shape[1]


def _int32_array(name, values, shape):
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise ValueError(f"{name}: integer array expected, got {array.dtype}")
    if array.shape != shape:
        raise ValueError(f"{name}: shape {array.shape}, expected {shape}")
    if array.size and (array.min() < -2**31 or array.max() > 2**31 - 1):
        raise ValueError(f"{name}: values outside int32")
    return np.ascontiguousarray(array, dtype="<i4")


def _check_windows(lengths, row_starts, row_stride, page_size, page_table, page_table_row_starts):
    starts = row_starts if row_starts is not None else np.zeros_like(lengths)
    for b, (length, start) in enumerate(zip(lengths.tolist(), starts.tolist())):
        if length < 0 or start < 0:
            raise ValueError(f"row {b}: negative length {length} or row start {start}")
        if start + length > row_stride:
            raise ValueError(f"row {b}: window [{start}, {start + length}) ends past row_stride "
                             f"{row_stride}")
        if not page_size:
            continue
        first = int(page_table_row_starts[b])
        pages = -(-length // page_size)
        if first < 0 or first + pages > page_table.shape[1]:
            raise ValueError(f"row {b}: needs page-table columns {first}..{first + pages - 1}, "
                             f"page table has {page_table.shape[1]}")
        needed = page_table[b, first:first + pages].astype(np.int64)
        if needed.size and (needed.min() < 0 or
                            needed.max() * page_size + page_size - 1 > 2**31 - 1):
            raise ValueError(f"row {b}: page-table entry negative or translating past int32")


def _encode_payload(scores, lengths, k, row_starts, page_table, page_size,
                    page_table_row_starts, engine_indices, metadata):
    scores = np.asarray(scores)
    if scores.ndim != 2 or scores.dtype != np.float32:
        raise ValueError("scores: a 2-D float32 array (rows, row_stride) expected")
    rows, row_stride = scores.shape
    if not 1 <= rows <= MAX_ROWS or row_stride > MAX_ROW_STRIDE or not 1 <= k <= MAX_K:
        raise ValueError(f"rows {rows}, row_stride {row_stride} or k {k} out of range")
    lengths = _int32_array("lengths", lengths, (rows,))
    sections = 0
    parts = []
    if row_starts is not None:
        sections |= SECTION_ROW_STARTS
        row_starts = _int32_array("row_starts", row_starts, (rows,))
    page_table_cols = 0
    if page_size:
        if page_size & (page_size - 1) or page_size >= 2**32:
            raise ValueError(f"page_size {page_size} is not a power of two")
        if page_table is None:
            raise ValueError("page_size given without page_table")
        page_table = np.asarray(page_table)
        if page_table.ndim != 2:
            raise ValueError("page_table: a 2-D array (rows, cols) expected")
        page_table_cols = page_table.shape[1]
        page_table = _int32_array("page_table", page_table, (rows, page_table_cols))
        if page_table_row_starts is None:
            page_table_row_starts = np.zeros(rows, dtype="<i4")
        page_table_row_starts = _int32_array("page_table_row_starts", page_table_row_starts,
                                             (rows,))
        sections |= SECTION_PAGE_TABLE
    elif page_table is not None or page_table_row_starts is not None:
        raise ValueError("page_table given without page_size")
    if engine_indices is not None:
        sections |= SECTION_ENGINE_INDICES
        engine_indices = _int32_array("engine_indices", engine_indices, (rows, k))
    _check_windows(lengths, row_starts, row_stride, page_size, page_table, page_table_row_starts)

    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ValueError("metadata: a dict (JSON object) expected")
    metadata_text = json.dumps(metadata, ensure_ascii=False, allow_nan=False,
                               separators=(",", ":")).encode("utf-8")
    if len(metadata_text) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata: {len(metadata_text)} bytes, over the limit")

    parts.append(_FIXED.pack(rows, k, row_stride, sections, page_size, page_table_cols,
                             len(metadata_text)))
    parts.append(metadata_text)
    parts.append(lengths.tobytes())
    if row_starts is not None:
        parts.append(row_starts.tobytes())
    if page_size:
        parts.append(page_table_row_starts.tobytes())
        parts.append(page_table.tobytes())
    if engine_indices is not None:
        parts.append(engine_indices.tobytes())
    parts.append(np.ascontiguousarray(scores, dtype="<f4").tobytes())
    raw = b"".join(parts)
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload of {len(raw)} bytes, over the limit")
    return raw


def encode_record(scores, lengths, k, row_starts=None, page_table=None, page_size=0,
                  page_table_row_starts=None, engine_indices=None, metadata=None,
                  compress=False):
    """The bytes of one record (header and stored payload); append_record writes them."""
    raw = _encode_payload(scores, lengths, k, row_starts, page_table, page_size,
                          page_table_row_starts, engine_indices, metadata)
    stored = zlib.compress(raw, 6) if compress else raw
    header = _HEADER.pack(MAGIC, FORMAT_MAJOR, FORMAT_MINOR,
                          HEADER_FLAG_ZLIB if compress else 0, len(stored), len(raw),
                          hashlib.sha256(stored).digest(), 0)
    return header + struct.pack("<I", zlib.crc32(header)) + stored


def append_record(path, scores, lengths, k, row_starts=None, page_table=None, page_size=0,
                  page_table_row_starts=None, engine_indices=None, metadata=None,
                  compress=False):
    """Appends one record to path (created if missing): scores float32 (rows, row_stride);
    lengths (rows,); optional row_starts (rows,); optional page_table (rows, cols) with a
    power-of-two page_size and page_table_row_starts (rows,); optional engine_indices
    (rows, k); metadata a dict. One write loop then fsync, so a writer killed mid-append
    leaves at worst a truncated last record. Returns the record's size in bytes."""
    record = encode_record(scores, lengths, k, row_starts, page_table, page_size,
                           page_table_row_starts, engine_indices, metadata, compress)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(record)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(record)


def _decode_payload(raw, raw_bytes, fail):
    if len(raw) < FIXED_PART_BYTES:
        fail(f"raw payload of {len(raw)} bytes is shorter than the fixed part")
    if any(raw[40:FIXED_PART_BYTES]):
        fail("reserved payload bytes are not zero")
    rows, k, row_stride, sections, page_size, cols, metadata_bytes = _FIXED.unpack_from(raw, 0)
    if sections & ~(SECTION_ROW_STARTS | SECTION_PAGE_TABLE | SECTION_ENGINE_INDICES):
        fail(f"section flags 0x{sections:08x} have unknown bits")
    has_page_table = bool(sections & SECTION_PAGE_TABLE)
    if has_page_table != (page_size != 0) or (page_size & (page_size - 1)) or \
            (not has_page_table and cols):
        fail(f"page_size {page_size} / page_table_cols {cols} disagree with the section flags")
    if not 1 <= rows <= MAX_ROWS or not 1 <= k <= MAX_K or row_stride > MAX_ROW_STRIDE or \
            cols > MAX_ROW_STRIDE or metadata_bytes > MAX_METADATA_BYTES:
        fail(f"rows {rows}, k {k}, row_stride {row_stride}, page_table_cols {cols} or metadata "
             f"bytes {metadata_bytes} out of range")
    words_per_row = 1 + row_stride
    if sections & SECTION_ROW_STARTS:
        words_per_row += 1
    if has_page_table:
        words_per_row += 1 + cols
    if sections & SECTION_ENGINE_INDICES:
        words_per_row += k
    words = rows * words_per_row
    implied = FIXED_PART_BYTES + metadata_bytes + 4 * words
    if implied != raw_bytes or implied != len(raw):
        fail(f"header says {raw_bytes} raw payload bytes but the fixed part implies {implied}")

    cursor = FIXED_PART_BYTES

    def take(count, shape):
        nonlocal cursor
        array = np.frombuffer(raw, dtype="<i4", count=count, offset=cursor).reshape(shape)
        cursor += 4 * count
        return array.astype(np.int32)

    try:
        metadata = json.loads(raw[cursor:cursor + metadata_bytes].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        fail(f"metadata: {error}")
    if not isinstance(metadata, dict):
        fail("metadata: not a JSON object")
    cursor += metadata_bytes
    lengths = take(rows, (rows,))
    row_starts = take(rows, (rows,)) if sections & SECTION_ROW_STARTS else None
    page_table_row_starts = page_table = None
    if has_page_table:
        page_table_row_starts = take(rows, (rows,))
        page_table = take(rows * cols, (rows, cols))
    engine_indices = take(rows * k, (rows, k)) if sections & SECTION_ENGINE_INDICES else None
    scores = np.frombuffer(raw, dtype="<f4", count=rows * row_stride, offset=cursor)
    scores = scores.reshape(rows, row_stride).astype(np.float32)
    try:
        _check_windows(lengths, row_starts, row_stride, page_size, page_table,
                       page_table_row_starts)
    except ValueError as error:
        fail(str(error))
    return dict(k=k, scores=scores, lengths=lengths, row_starts=row_starts, page_size=page_size,
                page_table=page_table, page_table_row_starts=page_table_row_starts,
                engine_indices=engine_indices, metadata=metadata)


def read_records(path) -> Iterator[CaptureRecord]:
    """Yields the records of path in order. A truncated or corrupt record raises CaptureError
    (after the good records before it were yielded), naming the file, record and byte offset."""
    with open(path, "rb") as file:
        file_bytes = os.fstat(file.fileno()).st_size
        offset = index = 0
        while offset < file_bytes:
            def fail(message, truncated=False):
                kind = "truncated" if truncated else "corrupt"
                raise CaptureError(f"{path}: record {index} at byte {offset}: {kind}: {message}",
                                   index, offset, truncated)

            file.seek(offset)
            header = file.read(HEADER_BYTES)
            if header[:len(MAGIC)] != MAGIC[:len(header)]:
                fail('no record magic "DSATOPK\\n" here')
            if len(header) < HEADER_BYTES:
                fail(f"the file ends {len(header)} bytes into the 72-byte record header", True)
            (magic, major, minor, flags, stored_bytes, raw_bytes, sha256,
             reserved) = _HEADER.unpack_from(header)
            (crc,) = struct.unpack_from("<I", header, 68)
            if zlib.crc32(header[:68]) != crc:
                fail("header CRC-32 mismatch")
            if major != FORMAT_MAJOR:
                fail(f"format version {major}.{minor}: this reader reads major version 1")
            if flags & ~HEADER_FLAG_ZLIB or reserved:
                fail(f"unknown header flags 0x{flags:08x} or non-zero reserved field")
            compressed = bool(flags & HEADER_FLAG_ZLIB)
            if stored_bytes > MAX_PAYLOAD_BYTES or raw_bytes > MAX_PAYLOAD_BYTES or \
                    raw_bytes < FIXED_PART_BYTES or \
                    (not compressed and stored_bytes != raw_bytes) or \
                    (compressed and raw_bytes > stored_bytes * ZLIB_MAX_RATIO):
                fail(f"impossible sizes: {stored_bytes} stored, {raw_bytes} raw payload bytes")
            remaining = file_bytes - offset - HEADER_BYTES
            if stored_bytes > remaining:
                fail(f"header promises {stored_bytes} payload bytes, {remaining} remain", True)
            stored = file.read(stored_bytes)
            if hashlib.sha256(stored).digest() != sha256:
                fail("payload SHA-256 mismatch")
            raw = stored
            if compressed:
                inflater = zlib.decompressobj()
                try:
                    raw = inflater.decompress(stored, raw_bytes)
                    # Output stopped at raw_bytes: the stream must end there with no more data.
                    extra = b"" if inflater.eof else inflater.decompress(inflater.unconsumed_tail, 1)
                except zlib.error as error:
                    fail(f"zlib payload: {error}")
                if extra or not inflater.eof or inflater.unused_data or len(raw) != raw_bytes:
                    fail("zlib payload does not inflate to exactly the raw payload bytes")
            fields = _decode_payload(raw, raw_bytes, fail)
            yield CaptureRecord(index=index, offset=offset, compressed=compressed,
                                stored_bytes=stored_bytes, raw_bytes=raw_bytes,
                                payload_sha256=sha256.hex(), **fields)
            offset += HEADER_BYTES + stored_bytes
            index += 1
