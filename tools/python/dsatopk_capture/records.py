"""The capture format (docs/FORMAT.md): checking, encoding, appending and reading records.

A file is an append-only sequence of self-contained records: a 72-byte header (magic, version,
flags, payload sizes, the SHA-256 of the stored payload, a CRC-32 of the header) and the stored
payload (raw or one zlib stream). Every integer is little-endian. The bytes written here are the
bytes `dsatopk-audit` writes for the same input, and each reads what the other wrote.
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
ZLIB_LEVEL = 6

# Limits (src/capture/capture.h); a record outside them is refused by every reader.
MAX_ROWS = 1 << 24
MAX_ROW_STRIDE = 2**31 - 1
MAX_K = 1 << 20
MAX_PAYLOAD_BYTES = 64 << 30
MAX_METADATA_BYTES = 16 << 20
INT32_MAX = 2**31 - 1

# magic, major, minor, flags, stored bytes, raw bytes, sha256, reserved (the CRC follows).
_HEADER = struct.Struct("<8sHHIQQ32sI")
# rows, k, row_stride, sections, page_size, page_table_cols, metadata bytes, 24 reserved bytes.
_FIXED = struct.Struct("<IIQIIQQ24x")


class CaptureError(ValueError):
    """A record that cannot be read. truncated is True when the file ends inside the record
    (a writer killed mid-append), False when it is corrupt."""

    def __init__(self, message, index, offset, truncated, detail=None):
        super().__init__(message)
        self.index = index
        self.offset = offset
        self.truncated = truncated
        self.detail = message if detail is None else detail  # the message without its place


class CaptureInputError(ValueError):
    """Arrays that do not make a valid record (a wrong dtype or shape, a window past the row,
    an index outside int32, ...). The message names the array, the row and the fix."""


class _ScoresShape:
    @property
    def rows(self):
        return self.scores.shape[0]

    @property
    def row_stride(self):
        return self.scores.shape[1]


@dataclass
class CaptureRecord(_ScoresShape):
    index: int
    offset: int              # byte offset of the record header in its file
    k: int
    scores: object           # float32 (rows, row_stride): numpy, or torch when asked for
    lengths: object          # int32 (rows,)
    row_starts: Optional[object]             # int32 (rows,)
    page_size: int                           # 0: no page table
    page_table: Optional[object]             # int32 (rows, page_table_cols)
    page_table_row_starts: Optional[object]  # int32 (rows,)
    engine_indices: Optional[object]         # int32 (rows, k)
    metadata: dict
    compressed: bool
    stored_bytes: int
    raw_bytes: int
    payload_sha256: str      # hex, of the stored payload bytes
    path: str = ""


@dataclass
class PreparedRecord(_ScoresShape):
    """The arrays of one record, checked against the consistency rules and limits, in the
    dtypes and layout they are stored in (C order, little-endian)."""
    scores: np.ndarray                       # <f4 (rows, row_stride)
    lengths: np.ndarray                      # <i4 (rows,)
    k: int
    row_starts: Optional[np.ndarray] = None
    page_size: int = 0
    page_table: Optional[np.ndarray] = None
    page_table_row_starts: Optional[np.ndarray] = None
    engine_indices: Optional[np.ndarray] = None

    @property
    def sections(self):
        return ((SECTION_ROW_STARTS if self.row_starts is not None else 0) |
                (SECTION_PAGE_TABLE if self.page_size else 0) |
                (SECTION_ENGINE_INDICES if self.engine_indices is not None else 0))


def _int32_array(name, values, shape):
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise CaptureInputError(f"{name}: integer array expected, got dtype {array.dtype}")
    if array.shape != shape:
        raise CaptureInputError(f"{name}: shape {array.shape}, expected {shape}")
    if array.size and array.dtype.itemsize >= 4 and \
            (int(array.min()) < -2**31 or int(array.max()) > INT32_MAX):
        raise CaptureInputError(f"{name}: values outside int32 "
                                f"({int(array.min())} .. {int(array.max())})")
    return np.ascontiguousarray(array, dtype="<i4")


def _first(mask):
    return int(np.flatnonzero(mask)[0])


def check_windows(lengths, row_starts, row_stride, page_size=0, page_table=None,
                  page_table_row_starts=None, error=CaptureInputError):
    """Raises error naming the first row that breaks a consistency rule of docs/FORMAT.md."""
    lengths = lengths.astype(np.int64)
    starts = row_starts.astype(np.int64) if row_starts is not None else np.zeros_like(lengths)
    bad = (lengths < 0) | (starts < 0)
    if bad.any():
        b = _first(bad)
        raise error(f"row {b}: negative length {lengths[b]} or row start {starts[b]}")
    past = starts + lengths > row_stride
    if past.any():
        b = _first(past)
        raise error(f"row {b}: window [{starts[b]}, {starts[b] + lengths[b]}) ends past "
                    f"row_stride {row_stride}")
    if not page_size:
        return
    cols = page_table.shape[1]
    first = page_table_row_starts.astype(np.int64)
    pages = (lengths + page_size - 1) // page_size
    outside = (first < 0) | (first + pages > cols)
    if outside.any():
        b = _first(outside)
        raise error(f"row {b}: needs page-table columns {first[b]}..{first[b] + pages[b] - 1}, "
                    f"page table has {cols}")
    column = np.arange(cols, dtype=np.int64)[None, :]
    needed = (column >= first[:, None]) & (column < (first + pages)[:, None])
    entries = page_table.astype(np.int64)
    wrong = needed & ((entries < 0) | (entries * page_size + page_size - 1 > INT32_MAX))
    if wrong.any():
        b, column_at = (int(x) for x in np.argwhere(wrong)[0])
        raise error(f"row {b}: page-table entry {entries[b, column_at]} at column {column_at} is "
                    f"negative or translates past int32 with page_size {page_size}")


def prepare_indices(rows, row_stride, k, lengths, row_starts=None, page_table=None,
                    page_size=0, page_table_row_starts=None, engine_indices=None):
    """Checks everything of a record but the scores values: the limits, the integer arrays
    (stored as int32) and the consistency rules. Returns a PreparedRecord whose scores is
    None (prepare_record fills it). Raises CaptureInputError naming what is wrong."""
    k = int(k)
    if not 1 <= rows <= MAX_ROWS or row_stride > MAX_ROW_STRIDE or not 1 <= k <= MAX_K:
        raise CaptureInputError(f"rows {rows}, row_stride {row_stride} or k {k} out of range "
                                f"(rows 1..{MAX_ROWS}, row_stride <= {MAX_ROW_STRIDE}, "
                                f"k 1..{MAX_K})")
    record = PreparedRecord(scores=None, lengths=_int32_array("lengths", lengths, (rows,)), k=k)
    if row_starts is not None:
        record.row_starts = _int32_array("row_starts", row_starts, (rows,))
    page_size = int(page_size or 0)
    if page_size:
        if page_size < 0 or page_size & (page_size - 1) or page_size >= 2**32:
            raise CaptureInputError(f"page_size {page_size} is not a power of two")
        if page_table is None:
            raise CaptureInputError("page_size given without page_table")
        page_table = np.asarray(page_table)
        if page_table.ndim != 2:
            raise CaptureInputError("page_table: a 2-D array (rows, cols) expected")
        if page_table.shape[1] > MAX_ROW_STRIDE:
            raise CaptureInputError(f"page_table: {page_table.shape[1]} columns, over the limit")
        record.page_size = page_size
        record.page_table = _int32_array("page_table", page_table, (rows, page_table.shape[1]))
        if page_table_row_starts is None:
            page_table_row_starts = np.zeros(rows, dtype="<i4")
        record.page_table_row_starts = _int32_array("page_table_row_starts",
                                                    page_table_row_starts, (rows,))
    elif page_table is not None or page_table_row_starts is not None:
        raise CaptureInputError("page_table given without page_size")
    if engine_indices is not None:
        record.engine_indices = _int32_array("engine_indices", engine_indices, (rows, k))
    check_windows(record.lengths, record.row_starts, row_stride, record.page_size,
                  record.page_table, record.page_table_row_starts)
    return record


def prepare_record(scores, lengths, k, row_starts=None, page_table=None, page_size=0,
                   page_table_row_starts=None, engine_indices=None):
    """Checks the arrays of one record against the limits and consistency rules and returns
    them as stored (a PreparedRecord); raises CaptureInputError naming what is wrong."""
    scores = np.asarray(scores)
    if scores.ndim != 2 or scores.dtype != np.float32:
        raise CaptureInputError(f"scores: a 2-D float32 array (rows, row_stride) expected, got "
                                f"{scores.ndim}-D {scores.dtype}")
    record = prepare_indices(scores.shape[0], scores.shape[1], k, lengths, row_starts,
                             page_table, page_size, page_table_row_starts, engine_indices)
    record.scores = np.ascontiguousarray(scores, dtype="<f4")
    return record


def metadata_bytes(metadata):
    """The stored metadata text: compact JSON, UTF-8, keys in insertion order ({} for None)."""
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise CaptureInputError("metadata: a dict (JSON object) expected")
    try:
        text = json.dumps(metadata, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise CaptureInputError(f"metadata: not JSON: {error}") from None
    if len(text) > MAX_METADATA_BYTES:
        raise CaptureInputError(f"metadata: {len(text)} bytes, over the limit "
                                f"{MAX_METADATA_BYTES}")
    return text


def raw_payload_bytes(record, metadata_length):
    """The raw payload size of a prepared record (the formula of docs/FORMAT.md)."""
    words_per_row = 1 + record.row_stride
    if record.row_starts is not None:
        words_per_row += 1
    if record.page_size:
        words_per_row += 1 + record.page_table.shape[1]
    if record.engine_indices is not None:
        words_per_row += record.k
    return FIXED_PART_BYTES + metadata_length + 4 * record.rows * words_per_row


def payload_parts(record, metadata=None):
    """The raw payload of a PreparedRecord as parts that concatenate to it, without copying the
    arrays: the fixed part and metadata (bytes), then each present section (a byte view of its
    array). Returns (parts, raw payload size)."""
    text = metadata_bytes(metadata)
    size = raw_payload_bytes(record, len(text))
    if size > MAX_PAYLOAD_BYTES:
        raise CaptureInputError(f"payload of {size} bytes, over the limit {MAX_PAYLOAD_BYTES}")
    cols = record.page_table.shape[1] if record.page_size else 0
    fixed = _FIXED.pack(record.rows, record.k, record.row_stride, record.sections,
                        record.page_size, cols, len(text))   # the reserved bytes are packed as 0
    parts = [fixed + text]
    arrays = [(record.lengths, "<i4"), (record.row_starts, "<i4"),
              (record.page_table_row_starts, "<i4"), (record.page_table, "<i4"),
              (record.engine_indices, "<i4"), (record.scores, "<f4")]
    for array, stored in arrays:
        if array is None or not array.size:
            continue
        array = np.ascontiguousarray(array, dtype=stored)
        parts.append(memoryview(array.reshape(-1)).cast("B"))
    return parts, size


def record_header(stored_bytes, raw_bytes, sha256, compressed):
    """The 72-byte header of a record whose stored payload has stored_bytes bytes and the
    SHA-256 digest sha256."""
    header = _HEADER.pack(MAGIC, FORMAT_MAJOR, FORMAT_MINOR, HEADER_FLAG_ZLIB if compressed else 0,
                          stored_bytes, raw_bytes, sha256, 0)
    return header + struct.pack("<I", zlib.crc32(header))


def encode_parts(record, metadata=None, compress=False, level=ZLIB_LEVEL):
    """The header (bytes) and the stored payload (a buffer) of one record from a
    PreparedRecord: the payload joined into one buffer (and compressed as one zlib stream when
    asked), which is what `dsatopk-audit` writes byte for byte."""
    parts, size = payload_parts(record, metadata)
    raw = np.empty(size, np.uint8)     # every byte is overwritten: no zero-filling
    cursor = 0
    for part in parts:
        end = cursor + len(part)
        raw[cursor:end] = np.frombuffer(part, np.uint8)
        cursor = end
    stored = zlib.compress(raw, level) if compress else raw
    return record_header(len(stored), size, hashlib.sha256(stored).digest(), compress), stored


def encode_prepared(record, metadata=None, compress=False, level=ZLIB_LEVEL):
    """The bytes of one record (header and stored payload) from a PreparedRecord."""
    return b"".join(encode_parts(record, metadata, compress, level))


def encode_record(scores, lengths, k, row_starts=None, page_table=None, page_size=0,
                  page_table_row_starts=None, engine_indices=None, metadata=None,
                  compress=False, level=ZLIB_LEVEL):
    """The bytes of one record: scores float32 (rows, row_stride); lengths (rows,); optional
    row_starts (rows,); optional page_table (rows, cols) with a power-of-two page_size and
    page_table_row_starts (rows,); optional engine_indices (rows, k); metadata a dict."""
    record = prepare_record(scores, lengths, k, row_starts, page_table, page_size,
                            page_table_row_starts, engine_indices)
    return encode_prepared(record, metadata, compress, level)


def write_all(fd, *parts):
    """Writes the parts back to back with one writev, continued only where the kernel wrote
    less."""
    views = [memoryview(part).cast("B") for part in parts]
    views = [view for view in views if view.nbytes]
    while views:
        written = os.writev(fd, views)
        while views and written >= views[0].nbytes:
            written -= views[0].nbytes
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]


def append_record(path, scores, lengths, k, row_starts=None, page_table=None, page_size=0,
                  page_table_row_starts=None, engine_indices=None, metadata=None,
                  compress=False, level=ZLIB_LEVEL):
    """Appends one record to path (created if missing) with one write loop, then fsync, so a
    writer killed mid-append leaves at worst a truncated last record. Does not look at what
    the file already holds (CaptureHook checks its tail first). Returns the record's size."""
    data = encode_record(scores, lengths, k, row_starts, page_table, page_size,
                         page_table_row_starts, engine_indices, metadata, compress, level)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(data)


