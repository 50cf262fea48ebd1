/* The host work of new outputs on a thread beside the reps (see tally_queue.h). */
#include "tally_queue.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "host_threads.h"

/* One rep handed over, in rep order: a new output in a slot, or a repeat of the seq-th new
 * output handed over. */
struct queue_item {
    bool repeat;
    uint32_t slot;
    uint32_t seq;
    double time_us;
};

/* A row-hash vector of a new output handed over, to recognise its repeats before the thread has
 * added it. */
struct known_output {
    uint64_t digest;
    uint64_t *row_hashes;
    uint32_t seq;
};

struct tally_queue {
    struct output_tally *tally;
    struct check_context *checks;
    const struct check_claims *claims;
    const int32_t *reference;
    uint32_t rows;
    size_t count;          /* rows * k */
    bool raw, row_hashes;  /* what a slot holds besides the output */

    /* Slots: made when first needed, up to slot_limit; free ones in free_slots. */
    struct tally_slot *slots;
    uint32_t slot_limit, slots_made;
    uint32_t *free_slots;
    uint32_t free_count;

    /* Reps handed over (items[0 .. tail)); the thread has finished items[0 .. head). */
    struct queue_item *items;
    uint32_t capacity, head, tail;
    uint32_t new_outputs;  /* new outputs handed over: the next seq */
    uint32_t *distinct_of; /* per seq: its index in tally->distinct (set by the thread) */

    /* The calling thread's memory of the row hashes handed over (the tally's budget). */
    struct known_output *known;
    uint32_t known_count;
    size_t known_bytes;

    pthread_mutex_t lock;
    pthread_cond_t work, done;
    pthread_t thread;
    bool lock_made, threaded, stopping;
    int failure;
    struct audit_error failure_error;
    double wait_ms;
};

static uint64_t row_hashes_digest(const uint64_t *row_hashes, uint32_t rows)
{
    uint64_t digest = 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < rows; i++)
        digest = (digest ^ row_hashes[i]) * 0x100000001B3ull;
    return digest;
}

/* One item's host work, on the thread (or inline); the tally is only ever touched here. */
static int process_item(struct tally_queue *queue, const struct queue_item *item,
                        struct audit_error *err)
{
    struct output_tally *tally = queue->tally;
    if (item->repeat) {
        if (!output_tally_add_repeat(tally, queue->distinct_of[item->seq], item->time_us))
            return audit_fail(err, AUDIT_EUSAGE, "tally sized for %u reps got one more",
                              tally->reps_capacity);
        return AUDIT_OK;
    }
    const struct tally_slot *slot = &queue->slots[item->slot];
    int status = output_tally_add_hashed(tally, slot->out, slot->raw, slot->row_hashes,
                                         item->time_us, queue->checks, queue->claims,
                                         queue->reference, err);
    if (status == AUDIT_OK)
        queue->distinct_of[item->seq] = tally->rep_distinct[tally->reps - 1];
    return status;
}

/* After an item's host work (under the lock): the first failure is kept, the slot freed. */
static void item_done(struct tally_queue *queue, const struct queue_item *item, int status,
                      const struct audit_error *error)
{
    if (status < 0 && queue->failure == 0) {
        queue->failure = status;
        queue->failure_error = *error;
    }
    if (!item->repeat)
        queue->free_slots[queue->free_count++] = item->slot;
    queue->head++;
}

static void *queue_thread_main(void *argument)
{
    struct tally_queue *queue = argument;
    pthread_mutex_lock(&queue->lock);
    for (;;) {
        while (queue->head == queue->tail && !queue->stopping)
            pthread_cond_wait(&queue->work, &queue->lock);
        if (queue->head == queue->tail)
            break;
        const struct queue_item item = queue->items[queue->head];
        const bool failed = queue->failure < 0;
        pthread_mutex_unlock(&queue->lock);
        struct audit_error error = { 0 };
        /* After a failure the rest is only released: the tally is no longer added to. */
        const int status = failed ? AUDIT_OK : process_item(queue, &item, &error);
        pthread_mutex_lock(&queue->lock);
        item_done(queue, &item, status, &error);
        pthread_cond_broadcast(&queue->done);
    }
    pthread_mutex_unlock(&queue->lock);
    return NULL;
}

/* Hands one rep over in rep order: to the thread, or without it, adds it now as the thread would
 * and returns that failure (the thread's come back from tally_queue_slot and _finish). */
