/* Unit tests of the plugin loader (src/replay/plugin.c), no GPU: the CUDA test plugins load and
 * describe themselves on a machine without a driver; the host-only plugins of
 * tests/plugins/host_plugin.c check every refusal (missing file, not a shared object, missing
 * entry point, NULL entry, another ABI version, NULL fields and callbacks, invalid names, levels
 * and claims, a built-in's name, a name already loaded, a full table) and the adapter (supports,
 * scratch size and launch forwarded field by field, errors mapped to the backend conventions). */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "topk_backends.h"
#include "error.h"
#include "hash.h"
#include "plugin.h"
#include "test_device.h"

#ifndef TEST_PLUGIN_DIR
#error "TEST_PLUGIN_DIR: the build directory of tests/plugins (set by tests/plugins/meson.build)"
#endif

static const char *plugin_path(const char *name)
{
    static char paths[4][4096];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, sizeof(paths[0]), "%s/%s.so", TEST_PLUGIN_DIR, name);
    return path;
}

/* An H200 as gpu_device_query describes it. */
static struct topk_shape shape_of(uint32_t rows, uint32_t k)
{
    struct topk_shape shape = { .rows = rows, .k = k, .row_stride = 4096, .max_length = 4000 };
    return shape;
}

static int teardown(void **state)
{
    (void)state;
    plugin_unload_all();
    return 0;
}

static void expect_refusal(const char *name, int code, const char *text)
{
    const struct topk_backend *backend = topk_backend_table[0]; /* must become NULL */
    struct audit_error err = { 0 };
    const char *path = plugin_path(name);
    int before = plugin_count();
    int status = plugin_load(path, &backend, &err);
    if (status != code || !strstr(err.message, text))
        fail_msg("%s: status %d (expected %d), message '%s' (expected to contain '%s')", name,
                 status, code, err.message, text);
    assert_null(backend);
    assert_non_null(strstr(err.message, path)); /* the message names the file */
    assert_int_equal(plugin_count(), before);   /* nothing half-loaded stays behind */
}

/* ---- the CUDA plugins load without a GPU ---------------------------------------------------- */

static void test_example_plugin(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    const struct topk_backend *backend = NULL;
    const char *path = plugin_path("example_plugin");
    int status = plugin_load(path, &backend, &err);
    if (status != 0)
        fail_msg("%s", err.message);
    assert_non_null(backend);
    assert_string_equal(backend->name, "example-simple");
    assert_int_equal(backend->level, TOPK_RUN_TO_RUN);
    assert_true(backend->exact_set);
    assert_true(backend->smallest_index_ties);
    assert_false(backend->canonical_order);
    assert_true(backend->index_ascending);
    assert_non_null(strstr(backend->summary, "example plugin"));
    assert_non_null(strstr(backend->limits, "256-thread block"));
    assert_ptr_equal(plugin_backend_find("example-simple"), backend);
    assert_null(plugin_backend_find("radix"));
    assert_int_equal(plugin_count(), 1);

    /* supports() is pure: it answers for a described device. */
    struct gpu_device_info device = test_h200();
    struct topk_shape shape = shape_of(8, 2048);
    char reason[256] = "";
    assert_int_equal(backend->supports(&device, &shape, reason, sizeof(reason)), 1);
    device.cc_major = 8;
    assert_int_equal(backend->supports(&device, &shape, reason, sizeof(reason)), 0);
    assert_non_null(strstr(reason, "compute capability 8.0"));
    device = test_h200();
    assert_int_equal(backend->scratch_bytes(&device, &shape), 0);

    /* Provenance: the path as given and the SHA-256 of the file. */
    assert_string_equal(plugin_backend_path(backend), path);
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    rewind(file);
    uint8_t *bytes = malloc((size_t)size);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)size, file), (size_t)size);
    fclose(file);
    uint8_t digest[HASH_BYTES];
    char hex[HASH_HEX_BYTES];
    hash_bytes(bytes, (size_t)size, digest);
    hash_to_hex(digest, hex);
    free(bytes);
    assert_string_equal(plugin_backend_sha256(backend), hex);
    assert_null(plugin_backend_path(topk_backend_table[0]));
    assert_null(plugin_backend_sha256(topk_backend_table[0]));
}

