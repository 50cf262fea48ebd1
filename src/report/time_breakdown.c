/* The time breakdown (time_breakdown.h). */
#include "time_breakdown.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "json_util.h"
#include "report_keys.h"

static const struct time_part time_parts[] = {
    { KEY_DEVICE_OPEN_MS, "device open", offsetof(struct time_breakdown, device_open_ms) },
    { KEY_SETUP_MS, "setup", offsetof(struct time_breakdown, setup_ms) },
    { KEY_KERNEL_MS, "kernel", offsetof(struct time_breakdown, kernel_ms) },
    { KEY_LAUNCH_OVERHEAD_MS, "launch overhead",
      offsetof(struct time_breakdown, launch_overhead_ms) },
    { KEY_NOISE_WAIT_MS, "noise wait", offsetof(struct time_breakdown, noise_wait_ms) },
    { KEY_ROW_HASH_MS, "gpu row hash", offsetof(struct time_breakdown, row_hash_ms) },
    { KEY_COPY_MS, "copy", offsetof(struct time_breakdown, copy_ms) },
    { KEY_HASH_MS, "sha256", offsetof(struct time_breakdown, hash_ms) },
    { KEY_CHECK_MS, "check", offsetof(struct time_breakdown, check_ms) },
    { KEY_DUMP_MS, "dump", offsetof(struct time_breakdown, dump_ms) },
    { KEY_BATCH_INVARIANCE_MS, "batch invariance",
      offsetof(struct time_breakdown, batch_invariance_ms) },
};
#define TIME_PART_COUNT (sizeof(time_parts) / sizeof(time_parts[0]))

static double *time_part(struct time_breakdown *time, size_t part)
{
    return (double *)((char *)time + time_parts[part].offset);
}

size_t time_breakdown_part_count(void)
{
    return TIME_PART_COUNT;
}

const struct time_part *time_breakdown_part(size_t part)
{
    return part < TIME_PART_COUNT ? &time_parts[part] : NULL;
}

double time_breakdown_value(const struct time_breakdown *time, size_t part)
{
    return *(const double *)((const char *)time + time_parts[part].offset);
}

double report_monotonic_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e3 + (double)now.tv_nsec * 1e-6;
}

double time_breakdown_other_ms(const struct time_breakdown *time)
{
    double other = time->total_ms;
    for (size_t part = 0; part < TIME_PART_COUNT; part++)
        other -= time_breakdown_value(time, part);
    return other > 0 ? other : 0;
}

void time_breakdown_add(struct time_breakdown *sum, const struct time_breakdown *addend)
{
    sum->total_ms += addend->total_ms;
    for (size_t part = 0; part < TIME_PART_COUNT; part++)
        *time_part(sum, part) += time_breakdown_value(addend, part);
}

double time_breakdown_round_ms(double ms)
{
    return isfinite(ms) ? round(ms * 1e3) / 1e3 : ms;
}

cJSON *time_breakdown_json(const struct time_breakdown *time)
{
    cJSON *json = cJSON_CreateObject();
    if (!json)
        return NULL;
    for (size_t part = 0; part < TIME_PART_COUNT; part++)
        json_add_number(json, time_parts[part].key,
                        time_breakdown_round_ms(time_breakdown_value(time, part)));
    json_add_number(json, KEY_OTHER_MS, time_breakdown_round_ms(time_breakdown_other_ms(time)));
    json_add_number(json, KEY_TOTAL_MS, time_breakdown_round_ms(time->total_ms));
    return json;
}

void time_breakdown_from_json(const cJSON *json, struct time_breakdown *time)
{
    memset(time, 0, sizeof(*time));
    const cJSON *total = cJSON_GetObjectItemCaseSensitive(json, KEY_TOTAL_MS);
    if (cJSON_IsNumber(total) && isfinite(total->valuedouble))
        time->total_ms = total->valuedouble;
    for (size_t part = 0; part < TIME_PART_COUNT; part++) {
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(json, time_parts[part].key);
        if (cJSON_IsNumber(value) && isfinite(value->valuedouble))
            *time_part(time, part) = value->valuedouble;
    }
}
