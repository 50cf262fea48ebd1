/* dsatopk-audit: a thin command-line front over the library in src/ and kernels/.
 * Each command lives in its own src/cli/cmd_*.c; this file only dispatches and prints help. */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "cli.h"
#include "engine_check.h"
#include "error.h"
#include "hash.h"
#include "terminal_text.h"
#include "version.h"

static const struct cli_command *const command_table[] = {
    &cmd_run,
    &cmd_census,
    &cmd_inspect,
    &cmd_synth,
    &cmd_devices,
    &cmd_bench,
    &cmd_diff,
    &cmd_compare,
    &cmd_extract,
    &cmd_import,
    &cmd_report,
    &cmd_gate,
    &cmd_merge,
    NULL,
};

struct cli_globals cli_globals;
static char command_line[4096];

const char *cli_version(void)
{
    return DSATOPK_VERSION " (" DSATOPK_GIT_REVISION ")";
}

const char *cli_command_line(void)
{
    return command_line;
}

static void remember_command_line(int argc, char **argv)
{
    size_t used = 0;
    for (int i = 0; i < argc && used + 1 < sizeof(command_line); i++) {
        int n = snprintf(command_line + used, sizeof(command_line) - used, "%s%s", i ? " " : "",
                         argv[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (used >= sizeof(command_line))
        command_line[sizeof(command_line) - 1] = '\0';
}

/* "dsatopk-audit[ NAME]: MESSAGE", the message escaped for the terminal (terminal_text.h). */
static void print_message(const struct cli_command *command, const char *format, va_list args)
{
    char *text = NULL;
    fprintf(stderr, "dsatopk-audit%s%s: ", command ? " " : "", command ? command->name : "");
    if (vasprintf(&text, format, args) < 0)
        text = NULL;
    terminal_fputs(text ? text : format, stderr);
    fputc('\n', stderr);
    free(text);
}

int cli_usage_error(const struct cli_command *command, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    print_message(command, format, args);
    va_end(args);
    fprintf(stderr, "(see: dsatopk-audit %s%s)\n", command ? "help " : "--help",
            command ? command->name : "");
    return EXIT_USAGE;
}

void cli_print_message(const struct cli_command *command, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    print_message(command, format, args);
    va_end(args);
}

int cli_option_error(const struct cli_command *command, int option, char **argv)
{
    if (option == ':')
        return cli_usage_error(command, "option '%s' needs a value", argv[optind - 1]);
    return cli_usage_error(command, "unknown option '%s'", argv[optind - 1]);
}

void cli_print_usage(const struct cli_command *command, FILE *out)
{
    fprintf(out, "dsatopk-audit %s: %s\n\n%s", command->name, command->summary, command->usage);
}

int cli_parse_uint(const char *text, unsigned long long max, unsigned long long *value)
{
    /* strtoull skips white space and accepts a sign: require a digit first. */
    if (!text || *text < '0' || *text > '9')
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || parsed > max)
        return -1;
    *value = parsed;
    return 0;
}

int cli_parse_uint_list(const char *text, unsigned long long *values, int capacity)
{
    int count = 0;
    const char *p = text;
    if (!text || !*text)
        return -1;
    while (*p) {
        char item[32];
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof(item) || count >= capacity)
            return -1;
        memcpy(item, p, n);
        item[n] = '\0';
        if (cli_parse_uint(item, 0xFFFFFFFFull, &values[count]) < 0)
            return -1;
        count++;
        p += n;
        if (*p == ',')
            p++;
    }
    return count;
}

int cli_parse_format(const struct cli_command *command, const char *text, enum cli_format *format)
{
    if (strcmp(text, "table") == 0)
        *format = CLI_FORMAT_TABLE;
    else if (strcmp(text, "json") == 0)
        *format = CLI_FORMAT_JSON;
    else
        return cli_usage_error(command, "--format: '%s' is not table or json", text);
    return 0;
}

int cli_parse_engine_contract(const struct cli_command *command, const char *text,
                              struct engine_contract *contract)
{
    struct audit_error err = { 0 };
    if (engine_contract_parse(text, "--engine-contract", ENGINE_CONTRACT_OPTION, contract,
                              &err) < 0)
        return cli_usage_error(command, "%s", err.message);
    return 0;
}

int cli_parse_bytes(const char *text, unsigned long long *value)
{
    static const char suffixes[] = "KMGT";
    char number[32];
    size_t length = text ? strlen(text) : 0;
    unsigned shift = 0;
    if (length == 0 || length >= sizeof(number))
        return -1;
    memcpy(number, text, length + 1);
    const char *suffix = strchr(suffixes, number[length - 1]);
    if (suffix) {
        shift = 10 * (unsigned)(suffix - suffixes + 1);
        number[length - 1] = '\0';
    }
    unsigned long long parsed;
    if (cli_parse_uint(number, ULLONG_MAX >> shift, &parsed) < 0)
        return -1;
    *value = parsed << shift;
    return 0;
}

static const struct cli_command *find_command(const char *name)
{
    for (int i = 0; command_table[i]; i++)
        if (strcmp(command_table[i]->name, name) == 0)
            return command_table[i];
    return NULL;
}

static void print_help(FILE *out)
{
    fprintf(out,
            "usage: dsatopk-audit [global options] <command> [options]\n"
            "       dsatopk-audit help [<command>] | --help [<command>] | --version\n\n"
            "A determinism auditor and replay tool for DSA top-k selection kernels.\n\n"
            "global options:\n"
            "  --emulate-smem-per-sm BYTES  run, bench and devices: act as if each SM had this\n"
            "                               much shared memory\n"
            "  --max-record-bytes N[K|M|G|T]  memory cap per capture record read (default 8G):\n"
            "                               a record whose raw payload is larger is refused\n"
            "                               before it is read (exit 4)\n\n"
            "commands:\n");
    for (int i = 0; command_table[i]; i++)
        fprintf(out, "  %-10s %s\n", command_table[i]->name, command_table[i]->summary);
    fprintf(out, "\nexit codes: 0 ok, 1 audit or gate failure, 2 usage error, 3 bad input data,\n"
                 "            4 device or runtime failure\n");
}

/* help COMMAND, --help COMMAND. */
static int print_command_help(const char *name)
{
    const struct cli_command *command = find_command(name);
    if (!command)
        return cli_usage_error(NULL, "no command '%s'", name);
    cli_print_usage(command, stdout);
    return EXIT_AUDIT_OK;
}

int main(int argc, char **argv)
{
    remember_command_line(argc, argv);
    /* A file-size limit (ulimit -f) then fails the write with EFBIG instead of killing the
     * process, and every writer rolls back as it does for a full disk. */
    signal(SIGXFSZ, SIG_IGN);
    if (hash_init() != 0) {
        fprintf(stderr, "dsatopk-audit: the SHA-256 library failed to initialise\n");
        return EXIT_DEVICE;
    }
    static const struct option global_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { "emulate-smem-per-sm", required_argument, NULL, 'E' },
        { "max-record-bytes", required_argument, NULL, 'M' },
        { NULL, 0, NULL, 0 },
    };
    int option;
    bool help = false, version = false;
    /* "+": stop at the first non-option, the command name; ":": missing values reported here. */
    opterr = 0;
    while ((option = getopt_long(argc, argv, "+:hV", global_options, NULL)) != -1) {
        switch (option) {
        case 'h': help = true; break;
        case 'V': version = true; break;
        case 'E':
            if (cli_parse_uint(optarg, 1ull << 32, &cli_globals.emulate_smem_per_sm) < 0)
                return cli_usage_error(NULL, "--emulate-smem-per-sm: '%s' is not a byte count",
                                       optarg);
            break;
        case 'M': {
            unsigned long long bytes = 0;
            if (cli_parse_bytes(optarg, &bytes) < 0 || bytes == 0)
                return cli_usage_error(NULL, "--max-record-bytes: '%s' is not a byte count above 0 "
                                       "(a number, optionally with K, M, G or T)", optarg);
            capture_set_max_record_bytes(bytes);
            break;
        }
        default: return cli_option_error(NULL, option, argv);
        }
    }
    /* After every global option is parsed: an unknown one is exit 2 wherever it is. --help
     * COMMAND is help COMMAND; anything else after --help or --version is refused, not ignored. */
    if (help && optind + 1 == argc)
        return print_command_help(argv[optind]);
    if ((help || version) && optind < argc)
        return cli_usage_error(NULL, "%s takes no argument ('%s')",
                               help ? "--help" : "--version", argv[optind]);
    if (help) {
        print_help(stdout);
        return EXIT_AUDIT_OK;
    }
    if (version) {
        printf("dsatopk-audit %s\n", cli_version());
        return EXIT_AUDIT_OK;
    }
    if (optind >= argc) {
        print_help(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[optind];
    if (strcmp(name, "help") == 0) {
        if (optind + 1 >= argc) {
            print_help(stdout);
            return EXIT_AUDIT_OK;
        }
        if (optind + 2 < argc)
            return cli_usage_error(NULL, "help takes one command ('%s' is one too many)",
                                   argv[optind + 2]);
        return print_command_help(argv[optind + 1]);
    }
    const struct cli_command *command = find_command(name);
    if (!command) {
        return cli_usage_error(NULL, "no command '%s'", name);
    }
    int command_argc = argc - optind;
    char **command_argv = argv + optind;
    optind = 0; /* reset getopt for the command's own parsing (glibc: 0 reinitialises) */
    return command->run(command_argc, command_argv);
}