# ---- reading ------------------------------------------------------------------------------------

def _decode_payload(raw, raw_bytes, fail):
    if len(raw) < FIXED_PART_BYTES:
        fail(f"raw payload of {len(raw)} bytes is shorter than the fixed part")
    if any(raw[40:FIXED_PART_BYTES]):
        fail("reserved payload bytes are not zero")
    rows, k, row_stride, sections, page_size, cols, text_bytes = _FIXED.unpack_from(raw, 0)
    if sections & ~(SECTION_ROW_STARTS | SECTION_PAGE_TABLE | SECTION_ENGINE_INDICES):
        fail(f"section flags 0x{sections:08x} have unknown bits")
    has_page_table = bool(sections & SECTION_PAGE_TABLE)
    if has_page_table != (page_size != 0) or (page_size & (page_size - 1)) or \
            (not has_page_table and cols):
        fail(f"page_size {page_size} / page_table_cols {cols} disagree with the section flags")
    if not 1 <= rows <= MAX_ROWS or not 1 <= k <= MAX_K or row_stride > MAX_ROW_STRIDE or \
            cols > MAX_ROW_STRIDE or text_bytes > MAX_METADATA_BYTES:
        fail(f"rows {rows}, k {k}, row_stride {row_stride}, page_table_cols {cols} or metadata "
             f"bytes {text_bytes} out of range")
    words_per_row = 1 + row_stride
    if sections & SECTION_ROW_STARTS:
        words_per_row += 1
    if has_page_table:
        words_per_row += 1 + cols
    if sections & SECTION_ENGINE_INDICES:
        words_per_row += k
    implied = FIXED_PART_BYTES + text_bytes + 4 * rows * words_per_row
    if implied != raw_bytes or implied != len(raw):
        fail(f"header says {raw_bytes} raw payload bytes but the fixed part implies {implied}")

    cursor = FIXED_PART_BYTES

    def take(dtype, shape):
        nonlocal cursor
        count = int(np.prod(shape))
        array = np.frombuffer(raw, dtype=dtype, count=count, offset=cursor).reshape(shape)
        cursor += 4 * count
        return array.astype(dtype[1:], copy=True)  # native order, writable, owns its memory

    text = bytes(raw[cursor:cursor + text_bytes])
    if b"\0" in text:
        fail("metadata: contains a NUL byte")
    try:
        metadata = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        fail(f"metadata: {error}")
    if not isinstance(metadata, dict):
        fail("metadata: not a JSON object")
    cursor += text_bytes
    lengths = take("<i4", (rows,))
    row_starts = take("<i4", (rows,)) if sections & SECTION_ROW_STARTS else None
    page_table_row_starts = page_table = None
    if has_page_table:
        page_table_row_starts = take("<i4", (rows,))
        page_table = take("<i4", (rows, cols))
    engine_indices = take("<i4", (rows, k)) if sections & SECTION_ENGINE_INDICES else None
    scores = take("<f4", (rows, row_stride))
    try:
        check_windows(lengths, row_starts, row_stride, page_size, page_table,
                      page_table_row_starts, error=ValueError)
    except ValueError as error:
        fail(str(error))
    return dict(k=k, scores=scores, lengths=lengths, row_starts=row_starts, page_size=page_size,
                page_table=page_table, page_table_row_starts=page_table_row_starts,
                engine_indices=engine_indices, metadata=metadata)


