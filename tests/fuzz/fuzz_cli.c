/* Fixtures and the in-process call of the command line (fuzz_cli.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "cli.h"
#include "error.h"
#include "fuzz_cli.h"
#include "fuzz_common.h"

const char *const fuzz_cli_fixture_names[] = {
    "a.bin", "b.bin", "r.json", "t.npy", "s.safetensors", "m.json", "report.json", NULL,
};

/* The report: the fields of a `run` report that gate reads. */
#define HASH_1 "1111111111111111111111111111111111111111111111111111111111111111"
#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HASH_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HASH_F "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
#define NO_VIOLATION "{\"total_rows\":0,\"max_rows_per_rep\":0,\"rows\":0}"
#define BACKEND(name, level, exact, hashes, distinct, equal, flapping_total, flapping)          \
    "{\"name\":\"" name "\",\"level\":\"" level "\",\"claims\":{\"exact_set\":" exact "},"     \
    "\"status\":\"ok\",\"reason\":null,\"verdict\":\"pass\",\"verdict_reasons\":[],\"reps\":2,"  \
    "\"output_sha256_per_rep\":" hashes ",\"set_sha256_per_rep\":[\"" HASH_F "\",\"" HASH_F   \
    "\"],\"distinct_outputs\":" distinct ",\"distinct_sets\":1,\"equals_reference_reps\":"      \
    equal ",\"violations\":{\"short\":" NO_VIOLATION ",\"duplicate\":" NO_VIOLATION           \
    ",\"out_of_range\":" NO_VIOLATION ",\"wrong_set\":" NO_VIOLATION ",\"tie_rule\":"         \
    NO_VIOLATION ",\"order\":" NO_VIOLATION ",\"padding\":" NO_VIOLATION                      \
    ",\"page_translation\":" NO_VIOLATION ",\"raw_misaligned\":" NO_VIOLATION "},"            \
    "\"flapping_rows_total\":" flapping_total ",\"flapping_rows\":" flapping ","              \
    "\"predicted_vs_observed\":{\"predicted_overflow_rows\":0,\"wrong_rows\":0,"              \
    "\"wrong_not_predicted_overflow\":0,\"set_flapping_unexplained\":0,"                     \
    "\"wrong_not_predicted_overflow_list\":[],\"set_flapping_unexplained_list\":[]}}"

const char fuzz_cli_report_text[] =
    "{\"schema\":\"dsatopk-audit/report\",\"schema_version\":1,\"complete\":true,"
    "\"stop_reason\":null,\"exit_code\":0,\"context\":{\"host\":\"fuzz\","
    "\"utc_time\":\"2026-11-29T10:00:00Z\",\"device\":{\"name\":\"NVIDIA H200\"}},"
    "\"input_errors\":[],\"records\":[{\"file\":\"captures/a.bin\",\"index\":0,"
    "\"global_index\":0,\"rows\":4,\"source_rows\":null,\"k\":16,"
    "\"payload_sha256\":\"" HASH_1 "\",\"reference\":{\"output_sha256\":\"" HASH_A "\","
    "\"set_sha256\":\"" HASH_F "\"},\"backends\":["
    BACKEND("bitonic", "gpu_to_gpu", "true", "[\"" HASH_A "\",\"" HASH_A "\"]", "1", "2", "0", "[]")
    ","
    BACKEND("radix", "not_guaranteed", "false", "[\"" HASH_A "\",\"" HASH_B "\"]", "2", "1", "1",
            "[{\"row\":1,\"reps_differing\":1}]")
    "]}]}";


/* The bytes of every fixture, kept to restore them. */
struct fixture {
    uint8_t *bytes;
    size_t size;
};
static struct fixture fixtures[sizeof(fuzz_cli_fixture_names) / sizeof(char *) - 1];
static int home_fd = -1;

#define ROWS 4
#define STRIDE 16
#define PAGE_SIZE 4
#define PAGE_COLS 5

