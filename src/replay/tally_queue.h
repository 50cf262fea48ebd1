/* The host work of the reps' new outputs beside the reps (docs/PERF.md "The audit itself").
 *
 * A rep whose output is new costs the host about a millisecond on a 64 x 131072 record (its
 * SHA-256, set hash, checks and comparison with the first rep), three times the kernel of a
 * flapping backend: done in the rep, it left the GPU idle. The queue hands each such output,
 * copied back into one of a few slots, to one thread that adds it to the tally
 * (output_tally_add_hashed) while the next reps launch; the reps only wait for a free slot.
 *
 * Nothing in the report depends on it: the thread adds the outputs in rep order, and a rep whose
 * GPU row hashes equal an output handed over earlier is counted as that output's distinct entry
 * when its turn comes (output_tally_add_repeat), exactly what output_tally_add_if_known would
 * have counted had that output been added already (equal outputs have equal row hashes, which
 * the pre-filter assumes in any case). The row-hash vectors kept to recognise outputs have the
 * tally's budget (OUTPUT_TALLY_ROW_HASH_BUDGET_BYTES), so the same outputs are copied back.
 *
 * With DSATOPK_HOST_THREADS=1, or when the thread cannot be started, the outputs are added on
 * the calling thread, in the rep, as before. One queue per tally; the calling thread is the
 * only one to call these functions. */
#ifndef DSATOPK_TALLY_QUEUE_H
#define DSATOPK_TALLY_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checks.h"
#include "error.h"
#include "report.h"

/* Host memory the slots may hold at once (at least one slot is always made, whatever its size). */
#define TALLY_QUEUE_SLOT_BUDGET_BYTES ((size_t)256 << 20)
/* At most this many outputs waiting for the thread. */
#define TALLY_QUEUE_MAX_SLOTS 32u

/* Where the next new output is copied: out (rows * k), raw (rows * k, with a page table) and
 * row_hashes (rows, with the pre-filter), each NULL when the queue was made without it. */
struct tally_slot {
    int32_t *out;
    int32_t *raw;
    uint64_t *row_hashes;
};

struct tally_queue;

/* A queue feeding tally (initialised, empty). checks, claims and reference are handed to
 * output_tally_add_hashed as they are and must outlive the queue. raw: slots get a raw output;
 * row_hashes: slots get row hashes and tally_queue_add_if_known can recognise outputs. */
int tally_queue_create(struct tally_queue **queue, struct output_tally *tally,
                       struct check_context *checks, const struct check_claims *claims,
                       const int32_t *reference, bool raw, bool row_hashes,
                       struct audit_error *err);

/* The pre-filter: when an output handed over earlier had exactly these row hashes, queues this
 * rep as a repeat of it and returns true; false, queuing nothing, otherwise (and when the tally
 * is full: the caller then adds the output in full and gets the tally's error). */
bool tally_queue_add_if_known(struct tally_queue *queue, const uint64_t *row_hashes,
                              double time_us);

/* A free slot for the next new output, waiting for the thread when every slot is taken. Fails
 * with the error of an earlier output's host work (and then nothing more is added). */
int tally_queue_slot(struct tally_queue *queue, struct tally_slot **slot,
                     struct audit_error *err);

/* Hands the slot (filled) over: its output is added to the tally in rep order. Without the
 * thread the output is added now and a failure comes back here. */
int tally_queue_add(struct tally_queue *queue, struct tally_slot *slot, double time_us,
                    struct audit_error *err);

/* Waits for every output handed over, stops the thread and frees the queue (NULL: nothing).
 * Returns the first failure of the host work, if any. The time the calling thread waited for the
 * thread (here and for slots) is recorded in the tally (output_tally.beside_wait_ms). */
int tally_queue_finish(struct tally_queue *queue, struct audit_error *err);

#endif