def _inflate(stored, raw_bytes, fail):
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(stored, raw_bytes)
        # Output stopped at raw_bytes: the stream must end there with no more data.
        extra = b"" if inflater.eof else inflater.decompress(inflater.unconsumed_tail, 1)
    except zlib.error as error:
        fail(f"zlib payload: {error}")
    if extra or not inflater.eof or inflater.unused_data or len(raw) != raw_bytes:
        fail("zlib payload does not inflate to exactly the raw payload bytes")
    return raw


def _read_header(file, path, index, offset, file_bytes):
    """The header fields of the record at offset; raises CaptureError for a bad one."""
    def fail(message, truncated=False):
        kind = "truncated" if truncated else "corrupt"
        raise CaptureError(f"{path}: record {index} at byte {offset}: {kind}: {message}",
                           index, offset, truncated, f"{kind}: {message}")

    file.seek(offset)
    header = file.read(HEADER_BYTES)
    if header[:len(MAGIC)] != MAGIC[:len(header)]:
        fail('no record magic "DSATOPK\\n" here')
    if len(header) < HEADER_BYTES:
        fail(f"the file ends {len(header)} bytes into the 72-byte record header", True)
    (_, major, minor, flags, stored_bytes, raw_bytes, sha256,
     reserved) = _HEADER.unpack_from(header)
    (crc,) = struct.unpack_from("<I", header, 68)
    computed = zlib.crc32(header[:68])
    if computed != crc:
        fail(f"header CRC-32 is 0x{crc:08x} but header bytes 0..67 give 0x{computed:08x}")
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
    return compressed, stored_bytes, raw_bytes, sha256, fail