/* Two records: a plain one with ties and an empty row, and one with row starts, a page table
 * and engine indices. perturb changes one score of row 1 (the b.bin variant, for diff). */
static void write_capture(const char *path, bool perturb)
{
    static float scores[2][ROWS * STRIDE];
    static int32_t lengths[2][ROWS] = { { 16, 10, 0, 16 }, { 12, 9, 1, 4 } };
    static int32_t row_starts[ROWS] = { 0, 3, 15, 12 };
    static int32_t page_table[ROWS * PAGE_COLS];
    static int32_t page_table_row_starts[ROWS] = { 0, 1, 0, 2 };
    static int32_t engine[ROWS * 3] = { 0, 1, 2, 3, 4, 5, 0, -1, -1, 1, 0, 2 };
    struct audit_error err = { 0 };
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < ROWS * STRIDE; i++)
            scores[r][i] = (float)((i * 7 + r * 3) % 5) - 1.5f; /* plenty of ties */
    if (perturb)
        scores[0][STRIDE + 4] += 0.25f;
    for (int i = 0; i < ROWS * PAGE_COLS; i++)
        page_table[i] = (i * 3) % 11;
    struct capture_record plain = {
        .rows = ROWS, .k = 3, .row_stride = STRIDE, .scores = scores[0], .lengths = lengths[0],
        .metadata_json = (char *)"{\"engine\":\"fuzz\",\"layer\":0}",
    };
    struct capture_record paged = {
        .rows = ROWS, .k = 3, .row_stride = STRIDE, .scores = scores[1], .lengths = lengths[1],
        .row_starts = row_starts, .page_size = PAGE_SIZE, .page_table_cols = PAGE_COLS,
        .page_table = page_table, .page_table_row_starts = page_table_row_starts,
        .engine_indices = engine, .metadata_json = (char *)"{}",
    };
    unlink(path);
    if (capture_append_record(path, &plain, false, &err) < 0 ||
        capture_append_record(path, &paged, true, &err) < 0)
        fuzz_violation("harness setup: %s", err.message);
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void write_npy(const char *name)
{
    static const char header[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 8), }";
    uint8_t bytes[128 + 64];
    size_t header_bytes = 128 - 10; /* 10-byte prefix + header padded to 128 with a newline */
    memset(bytes, 0, sizeof(bytes));
    memcpy(bytes, "\x93NUMPY\x01\x00", 8);
    bytes[8] = (uint8_t)header_bytes;
    bytes[9] = 0;
    memset(bytes + 10, ' ', header_bytes);
    memcpy(bytes + 10, header, sizeof(header) - 1);
    bytes[10 + header_bytes - 1] = '\n';
    for (int i = 0; i < 16; i++) {
        float value = (float)(i % 5) * 0.5f;
        memcpy(bytes + 128 + 4 * i, &value, 4);
    }
    fuzz_scratch_write(name, bytes, sizeof(bytes));
}

static void write_safetensors(const char *name)
{
    static const char header[] =
        "{\"__metadata__\":{\"source\":\"fuzz\"},"
        "\"scores\":{\"dtype\":\"F32\",\"shape\":[2,8],\"data_offsets\":[0,64]},"
        "\"lengths\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[64,72]}}";
    uint8_t bytes[8 + sizeof(header) - 1 + 72];
    size_t text = sizeof(header) - 1;
    put_u64(bytes, text);
    memcpy(bytes + 8, header, text);
    for (int i = 0; i < 16; i++) {
        float value = (float)((i * 3) % 7);
        memcpy(bytes + 8 + text + 4 * i, &value, 4);
    }
    int32_t lengths[2] = { 8, 5 };
    memcpy(bytes + 8 + text + 64, lengths, sizeof(lengths));
    fuzz_scratch_write(name, bytes, sizeof(bytes));
}

static void write_text(const char *name, const char *text)
{
    fuzz_scratch_write(name, text, strlen(text));
}

