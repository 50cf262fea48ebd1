"""One zlib stream (RFC 1950) compressed in chunks on several threads, as pigz does.

A record's payload is one zlib stream (docs/FORMAT.md), and one deflate stream runs on one
thread. But a deflate stream is a sequence of blocks, and a compressor that ends its input with
Z_SYNC_FLUSH has emitted every block it owes, byte-aligned (behind an empty stored block), without
the final-block bit. So the payload is cut into chunks, each chunk is raw-deflated by a fresh
compressor on its own thread (its back-references reach only into its own chunk), every chunk but
the last ends with Z_SYNC_FLUSH and the last with Z_FINISH, and the concatenation behind a zlib
header, followed by the big-endian Adler-32 of the whole payload, is one valid zlib stream. Each
chunk's Adler-32 is computed with it and the checksums are combined, so no thread reads the whole
payload. Any inflater reads the result; its bytes differ from single-threaded zlib's (a 5-byte
flush marker per chunk, no matches across chunks), which the format allows.

zlib.compressobj and zlib.adler32 release the GIL on large buffers, so the chunks do run in
parallel.
"""

import zlib

CHUNK_BYTES = 1 << 20      # the flush marker and the lost cross-chunk matches cost < 0.1 %
ADLER_BASE = 65521


def zlib_header(level):
    """The two header bytes zlib writes for a 32 KiB window at this level."""
    return zlib.compress(b"", level)[:2]


def adler32_combine(first, second, second_length):
    """The Adler-32 of A + B from adler32(A), adler32(B) and len(B) (zlib's adler32_combine):
    the low sum adds B's bytes to A's; the high sum adds, for every byte of B, A's low sum
    once more (less the initial 1 each sum starts from)."""
    low = ((first & 0xffff) + (second & 0xffff) - 1) % ADLER_BASE
    high = ((first >> 16) + (second >> 16) +
            (second_length % ADLER_BASE) * ((first & 0xffff) - 1)) % ADLER_BASE
    return (high << 16) | low


def split(parts, chunk_bytes=CHUNK_BYTES):
    """The byte buffers `parts` cut into chunks of chunk_bytes (the last one shorter): a list of
    lists of memoryviews that together are the concatenation of parts, in order."""
    chunks, current, filled = [], [], 0
    for part in parts:
        view = memoryview(part).cast("B")
        while view.nbytes:
            taken = view[:chunk_bytes - filled]
            current.append(taken)
            filled += taken.nbytes
            view = view[taken.nbytes:]
            if filled == chunk_bytes:
                chunks.append(current)
                current, filled = [], 0
    if current:
        chunks.append(current)
    return chunks


def deflate_chunk(pieces, level, last):
    """Raw deflate of the concatenated pieces, ended with Z_FINISH when last, else with
    Z_SYNC_FLUSH. Returns (compressed bytes, Adler-32 of the input, input length)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    out, adler, length = [], 1, 0
    for piece in pieces:
        out.append(compressor.compress(piece))
        adler = zlib.adler32(piece, adler)
        length += piece.nbytes
    out.append(compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH))
    return b"".join(out), adler, length


def compress_chunks(parts, level, submit, chunk_bytes=CHUNK_BYTES):
    """Starts compressing the concatenation of parts: submit(function, *arguments) runs each
    chunk (a thread pool's submit, returning a future). Returns the futures in stream order;
    assemble() makes the stream from their results."""
    chunks = split(parts, chunk_bytes)
    return [submit(deflate_chunk, chunk, level, index == len(chunks) - 1)
            for index, chunk in enumerate(chunks)]


def assemble(level, results):
    """The zlib stream from the chunk results of compress_chunks, in order: a list of byte
    buffers (header, the chunks, the Adler-32 trailer) that concatenate to it."""
    adler = 1
    stream = [zlib_header(level)]
    for compressed, chunk_adler, length in results:
        adler = adler32_combine(adler, chunk_adler, length)
        stream.append(compressed)
    stream.append(adler.to_bytes(4, "big"))
    return stream
