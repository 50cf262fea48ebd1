/* Replays inputs through a harness without libFuzzer: `fuzz_NAME_replay FILE|DIR...` runs
 * LLVMFuzzerTestOneInput once per file (a directory's regular files in name order). Registered
 * as a unit test on the seed corpus and tests/fuzz/regressions/, so every build, with any
 * compiler and under the sanitizer build, re-checks each input that once crashed a harness. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

static int run_file(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (!file) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        return -1;
    }
    size_t capacity = 4096, size = 0;
    uint8_t *bytes = malloc(capacity);
    size_t n;
    while (bytes && (n = fread(bytes + size, 1, capacity - size, file)) > 0) {
        size += n;
        if (size == capacity) {
            uint8_t *grown = realloc(bytes, capacity * 2);
            if (!grown) {
                free(bytes);
                bytes = NULL;
                break;
            }
            bytes = grown;
            capacity *= 2;
        }
    }
    int failed = !bytes || ferror(file);
    fclose(file);
    if (failed) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(bytes);
        return -1;
    }
    LLVMFuzzerTestOneInput(bytes, size);
    free(bytes);
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of dir in name order; returns the count or -1. */
static long run_directory(const char *dir_path)
{
    DIR *dir = opendir(dir_path);
    if (!dir) {
        fprintf(stderr, "%s: cannot open: %s\n", dir_path, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t count = 0, capacity = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        if (entry->d_name[0] == '.')
            continue;
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            char **grown = realloc(names, capacity * sizeof(char *));
            if (!grown)
                abort();
            names = grown;
        }
        names[count] = strdup(entry->d_name);
        if (!names[count])
            abort();
        count++;
    }
    closedir(dir);
    if (count)
        qsort(names, count, sizeof(char *), compare_names);
    long ran = 0;
    for (size_t i = 0; i < count; i++) {
        char path[4096];
        struct stat info;
        snprintf(path, sizeof(path), "%s/%s", dir_path, names[i]);
        if (stat(path, &info) == 0 && S_ISREG(info.st_mode)) {
            if (run_file(path) < 0)
                ran = -1;
            else if (ran >= 0)
                ran++;
        }
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv)
{
    long total = 0;
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat info;
        if (stat(argv[i], &info) != 0) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        long ran = S_ISDIR(info.st_mode) ? run_directory(argv[i])
                                         : (run_file(argv[i]) < 0 ? -1 : 1);
        if (ran < 0)
            return 1;
        total += ran;
    }
    fprintf(stderr, "%ld inputs replayed, none crashed\n", total);
    return total > 0 ? 0 : 1;
}