static int queue_push(struct tally_queue *queue, const struct queue_item *item,
                      struct audit_error *err)
{
    if (queue->threaded) {
        pthread_mutex_lock(&queue->lock);
        queue->items[queue->tail++] = *item;
        pthread_cond_signal(&queue->work);
        pthread_mutex_unlock(&queue->lock);
        return AUDIT_OK;
    }
    queue->tail++;
    struct audit_error error = { 0 };
    const int status = queue->failure < 0 ? AUDIT_OK : process_item(queue, item, &error);
    pthread_mutex_lock(&queue->lock);
    item_done(queue, item, status, &error);
    pthread_mutex_unlock(&queue->lock);
    if (status < 0 && err)
        *err = error;
    return status;
}

int tally_queue_create(struct tally_queue **queue_out, struct output_tally *tally,
                       struct check_context *checks, const struct check_claims *claims,
                       const int32_t *reference, bool raw, bool row_hashes,
                       struct audit_error *err)
{
    *queue_out = NULL;
    struct tally_queue *queue = calloc(1, sizeof(*queue));
    if (!queue)
        return audit_fail(err, AUDIT_ENOMEM, "out of memory for the host work queue");
    queue->tally = tally;
    queue->checks = checks;
    queue->claims = claims;
    queue->reference = reference;
    queue->rows = tally->rows;
    queue->count = (size_t)tally->rows * tally->k;
    queue->raw = raw;
    queue->row_hashes = row_hashes;
    queue->capacity = tally->reps_capacity;
    const size_t slot_bytes = queue->count * sizeof(int32_t) * (raw ? 2 : 1) +
                              (row_hashes ? (size_t)tally->rows * sizeof(uint64_t) : 0);
    size_t limit = slot_bytes ? TALLY_QUEUE_SLOT_BUDGET_BYTES / slot_bytes : TALLY_QUEUE_MAX_SLOTS;
    if (limit > TALLY_QUEUE_MAX_SLOTS)
        limit = TALLY_QUEUE_MAX_SLOTS;
    if (limit > queue->capacity)
        limit = queue->capacity;
    queue->slot_limit = limit ? (uint32_t)limit : 1;
    queue->slots = calloc(queue->slot_limit, sizeof(*queue->slots));
    queue->free_slots = calloc(queue->slot_limit, sizeof(*queue->free_slots));
    queue->items = calloc(queue->capacity ? queue->capacity : 1, sizeof(*queue->items));
    queue->distinct_of = calloc(queue->capacity ? queue->capacity : 1,
                                sizeof(*queue->distinct_of));
    if (row_hashes)
        queue->known = calloc(queue->capacity ? queue->capacity : 1, sizeof(*queue->known));
    if (!queue->slots || !queue->free_slots || !queue->items || !queue->distinct_of ||
        (row_hashes && !queue->known)) {
        tally_queue_finish(queue, NULL);
        return audit_fail(err, AUDIT_ENOMEM, "out of memory for the host work queue");
    }
    if (pthread_mutex_init(&queue->lock, NULL) != 0) {
        tally_queue_finish(queue, NULL);
        return audit_fail(err, AUDIT_ENOMEM, "cannot create the host work queue's lock");
    }
    pthread_cond_init(&queue->work, NULL);
    pthread_cond_init(&queue->done, NULL);
    queue->lock_made = true;
    if (!host_threads_sequential()) {
        /* The thread blocks every signal: they keep going to the calling thread. */
        sigset_t all, previous;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &previous);
        queue->threaded = pthread_create(&queue->thread, NULL, queue_thread_main, queue) == 0;
        pthread_sigmask(SIG_SETMASK, &previous, NULL);
    }
    *queue_out = queue;
    return AUDIT_OK;
}

/* Allocates slot index's buffers. */
static int slot_make(struct tally_queue *queue, uint32_t index, struct audit_error *err)
{
    struct tally_slot *slot = &queue->slots[index];
    const size_t count = queue->count ? queue->count : 1;
    slot->out = malloc(count * sizeof(int32_t));
    slot->raw = queue->raw ? malloc(count * sizeof(int32_t)) : NULL;
    slot->row_hashes =
        queue->row_hashes ? malloc((queue->rows ? queue->rows : 1) * sizeof(uint64_t)) : NULL;
    if (!slot->out || (queue->raw && !slot->raw) || (queue->row_hashes && !slot->row_hashes)) {
        free(slot->out);
        free(slot->raw);
        free(slot->row_hashes);
        slot->out = NULL;
        slot->raw = NULL;
        slot->row_hashes = NULL;
        return audit_fail(err, AUDIT_ENOMEM, "out of host memory for an output (%zu indices)",
                          queue->count);
    }
    return AUDIT_OK;
}

