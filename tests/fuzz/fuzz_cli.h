/* The command line as a fuzz target: src/cli/main.c is compiled into the harness with
 * -Dmain=dsatopk_audit_main, so the harness calls the real dispatcher, global options, command
 * table and each command's own option parsing, in-process.
 *
 * Commands run in the scratch directory, where fuzz_cli_fixtures() has written small valid
 * inputs under fixed names (fuzz_cli_fixture_names): a.bin and b.bin (two captures of the same
 * two calls, b with one score changed), r.json (a run report naming rows of a.bin), t.npy
 * (2 x 8 float32 scores), s.safetensors (2 x 8 float32 "scores" and int32 "lengths"), m.json
 * (a metadata object), report.json (fuzz_cli_report_text: the fields of a run report that gate
 * reads, one record, a gpu_to_gpu backend and a flapping not_guaranteed one).
 * With DSATOPK_FUZZ_VERBOSE=1 each call and its exit code are printed to stderr. */
#ifndef DSATOPK_FUZZ_CLI_H
#define DSATOPK_FUZZ_CLI_H

#include <stddef.h>

int dsatopk_audit_main(int argc, char **argv);

extern const char *const fuzz_cli_fixture_names[]; /* NULL-terminated */
extern const char fuzz_cli_report_text[];

/* Writes the fixtures into the scratch directory. */
void fuzz_cli_fixtures(void);
/* Removes whatever a command wrote and restores the fixtures (a command may replace one, e.g.
 * extract a.bin -o a.bin). */
void fuzz_cli_restore(void);
/* Calls the dispatcher as a fresh process would (getopt state and global options reset), with
 * the scratch directory as the working directory for the call only. Returns the exit code. */
int fuzz_cli_call(int argc, char **argv);

#endif