static void test_faulty_plugins_load(void **state)
{
    (void)state;
    static const struct {
        const char *file, *name;
        enum topk_determinism level;
        bool smallest_index_ties;
        size_t scratch_bytes; /* for 4 rows */
    } faulty[] = {
        { "plugin_wrong", "faulty-wrong", TOPK_RUN_TO_RUN, true, 0 },
        { "plugin_oob", "faulty-oob", TOPK_NOT_GUARANTEED, false, 0 },
        { "plugin_hang", "faulty-hang", TOPK_NOT_GUARANTEED, false, 0 },
        { "plugin_arrival", "faulty-arrival", TOPK_RUN_TO_RUN, true, 0 },
        { "plugin_free", "faulty-free", TOPK_RUN_TO_RUN, true, 4096 },
        { "host_crash", "faulty-crash", TOPK_RUN_TO_RUN, true, 4 * 64 },
        { "host_oom", "faulty-oom", TOPK_RUN_TO_RUN, true, (size_t)1 << 40 },
    };
    struct gpu_device_info device = test_h200();
    struct topk_shape shape = shape_of(4, 64);
    char reason[256];
    for (size_t i = 0; i < sizeof(faulty) / sizeof(faulty[0]); i++) {
        struct audit_error err = { 0 };
        const struct topk_backend *backend = NULL;
        if (plugin_load(plugin_path(faulty[i].file), &backend, &err) != 0)
            fail_msg("%s: %s", faulty[i].file, err.message);
        assert_string_equal(backend->name, faulty[i].name);
        assert_int_equal(backend->level, faulty[i].level);
        assert_int_equal(backend->smallest_index_ties, faulty[i].smallest_index_ties);
        assert_int_equal(backend->supports(&device, &shape, reason, sizeof(reason)), 1);
        assert_int_equal(backend->scratch_bytes(&device, &shape), faulty[i].scratch_bytes);
    }
    assert_int_equal(plugin_count(), 7);
}

/* ---- the adapter ---------------------------------------------------------------------------- */

struct host_probe {
    struct dsatopk_plugin_problem *problem;
    struct dsatopk_plugin_device *device;
    void **stream;
    int *launches;
};

/* The good host plugin's record of its last launch, found in the loaded object. */
static struct host_probe probe_of(const char *path)
{
    struct host_probe probe;
    void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(handle);
    probe.problem = dlsym(handle, "host_plugin_last_problem");
    probe.device = dlsym(handle, "host_plugin_last_device");
    probe.stream = dlsym(handle, "host_plugin_last_stream");
    probe.launches = dlsym(handle, "host_plugin_launches");
    assert_non_null(probe.problem);
    assert_non_null(probe.device);
    assert_non_null(probe.stream);
    assert_non_null(probe.launches);
    dlclose(handle); /* drops only this lookup's reference */
    return probe;
}