static void remember(int slot, const char *name)
{
    char path[512];
    FILE *file;
    snprintf(path, sizeof(path), "%s/%s", fuzz_scratch_dir(), name);
    if (!(file = fopen(path, "rb")) || fseek(file, 0, SEEK_END) != 0)
        fuzz_violation("harness setup: cannot read back %s", path);
    long size = ftell(file);
    rewind(file);
    fixtures[slot].bytes = malloc((size_t)size);
    fixtures[slot].size = (size_t)size;
    if (!fixtures[slot].bytes || fread(fixtures[slot].bytes, 1, (size_t)size, file) != (size_t)size)
        fuzz_violation("harness setup: cannot read back %s", path);
    fclose(file);
}

void fuzz_cli_fixtures(void)
{
    char path[512];
    const char *dir = fuzz_scratch_dir();
    snprintf(path, sizeof(path), "%s/a.bin", dir);
    write_capture(path, false);
    snprintf(path, sizeof(path), "%s/b.bin", dir);
    write_capture(path, true);
    write_text("r.json",
               "{\"schema\":\"dsatopk-audit/report\",\"records\":["
               "{\"file\":\"a.bin\",\"index\":0,\"backends\":["
               "{\"name\":\"radix\",\"flapping_rows\":[{\"row\":1}],\"wrong_rows\":[3]},"
               "{\"name\":\"bitonic\",\"graph\":{\"flapping_rows\":[{\"row\":0}]}}]},"
               "{\"file\":\"a.bin\",\"index\":1,\"backends\":[{\"name\":\"radix\","
               "\"predicted_vs_observed\":{\"wrong_rows\":[2]},"
               "\"batch_invariance\":{\"dependent_rows\":[{\"row\":0}]}}]}]}\n");
    write_npy("t.npy");
    write_safetensors("s.safetensors");
    write_text("m.json", "{\"engine\":\"fuzz\",\"note\":\"metadata fixture\"}\n");
    write_text("report.json", fuzz_cli_report_text);
    for (int i = 0; fuzz_cli_fixture_names[i]; i++)
        remember(i, fuzz_cli_fixture_names[i]);
    /* Where to come back to: libFuzzer keeps relative corpus and artifact paths. */
    if ((home_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        fuzz_violation("harness setup: cannot open the working directory: %s", strerror(errno));
}

void fuzz_cli_restore(void)
{
    fuzz_scratch_clean(fuzz_cli_fixture_names);
    for (int i = 0; fuzz_cli_fixture_names[i]; i++) {
        /* Rewrite a fixture only when a command changed it: most iterations change none. */
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", fuzz_scratch_dir(), fuzz_cli_fixture_names[i]);
        FILE *file = fopen(path, "rb");
        bool same = false;
        if (file) {
            uint8_t buffer[4096];
            size_t n = fread(buffer, 1, sizeof(buffer), file);
            same = fixtures[i].size <= sizeof(buffer) && n == fixtures[i].size &&
                   memcmp(buffer, fixtures[i].bytes, n) == 0;
            fclose(file);
        }
        if (!same)
            fuzz_scratch_write(fuzz_cli_fixture_names[i], fixtures[i].bytes, fixtures[i].size);
    }
}

int fuzz_cli_call(int argc, char **argv)
{
    if (chdir(fuzz_scratch_dir()) != 0)
        fuzz_violation("harness: chdir(%s): %s", fuzz_scratch_dir(), strerror(errno));
    optind = 0; /* glibc: 0 reinitialises getopt, as at process start */
    opterr = 1;
    memset(&cli_globals, 0, sizeof(cli_globals));
    int code = dsatopk_audit_main(argc, argv);
    if (fuzz_verbose()) {
        fprintf(stderr, "fuzz_cli:");
        for (int i = 0; i < argc; i++)
            fprintf(stderr, " '%s'", argv[i]);
        fprintf(stderr, " -> exit %d\n", code);
    }
    if (fchdir(home_fd) != 0)
        fuzz_violation("harness: cannot return to the working directory: %s", strerror(errno));
    return code;
}