bool tally_queue_add_if_known(struct tally_queue *queue, const uint64_t *row_hashes,
                              double time_us)
{
    if (!row_hashes || !queue->known || queue->tail >= queue->capacity)
        return false;
    const uint64_t digest = row_hashes_digest(row_hashes, queue->rows);
    const size_t bytes = (size_t)queue->rows * sizeof(uint64_t);
    for (uint32_t i = 0; i < queue->known_count; i++) {
        const struct known_output *known = &queue->known[i];
        if (known->digest != digest || memcmp(known->row_hashes, row_hashes, bytes) != 0)
            continue;
        const struct queue_item item = { .repeat = true, .seq = known->seq, .time_us = time_us };
        /* Inline it cannot fail: the tally has room (checked above) and the output. */
        (void)queue_push(queue, &item, NULL);
        return true;
    }
    return false;
}

int tally_queue_slot(struct tally_queue *queue, struct tally_slot **slot,
                     struct audit_error *err)
{
    int status = AUDIT_OK;
    *slot = NULL;
    pthread_mutex_lock(&queue->lock);
    if (queue->free_count == 0 && queue->slots_made == queue->slot_limit && !queue->threaded) {
        /* Inline, slots come back at once: none free means one was taken and never handed over. */
        pthread_mutex_unlock(&queue->lock);
        return audit_fail(err, AUDIT_EUSAGE, "every output slot is taken (%u)", queue->slot_limit);
    }
    if (queue->free_count == 0 && queue->slots_made == queue->slot_limit) {
        const double started_ms = report_monotonic_ms();
        while (queue->free_count == 0 && queue->failure == 0)
            pthread_cond_wait(&queue->done, &queue->lock);
        queue->wait_ms += report_monotonic_ms() - started_ms;
    }
    if (queue->failure < 0) {
        status = queue->failure;
        if (err)
            *err = queue->failure_error;
    } else if (queue->free_count > 0) {
        *slot = &queue->slots[queue->free_slots[--queue->free_count]];
    } else {
        const uint32_t index = queue->slots_made;
        status = slot_make(queue, index, err);
        if (status == AUDIT_OK) {
            queue->slots_made++;
            *slot = &queue->slots[index];
        }
    }
    pthread_mutex_unlock(&queue->lock);
    return status;
}

int tally_queue_add(struct tally_queue *queue, struct tally_slot *slot, double time_us,
                    struct audit_error *err)
{
    if (queue->tail >= queue->capacity)
        return audit_fail(err, AUDIT_EUSAGE, "tally sized for %u reps got one more",
                          queue->capacity);
    const uint32_t seq = queue->new_outputs++;
    const size_t bytes = (size_t)queue->rows * sizeof(uint64_t);
    /* Remembered like the tally remembers a new distinct output's row hashes (its budget). */
    if (queue->known && slot->row_hashes &&
        queue->known_bytes + bytes <= OUTPUT_TALLY_ROW_HASH_BUDGET_BYTES) {
        uint64_t *copy = malloc(bytes ? bytes : 1);
        if (copy) {
            memcpy(copy, slot->row_hashes, bytes);
            queue->known[queue->known_count++] = (struct known_output){
                .digest = row_hashes_digest(slot->row_hashes, queue->rows),
                .row_hashes = copy,
                .seq = seq,
            };
            queue->known_bytes += bytes;
        }
    }
    const struct queue_item item = {
        .repeat = false, .slot = (uint32_t)(slot - queue->slots), .seq = seq, .time_us = time_us,
    };
    return queue_push(queue, &item, err);
}

int tally_queue_finish(struct tally_queue *queue, struct audit_error *err)
{
    if (!queue)
        return AUDIT_OK;
    int status = AUDIT_OK;
    if (queue->threaded) {
        pthread_mutex_lock(&queue->lock);
        const double started_ms = report_monotonic_ms();
        queue->stopping = true;
        pthread_cond_signal(&queue->work);
        while (queue->head != queue->tail)
            pthread_cond_wait(&queue->done, &queue->lock);
        queue->wait_ms += report_monotonic_ms() - started_ms;
        pthread_mutex_unlock(&queue->lock);
        pthread_join(queue->thread, NULL);
        queue->tally->beside_reps = true;
        queue->tally->beside_wait_ms += queue->wait_ms;
    }
    if (queue->failure < 0) {
        status = queue->failure;
        if (err)
            *err = queue->failure_error;
    }
    if (queue->lock_made) {
        pthread_mutex_destroy(&queue->lock);
        pthread_cond_destroy(&queue->work);
        pthread_cond_destroy(&queue->done);
    }
    for (uint32_t i = 0; i < queue->slots_made; i++) {
        free(queue->slots[i].out);
        free(queue->slots[i].raw);
        free(queue->slots[i].row_hashes);
    }
    for (uint32_t i = 0; i < queue->known_count; i++)
        free(queue->known[i].row_hashes);
    free(queue->slots);
    free(queue->free_slots);
    free(queue->items);
    free(queue->distinct_of);
    free(queue->known);
    free(queue);
    return status;
}
