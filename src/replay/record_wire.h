/* A replayed record, its k, file name and dump stem in one buffer: how `run` hands a record to
 * its session worker (src/replay/session_worker.c), through its socket or, when big, in a file
 * in memory. Both ends are the same binary on the same
 * machine: the header is a plain struct, the arrays follow in native byte order. */
#ifndef DSATOPK_RECORD_WIRE_H
#define DSATOPK_RECORD_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"

/* Records whose buffer is bigger than this are not copied through the session's socket (a copy
 * into a buffer, through the socket, into the worker's own buffer) but written once into a file
 * in memory whose descriptor the worker maps (record_wire_encode_file): from 1 MiB up that
 * handover takes half the time (tests/bench_record_handover.c, docs/PERF.md "The audit
 * itself"). */
#define RECORD_WIRE_SOCKET_MAX_BYTES ((size_t)1 << 20)

/* The buffer (malloc'd, *bytes long); NULL when it would pass RECORD_WIRE_SOCKET_MAX_BYTES or
 * memory is short. */
void *record_wire_encode(const struct capture_record *record, uint32_t k, const char *file,
                         const char *stem, size_t *bytes);

/* The same bytes in an anonymous file in memory (memfd_create, close-on-exec), of any size:
 * returns its descriptor, the caller's to close, and its length in *bytes; -1 when it cannot be
 * made or written (errno says why: out of memory, too many files). */
int record_wire_encode_file(const struct capture_record *record, uint32_t k, const char *file,
                            const char *stem, size_t *bytes);

/* The record of a buffer made by record_wire_encode, its arrays, metadata, file and stem pointing
 * into the buffer (which must outlive them; never capture_record_free it). false when the buffer
 * is malformed: too short or long for its header, or a string without its NUL. */
bool record_wire_decode(void *buffer, size_t bytes, struct capture_record *record, uint32_t *k,
                        const char **file, const char **stem);

#endif