static void test_adapter_forwards(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    const struct topk_backend *backend = NULL;
    const char *path = plugin_path("host_good");
    assert_int_equal(plugin_load(path, &backend, &err), 0);
    struct host_probe probe = probe_of(path);
    struct gpu_device_info device = test_h200();
    char reason[256] = "";

    struct topk_shape big_k = shape_of(2, 1001);
    assert_int_equal(backend->supports(&device, &big_k, reason, sizeof(reason)), 0);
    assert_string_equal(reason, "k 1001 > 1000");
    struct topk_shape shape = shape_of(3, 7);
    shape.has_row_starts = true;
    shape.has_page_table = true;
    shape.page_size = 64;
    assert_int_equal(backend->scratch_bytes(&device, &shape), 3 * 64);

    /* Pointers are only passed along (the host plugin never dereferences them). */
    static float scores[4];
    static int32_t lengths[3], row_starts[3], page_table[6], page_rows[3], out[21], raw[21];
    static uint8_t scratch[192];
    struct topk_problem problem = {
        .shape = shape, .scores = scores, .lengths = lengths, .row_starts = row_starts,
        .page_table = page_table, .page_table_cols = 2, .page_table_row_starts = page_rows,
        .out = out, .raw_out = raw, .scratch = scratch, .scratch_bytes = sizeof(scratch),
    };
    cudaStream_t stream = (cudaStream_t)(uintptr_t)0x5eed;
    assert_int_equal(backend->launch(&problem, &device, stream, &err), 0);
    assert_int_equal(*probe.launches, 1);
    const struct dsatopk_plugin_problem *seen = probe.problem;
    assert_int_equal(seen->shape.rows, 3);
    assert_int_equal(seen->shape.k, 7);
    assert_int_equal(seen->shape.row_stride, 4096);
    assert_int_equal(seen->shape.max_length, 4000);
    assert_int_equal(seen->shape.has_row_starts, 1);
    assert_int_equal(seen->shape.has_page_table, 1);
    assert_int_equal(seen->shape.page_size, 64);
    assert_ptr_equal(seen->scores, scores);
    assert_ptr_equal(seen->lengths, lengths);
    assert_ptr_equal(seen->row_starts, row_starts);
    assert_ptr_equal(seen->page_table, page_table);
    assert_int_equal(seen->page_table_cols, 2);
    assert_ptr_equal(seen->page_table_row_starts, page_rows);
    assert_ptr_equal(seen->out, out);
    assert_ptr_equal(seen->raw_out, raw);
    assert_ptr_equal(seen->scratch, scratch);
    assert_int_equal(seen->scratch_bytes, sizeof(scratch));
    assert_ptr_equal(*probe.stream, (void *)stream);
    assert_int_equal(probe.device->ordinal, 1);
    assert_string_equal(probe.device->name, "NVIDIA H200");
    assert_int_equal(probe.device->cc_major, 9);
    assert_int_equal(probe.device->sm_count, 132);
    assert_int_equal(probe.device->smem_per_block_optin, 232448);
    assert_int_equal(probe.device->smem_emulated, 0);

    /* The plugin's failure: AUDIT_EDEVICE naming backend, file and the plugin's message. */
    problem.shape.k = 13;
    assert_int_equal(backend->launch(&problem, &device, stream, &err), AUDIT_EDEVICE);
    assert_non_null(strstr(err.message, "k 13 is unlucky"));
    assert_non_null(strstr(err.message, "host-good"));
    assert_non_null(strstr(err.message, path));
    assert_int_equal(*probe.launches, 2);

    /* Unsupported: refused before the plugin's launch runs, with its reason. */
    problem.shape.k = 1001;
    assert_int_equal(backend->launch(&problem, &device, stream, &err), AUDIT_EUNSUPPORTED);
    assert_non_null(strstr(err.message, "k 1001 > 1000"));
    assert_int_equal(*probe.launches, 2);

    /* Scratch smaller than scratch_bytes(): refused, not launched. */
    problem.shape.k = 7;
    problem.scratch_bytes = 100;
    assert_int_equal(backend->launch(&problem, &device, stream, &err), AUDIT_EUSAGE);
    assert_non_null(strstr(err.message, "192 needed"));
    assert_int_equal(*probe.launches, 2);
}

static void test_adapter_bad_supports_answer(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    const struct topk_backend *backend = NULL;
    assert_int_equal(plugin_load(plugin_path("host_bad_supports"), &backend, &err), 0);
    struct gpu_device_info device = test_h200();
    struct topk_shape shape = shape_of(1, 8);
    char reason[256] = "";
    assert_int_equal(backend->supports(&device, &shape, reason, sizeof(reason)), 0);
    assert_non_null(strstr(reason, "supports() returned 7"));
}

/* ---- refusals ------------------------------------------------------------------------------- */

static void test_refusals(void **state)
{
    (void)state;
    expect_refusal("no_such_plugin", AUDIT_EIO, "cannot open");
    expect_refusal("host_no_entry", AUDIT_EDATA, "no symbol dsatopk_plugin_entry");
    expect_refusal("host_null_entry", AUDIT_EDATA, "returned NULL");
    expect_refusal("host_abi", AUDIT_EDATA, "ABI version 2");
    expect_refusal("host_null_supports", AUDIT_EDATA, "callback 'supports' is NULL");
    expect_refusal("host_null_launch", AUDIT_EDATA, "callback 'launch' is NULL");
    expect_refusal("host_null_name", AUDIT_EDATA, "field 'name' is NULL");
    expect_refusal("host_clash", AUDIT_EDATA, "name 'radix' is a built-in backend's");
    expect_refusal("host_bad_name", AUDIT_EDATA, "field 'name' \"my,plugin\"");
    expect_refusal("host_bad_level", AUDIT_EDATA, "field 'level' \"deterministic\"");
    expect_refusal("host_bad_claim", AUDIT_EDATA, "field 'exact_set' is 2");
    expect_refusal("host_gpu_to_gpu", AUDIT_EDATA, "level gpu_to_gpu");
    expect_refusal("host_two_orders", AUDIT_EDATA, "'canonical_order' and 'index_ascending'");
    assert_int_equal(plugin_count(), 0);
}

