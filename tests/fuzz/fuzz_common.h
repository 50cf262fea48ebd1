/* Shared by the libFuzzer harnesses (docs/RELIABILITY.md).
 *
 * The readers under test take paths, not buffers; the harnesses hand them each input through an
 * anonymous in-memory file (memfd_create, opened again as /proc/self/fd/N), so an iteration
 * costs a truncate and a write and never touches a disk. Commands that write files (extract,
 * import, the CLI harness) work in a private scratch directory under /dev/shm.
 *
 * Each harness defines LLVMFuzzerInitialize and LLVMFuzzerTestOneInput. Built with clang and
 * -fsanitize=fuzzer they are libFuzzer targets; built with any compiler and fuzz_standalone.c
 * they replay the seed corpus and the regressions as an ordinary test (suite unit). */
#ifndef DSATOPK_FUZZ_COMMON_H
#define DSATOPK_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An in-memory file whose contents are replaced per iteration. */
struct fuzz_file {
    int fd;
    char path[64]; /* "/proc/self/fd/N": what the reader under test opens */
};

/* Creates the file; aborts when it cannot (a harness that cannot set up must not pass). */
void fuzz_file_create(struct fuzz_file *file, const char *name);
/* Replaces the whole contents with size bytes. */
void fuzz_file_set(struct fuzz_file *file, const void *bytes, size_t size);
/* Reads the whole contents into a malloc'ed buffer (*size bytes). */
uint8_t *fuzz_file_get(const struct fuzz_file *file, size_t *size);

/* A private directory (under /dev/shm, else $TMPDIR or /tmp), removed with its files at exit
 * (and by a later harness if this one crashes). Returns its path. */
const char *fuzz_scratch_dir(void);
/* Removes every entry of the scratch directory except the names listed (NULL-terminated). */
void fuzz_scratch_clean(const char *const *keep);
/* Writes bytes to NAME inside the scratch directory; aborts on failure. */
void fuzz_scratch_write(const char *name, const void *bytes, size_t size);

/* A broken promise of the code under test: prints the message and aborts, which libFuzzer
 * reports as a crash (and the standalone runner as a failed test). */
void fuzz_violation(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));

/* DSATOPK_FUZZ_VERBOSE=1 in the environment: the harnesses say on stderr what each input
 * reached (for checking that a seed exercises the path it was written for). */
bool fuzz_verbose(void);

/* Sends stdout to /dev/null (commands print tables); stderr is left to libFuzzer, whose
 * -close_fd_mask=2 silences it without losing crash reports. */
void fuzz_silence_stdout(void);

#endif
