/* The command table: one file per command (src/cli/cmd_*.c), one line each in src/cli/main.c. */
#ifndef DSATOPK_CLI_H
#define DSATOPK_CLI_H

#include <stdio.h>

struct cli_command {
    const char *name;
    const char *summary;  /* one line for `dsatopk-audit help` */
    const char *usage;    /* full text for `dsatopk-audit help NAME` and `NAME --help` */
    /* argv[0] is the command name; returns a documented exit code (kernels/include/error.h). */
    int (*run)(int argc, char **argv);
};

extern const struct cli_command cmd_inspect, cmd_census, cmd_synth, cmd_devices, cmd_run,
    cmd_import, cmd_diff, cmd_extract, cmd_bench, cmd_report;
extern const struct cli_command cmd_gate, cmd_merge, cmd_compare;

/* Options given before the command name (and accepted by the commands that use them). */
struct cli_globals {
    unsigned long long emulate_smem_per_sm; /* 0: use what the device reports */
};
extern struct cli_globals cli_globals;

/* Prints "dsatopk-audit NAME: message" to stderr and returns EXIT_USAGE. */
int cli_usage_error(const struct cli_command *command, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "dsatopk-audit NAME: message" to stderr. Every message of a command goes through here
 * or cli_usage_error: the message is escaped for the terminal (src/common/terminal_text.h), as
 * it may quote paths and JSON strings. */
void cli_print_message(const struct cli_command *command, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* The usage error for a bad option getopt_long returned (option strings start with ':', opterr
 * is 0): ':' a missing value, anything else an unknown option, named by argv[optind - 1]. */
int cli_option_error(const struct cli_command *command, int option, char **argv);

/* Prints the command's usage text to out. A command does so for -h/--help only once its whole
 * command line has parsed, as getopt tools do: an unknown option anywhere is exit 2. */
void cli_print_usage(const struct cli_command *command, FILE *out);

/* Parses a comma-separated list of unsigned integers (e.g. "512,1024,2048") into values
 * (at most capacity). Returns the count, or -1 on a malformed list. */
int cli_parse_uint_list(const char *text, unsigned long long *values, int capacity);

/* Parses an unsigned integer option value; returns 0 or -1 (not a number, out of range). */
int cli_parse_uint(const char *text, unsigned long long max, unsigned long long *value);

/* Parses a byte count: digits, optionally followed by K, M, G or T (binary multiples). Returns 0
 * or -1 (malformed, or beyond 2^64 - 1). */
int cli_parse_bytes(const char *text, unsigned long long *value);

/* --format of the commands that print a table or write JSON. cli_parse_format returns 0, or
 * EXIT_USAGE after printing the usage error for command. */
enum cli_format { CLI_FORMAT_TABLE, CLI_FORMAT_JSON };
int cli_parse_format(const struct cli_command *command, const char *text, enum cli_format *format);

/* Parses --engine-contract JSON ({"order": ..., "tie_break": ...}, engine_check.h) for command;
 * returns 0, or EXIT_USAGE after printing the usage error. */
struct engine_contract;
int cli_parse_engine_contract(const struct cli_command *command, const char *text,
                              struct engine_contract *contract);

/* The tool version and git revision, e.g. "0.1.0 (g1a2b3c4)". */
const char *cli_version(void);

/* The command line as one string, for report context blocks. */
const char *cli_command_line(void);

#endif