static void test_not_a_shared_object(void **state)
{
    (void)state;
    char path[] = "/tmp/dsatopk-test-plugin-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
    close(fd);
    const struct topk_backend *backend = NULL;
    struct audit_error err = { 0 };
    assert_int_equal(plugin_load(path, &backend, &err), AUDIT_EIO);
    assert_non_null(strstr(err.message, "not a loadable shared object"));
    assert_non_null(strstr(err.message, path));
    unlink(path);
    assert_int_equal(plugin_count(), 0);
}

static void test_name_taken(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    const struct topk_backend *backend = NULL;
    assert_int_equal(plugin_load(plugin_path("host_good"), &backend, &err), 0);
    expect_refusal("host_twin", AUDIT_EDATA, "name 'host-good' is already taken by plugin");
    /* The same file twice: the same name. */
    expect_refusal("host_good", AUDIT_EDATA, "already taken");
    assert_int_equal(plugin_count(), 1);
}

/* A name without '/' is a file in the working directory, not a library-path search. */
static void test_relative_name(void **state)
{
    (void)state;
    char *here = getcwd(NULL, 0);
    assert_non_null(here);
    assert_int_equal(chdir(TEST_PLUGIN_DIR), 0);
    struct audit_error err = { 0 };
    const struct topk_backend *backend = NULL;
    int status = plugin_load("host_good.so", &backend, &err);
    int missing = plugin_load("libc.so.6", &backend, &err);
    assert_int_equal(chdir(here), 0);
    free(here);
    assert_int_equal(status, 0);
    assert_int_equal(missing, AUDIT_EIO); /* found by dlopen's search, but not here */
    assert_non_null(strstr(err.message, "cannot open"));
    assert_string_equal(plugin_backend_path(plugin_backend_find("host-good")), "host_good.so");
}

static void test_table_full(void **state)
{
    (void)state;
    struct audit_error err = { 0 };
    const struct topk_backend *backends[PLUGIN_MAX_LOADED];
    const struct topk_backend *extra = NULL;
    char name[32];
    for (int i = 0; i < PLUGIN_MAX_LOADED; i++) {
        snprintf(name, sizeof(name), "env-%d", i);
        setenv("HOST_PLUGIN_NAME", name, 1);
        if (plugin_load(plugin_path("host_env_name"), &backends[i], &err) != 0)
            fail_msg("slot %d: %s", i, err.message);
        assert_string_equal(backends[i]->name, name);
    }
    setenv("HOST_PLUGIN_NAME", "env-extra", 1);
    assert_int_equal(plugin_load(plugin_path("host_env_name"), &extra, &err), AUDIT_EUSAGE);
    assert_non_null(strstr(err.message, "at most 16 plugins"));
    /* Each slot forwards to its own plugin entry (distinct callbacks, same behaviour). */
    struct gpu_device_info device = test_h200();
    struct topk_shape shape = shape_of(5, 8);
    for (int i = 0; i < PLUGIN_MAX_LOADED; i++) {
        assert_int_equal(backends[i]->scratch_bytes(&device, &shape), 5 * 64);
        if (i > 0)
            assert_ptr_not_equal(backends[i]->launch, backends[i - 1]->launch);
        assert_ptr_equal(plugin_backend_find(backends[i]->name), backends[i]);
    }
    plugin_unload_all();
    assert_int_equal(plugin_count(), 0);
    assert_null(plugin_backend_find("env-3"));
    /* Slots are reusable after unloading. */
    setenv("HOST_PLUGIN_NAME", "env-again", 1);
    assert_int_equal(plugin_load(plugin_path("host_env_name"), &extra, &err), 0);
    assert_string_equal(extra->name, "env-again");
    unsetenv("HOST_PLUGIN_NAME");
}

int main(void)
{
    if (hash_init() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_example_plugin, teardown),
        cmocka_unit_test_teardown(test_faulty_plugins_load, teardown),
        cmocka_unit_test_teardown(test_adapter_forwards, teardown),
        cmocka_unit_test_teardown(test_adapter_bad_supports_answer, teardown),
        cmocka_unit_test_teardown(test_refusals, teardown),
        cmocka_unit_test_teardown(test_not_a_shared_object, teardown),
        cmocka_unit_test_teardown(test_name_taken, teardown),
        cmocka_unit_test_teardown(test_relative_name, teardown),
        cmocka_unit_test_teardown(test_table_full, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