def _tensors(fields, kind):
    if kind == "numpy":
        return fields
    if kind != "torch":
        raise ValueError(f'tensors: "numpy" or "torch", not {kind!r}')
    import torch  # asked for by name: the caller has torch
    for name in ("scores", "lengths", "row_starts", "page_table", "page_table_row_starts",
                 "engine_indices"):
        if fields[name] is not None:
            fields[name] = torch.from_numpy(fields[name])
    return fields


def read_records(path, tensors="numpy") -> Iterator[CaptureRecord]:
    """Yields the records of path in order, with numpy arrays (tensors="torch": torch tensors
    on the CPU). A truncated or corrupt record raises CaptureError after the good records
    before it were yielded, naming the file, record and byte offset."""
    if tensors not in ("numpy", "torch"):
        raise ValueError(f'tensors: "numpy" or "torch", not {tensors!r}')
    with open(path, "rb") as file:
        file_bytes = os.fstat(file.fileno()).st_size
        offset = index = 0
        while offset < file_bytes:
            compressed, stored_bytes, raw_bytes, sha256, fail = _read_header(
                file, path, index, offset, file_bytes)
            stored = file.read(stored_bytes)
            digest = hashlib.sha256(stored).digest()
            if digest != sha256:
                fail(f"payload SHA-256 mismatch: header has {sha256.hex()[:4]}..., the "
                     f"{stored_bytes} stored bytes give {digest.hex()[:4]}...")
            raw = _inflate(stored, raw_bytes, fail) if compressed else stored
            fields = _tensors(_decode_payload(raw, raw_bytes, fail), tensors)
            yield CaptureRecord(index=index, offset=offset, compressed=compressed,
                                stored_bytes=stored_bytes, raw_bytes=raw_bytes,
                                payload_sha256=sha256.hex(), path=str(path), **fields)
            offset += HEADER_BYTES + stored_bytes
            index += 1


# ---- the tail of a file before appending --------------------------------------------------------

@dataclass
class Tail:
    """What check_tail found. good_bytes: the offset up to which the file holds complete
    records (the file size when it is clean); records: how many. torn: the damage is at the
    end (a write cut short), so truncating to good_bytes loses no complete record."""
    path: str
    size: int
    records: int
    good_bytes: int
    problem: Optional[str] = None
    torn: bool = False

    @property
    def clean(self):
        return self.problem is None

    def refusal(self):
        """The message a writer gives when it refuses to append after this tail."""
        if self.torn:
            return (f"refusing to append: {self.path} ends in a torn record at byte "
                    f"{self.good_bytes} ({self.problem}); keep the {self.records} complete "
                    f"records before it with `truncate -s {self.good_bytes} {self.path}`, or "
                    f"let the hook do it (CaptureHook(..., repair_tail=True))")
        return (f"refusing to append: {self.path} has a damaged record at byte "
                f"{self.good_bytes} followed by {self.size - self.good_bytes} more bytes "
                f"({self.problem}); appending would bury new records behind it: check it with "
                f"`dsatopk-audit inspect --verify {self.path}` and move it aside")


def check_tail(path):
    """Walks the record headers of path (CRC-checked) and verifies the SHA-256 of the last
    record, without decoding payloads. A missing or empty file is clean."""
    try:
        file = open(path, "rb")
    except FileNotFoundError:
        return Tail(str(path), 0, 0, 0)
    with file:
        size = os.fstat(file.fileno()).st_size
        offset = index = 0
        while offset < size:
            try:
                _, stored_bytes, _, sha256, _ = _read_header(file, path, index, offset, size)
            except CaptureError as error:
                file.seek(offset)
                rest_is_zero = not file.read(1 << 20).strip(b"\0") and size - offset <= 1 << 20
                return Tail(str(path), size, index, offset, error.detail,
                            torn=error.truncated or rest_is_zero)
            end = offset + HEADER_BYTES + stored_bytes
            if end == size:
                digest = hashlib.sha256()
                remaining = stored_bytes
                while remaining:
                    chunk = file.read(min(remaining, 1 << 24))
                    digest.update(chunk)
                    remaining -= len(chunk)
                if digest.digest() != sha256:
                    return Tail(str(path), size, index, offset,
                                "corrupt: the payload SHA-256 of the last record does not match",
                                torn=True)
            offset = end
            index += 1
        return Tail(str(path), size, index, size)


def repair_tail(path):
    """Truncates a torn tail (check_tail(...).torn) back to the last complete record; refuses
    damage followed by more bytes. Returns the Tail found before the repair."""
    tail = check_tail(path)
    if tail.clean:
        return tail
    if not tail.torn:
        raise CaptureError(tail.refusal(), tail.records, tail.good_bytes, False)
    os.truncate(path, tail.good_bytes)
    return tail
