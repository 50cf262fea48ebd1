/* dsatopk-audit synth: writes one record of a documented synthetic family (docs/SYNTH.md). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "capture.h"
#include "capture_tail.h"
#include "cli.h"
#include "error.h"
#include "synth.h"
#include "terminal_text.h"

static const char synth_usage[] =
    "usage: dsatopk-audit synth --family F [options] -o FILE\n"
    "       dsatopk-audit synth --list\n"
    "\n"
    "Writes one record of family F, generated from a seed with a portable generator: the same\n"
    "options give the same bytes on every machine. Without --append, FILE is replaced whole\n"
    "once the record is written (its mode kept; a device or FIFO is written through); with\n"
    "--append the record is added at its end, under a lock, after checking that FILE ends in a\n"
    "complete record (a torn last record is refused, naming the repair).\n"
    "\n"
    "  -f, --family F       plateau, tie, relu, narrow, indexer, random, neginf, allequal,\n"
    "                       short, offsets, padded, paged, signedzero, nan, subnormal (--list)\n"
    "  -b, --rows B         rows (default 8)\n"
    "  -L, --length L       row length (default 32768)\n"
    "  -k, --k K            k of the record (default 2048)\n"
    "  -s, --seed S         seed, 0 .. 2^53 (default 0)\n"
    "      --distinct M     plateau: distinct positives per row (default 0: all exact 0.0)\n"
    "      --ties T         tie: exact 1.0 ties straddling the boundary (default 512)\n"
    "      --heads H        indexer: heads (default 64)\n"
    "      --rho R          indexer: cross-head correlation in [0, 1] (default 0.9)\n"
    "      --mu M           indexer: mean logit (default -1)\n"
    "      --page-size P    paged: power of two (default 64)\n"
    "      --stride-pad N   padded: elements after each row (default 64);\n"
    "                       offsets: row_starts range over [0, N] (default 61)\n"
    "  -z, --compress       zlib-compress the payload\n"
    "  -a, --append         append to FILE instead of replacing it\n"
    "      --repair-tail    with --append: first cut a torn or corrupt last record off FILE\n"
    "                       (refused when a complete record lies past the damage)\n"
    "  -o, --output FILE    the capture file to write\n"
    "      --list           print the families, one line each, and exit\n"
    "\n"
    "Family definitions, formulas and the generator: docs/SYNTH.md.\n"
    "Exit codes: 0 written, 2 bad option, 3 FILE could not be written or ends in a damaged\n"
    "record (--append), 4 out of memory.\n";

/* One line per family for --list; every name in synth_family_names has one. */
static const struct {
    const char *name;
    const char *description;
} family_descriptions[] = {
    { "plateau", "M distinct positives 0.5 + i*1e-3, the rest exact 0.0 (ReLU zero plateau)" },
    { "tie", "T exact 1.0 ties straddling the k-th boundary, distinct values around them" },
    { "relu", "relu(N(0,1) - 1.28) * 11.3 in fp32 (the public PR fixture, ~10% nonzero)" },
    { "narrow", "1 + N(0,1) * 1e-7 in fp32: one coarse bin, radix staging overflow" },
    { "indexer", "H-head ReLU indexer model, equicorrelated logits (rho, mu), 2^e key scale" },
    { "random", "N(0,1) in fp32, distinct values (the generic case)" },
    { "neginf", "N(0,1) with 5% exact -inf and one row entirely -inf" },
    { "allequal", "even rows all exact 1.0, odd rows all exact 0.0" },
    { "short", "lengths below k (every 8th row empty), poison past the window" },
    { "offsets", "windows at random row_starts inside a wider stride, poison around them" },
    { "padded", "row stride L + stride-pad, the pad filled with poison NaN" },
    { "paged", "page table (page-size), permuted physical pages, ties on 1/16 steps" },
    { "signedzero", "+0.0 and -0.0 plateaus with the boundary inside either set" },
    { "nan", "N(0,1) with +NaN and -NaN of several payloads, and some +inf" },
    { "subnormal", "subnormal magnitudes only, each repeated ~8 times (ties)" },
};

static const char *family_description(const char *name)
{
    for (size_t i = 0; i < sizeof(family_descriptions) / sizeof(family_descriptions[0]); i++)
        if (strcmp(family_descriptions[i].name, name) == 0)
            return family_descriptions[i].description;
    return "(no description)";
}

/* Library errors start "synth: FIELD ..."; the option that sets FIELD, for the message. */
static const struct {
    const char *field;
    const char *option;
} field_options[] = {
    { "family", "--family" },         { "rows", "--rows" },       { "length", "--length" },
    { "k", "--k" },                   { "seed", "--seed" },       { "plateau_distinct", "--distinct" },
    { "tie_count", "--ties" },        { "heads", "--heads" },     { "rho", "--rho" },
    { "mu", "--mu" },                 { "page_size", "--page-size" },
    { "stride_pad", "--stride-pad" },
};

static const char *option_for_message(const char *message)
{
    static const char prefix[] = "synth: ";
    if (strncmp(message, prefix, sizeof(prefix) - 1) != 0)
        return NULL;
    const char *field = message + sizeof(prefix) - 1;
    size_t field_length = strcspn(field, " ");
    for (size_t i = 0; i < sizeof(field_options) / sizeof(field_options[0]); i++)
        if (strlen(field_options[i].field) == field_length &&
            strncmp(field_options[i].field, field, field_length) == 0)
            return field_options[i].option;
    return NULL;
}

static int parse_double(const char *text, double *value)
{
    if (!text || !*text)
        return -1;
    char *end = NULL;
    errno = 0;
    double parsed = strtod(text, &end);
    if (*end != '\0' || errno != 0 || !isfinite(parsed))
        return -1;
    *value = parsed;
    return 0;
}

/* Adds "tool" (the version without the git revision, so that regenerating a capture from another
 * commit gives the same bytes) to the library's metadata. */
static int add_tool_metadata(struct capture_record *record, struct audit_error *err)
{
    cJSON *metadata = cJSON_Parse(record->metadata_json);
    if (!metadata)
        return audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for metadata");
    char *text = NULL;
    if (cJSON_AddStringToObject(metadata, "tool", "dsatopk-audit " DSATOPK_VERSION))
        text = cJSON_PrintUnformatted(metadata);
    cJSON_Delete(metadata);
    if (!text)
        return audit_fail(err, AUDIT_ENOMEM, "synth: out of memory for metadata");
    free(record->metadata_json);
    record->metadata_json = text;
    return AUDIT_OK;
}

enum synth_option {
    OPTION_DISTINCT = 256,
    OPTION_TIES,
    OPTION_HEADS,
    OPTION_RHO,
    OPTION_MU,
    OPTION_PAGE_SIZE,
    OPTION_STRIDE_PAD,
    OPTION_LIST,
    OPTION_REPAIR_TAIL,
};

/* Options that only one family (or two) reads: given for another family they are a mistake. */
static int check_family_option(const char *family, bool given, const char *option,
                               const char *family_a, const char *family_b)
{
    if (!given || strcmp(family, family_a) == 0 || (family_b && strcmp(family, family_b) == 0))
        return 0;
    return cli_usage_error(&cmd_synth, "%s applies only to --family %s%s%s (not %s)", option,
                           family_a, family_b ? " or " : "", family_b ? family_b : "", family);
}

/* What the command line asked for; given_* say which family-specific options were written. */
struct synth_cli {
    struct synth_params params;
    const char *output;
    bool compress, append, list, repair_tail, help;
    bool given_distinct, given_ties, given_heads, given_rho, given_mu, given_page_size,
        given_stride_pad;
};

/* 0, or the exit code of a usage error already printed. */
static int parse_synth_options(int argc, char **argv, struct synth_cli *cli)
{
    static const struct option options[] = {
        { "family", required_argument, NULL, 'f' },
        { "rows", required_argument, NULL, 'b' },
        { "length", required_argument, NULL, 'L' },
        { "k", required_argument, NULL, 'k' },
        { "seed", required_argument, NULL, 's' },
        { "distinct", required_argument, NULL, OPTION_DISTINCT },
        { "ties", required_argument, NULL, OPTION_TIES },
        { "heads", required_argument, NULL, OPTION_HEADS },
        { "rho", required_argument, NULL, OPTION_RHO },
        { "mu", required_argument, NULL, OPTION_MU },
        { "page-size", required_argument, NULL, OPTION_PAGE_SIZE },
        { "stride-pad", required_argument, NULL, OPTION_STRIDE_PAD },
        { "compress", no_argument, NULL, 'z' },
        { "append", no_argument, NULL, 'a' },
        { "output", required_argument, NULL, 'o' },
        { "list", no_argument, NULL, OPTION_LIST },
        { "repair-tail", no_argument, NULL, OPTION_REPAIR_TAIL },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct synth_params *params = &cli->params;
    int option;
    opterr = 0; /* our own messages name the option */
    while ((option = getopt_long(argc, argv, ":f:b:L:k:s:zao:h", options, NULL)) != -1) {
        unsigned long long value = 0;
        const char *name = NULL;
        uint32_t *target = NULL;
        bool *given = NULL;
        switch (option) {
        case 'f': params->family = optarg; continue;
        case 'z': cli->compress = true; continue;
        case 'a': cli->append = true; continue;
        case 'o': cli->output = optarg; continue;
        case OPTION_LIST: cli->list = true; continue;
        case OPTION_REPAIR_TAIL: cli->repair_tail = true; continue;
        case 'h': cli->help = true; continue;
        case 's':
            if (cli_parse_uint(optarg, UINT64_C(1) << 53, &value) < 0)
                return cli_usage_error(&cmd_synth, "--seed: '%s' is not an integer in [0, 2^53]",
                                       optarg);
            params->seed = value;
            continue;
        case OPTION_RHO:
        case OPTION_MU: {
            double *number = option == OPTION_RHO ? &params->rho : &params->mu;
            if (parse_double(optarg, number) < 0)
                return cli_usage_error(&cmd_synth, "%s: '%s' is not a finite number",
                                       option == OPTION_RHO ? "--rho" : "--mu", optarg);
            *(option == OPTION_RHO ? &cli->given_rho : &cli->given_mu) = true;
            continue;
        }
        case 'b': name = "--rows"; target = &params->rows; break;
        case 'L': name = "--length"; target = &params->length; break;
        case 'k': name = "--k"; target = &params->k; break;
        case OPTION_DISTINCT:
            name = "--distinct";
            target = &params->plateau_distinct;
            given = &cli->given_distinct;
            break;
        case OPTION_TIES:
            name = "--ties";
            target = &params->tie_count;
            given = &cli->given_ties;
            break;
        case OPTION_HEADS:
            name = "--heads";
            target = &params->heads;
            given = &cli->given_heads;
            break;
        case OPTION_PAGE_SIZE:
            name = "--page-size";
            target = &params->page_size;
            given = &cli->given_page_size;
            break;
        case OPTION_STRIDE_PAD:
            name = "--stride-pad";
            target = &params->stride_pad;
            given = &cli->given_stride_pad;
            break;
        default: return cli_option_error(&cmd_synth, option, argv);
        }
        if (cli_parse_uint(optarg, UINT32_MAX, &value) < 0)
            return cli_usage_error(&cmd_synth, "%s: '%s' is not an unsigned 32-bit integer", name,
                                   optarg);
        *target = (uint32_t)value;
        if (given)
            *given = true;
    }
    if (optind < argc && !cli->help)
        return cli_usage_error(&cmd_synth, "unexpected argument '%s'", argv[optind]);
    return 0;
}

/* The options together, once --help and --list are out of the way: 0 or a usage exit code. */
static int check_synth_options(const struct synth_cli *cli)
{
    const struct synth_params *params = &cli->params;
    if (!params->family)
        return cli_usage_error(&cmd_synth, "--family is required (see --list)");
    if (!cli->output)
        return cli_usage_error(&cmd_synth, "-o/--output FILE is required");
    if (cli->repair_tail && !cli->append)
        return cli_usage_error(&cmd_synth, "--repair-tail applies only with --append");
    if (strcmp(cli->output, "-") == 0)
        return cli_usage_error(&cmd_synth, "-o: a capture is binary; give a file path, not '-'");
    if ((cli->given_page_size && params->page_size == 0) ||
        (cli->given_heads && params->heads == 0) ||
        (cli->given_stride_pad && params->stride_pad == 0))
        return cli_usage_error(&cmd_synth, "%s: 0 is not allowed (leave the option out for the "
                               "default)", cli->given_page_size && params->page_size == 0 ?
                               "--page-size" : cli->given_heads && params->heads == 0 ?
                               "--heads" : "--stride-pad");
    const char *family = params->family;
    int usage = 0;
    if ((usage = check_family_option(family, cli->given_distinct, "--distinct", "plateau",
                                     NULL)) ||
        (usage = check_family_option(family, cli->given_ties, "--ties", "tie", NULL)) ||
        (usage = check_family_option(family, cli->given_heads, "--heads", "indexer", NULL)) ||
        (usage = check_family_option(family, cli->given_rho, "--rho", "indexer", NULL)) ||
        (usage = check_family_option(family, cli->given_mu, "--mu", "indexer", NULL)) ||
        (usage = check_family_option(family, cli->given_page_size, "--page-size", "paged",
                                     NULL)) ||
        (usage = check_family_option(family, cli->given_stride_pad, "--stride-pad", "padded",
                                     "offsets")))
        return usage;
    return 0;
}

static int run_synth(int argc, char **argv)
{
    struct synth_cli cli = {
        .params = {
            .rows = 8,
            .length = 32768,
            .k = 2048,
            .tie_count = 512,
            .heads = 64,
            .rho = 0.9,
            .mu = -1.0,
        },
    };
    int usage = parse_synth_options(argc, argv, &cli);
    if (usage)
        return usage;
    if (cli.help) {
        cli_print_usage(&cmd_synth, stdout);
        return EXIT_AUDIT_OK;
    }
    if (cli.list) {
        for (int i = 0; synth_family_names[i]; i++)
            printf("%-11s %s\n", synth_family_names[i], family_description(synth_family_names[i]));
        return EXIT_AUDIT_OK;
    }
    if ((usage = check_synth_options(&cli)))
        return usage;

    const struct synth_params *params = &cli.params;
    const char *output = cli.output;
    struct capture_record record;
    struct audit_error err = { 0 };
    int status = synth_generate(params, &record, &err);
    if (status == AUDIT_EUSAGE) {
        const char *option_name = option_for_message(err.message);
        const char *text = strncmp(err.message, "synth: ", 7) == 0 ? err.message + 7 : err.message;
        if (option_name)
            return cli_usage_error(&cmd_synth, "%s: %s", option_name, text);
        return cli_usage_error(&cmd_synth, "%s", text);
    }
    if (status < 0)
        goto error;
    if ((status = add_tool_metadata(&record, &err)) < 0)
        goto error;
    struct capture_tail tail = { .state = CAPTURE_READ_END };
    const struct capture_append_options append_options = { cli.compress, cli.repair_tail };
    status = cli.append ? capture_append(output, &record, &append_options, &tail, &err)
                        : capture_write_record(output, &record, cli.compress, &err);
    if (status < 0)
        goto error;
    if (tail.state != CAPTURE_READ_END)
        printf("%s: cut the damaged tail (%s) back to %" PRIu32 " record%s, %" PRIu64 " bytes\n",
               terminal_safe(output), tail.problem, tail.records, tail.records == 1 ? "" : "s",
               tail.intact_bytes);
    printf("%s: %s %s, %u rows x %u, k %u, seed %llu%s\n", terminal_safe(output),
           cli.append ? "appended" : "wrote", params->family, record.rows, params->length,
           record.k, (unsigned long long)params->seed, cli.compress ? ", zlib" : "");
    capture_record_free(&record);
    return EXIT_AUDIT_OK;
error:
    capture_record_free(&record);
    cli_print_message(&cmd_synth, "%s", err.message);
    return audit_exit_code(status);
}

const struct cli_command cmd_synth = {
    "synth",
    "write a synthetic capture of a documented family (portable generator)",
    synth_usage,
    run_synth,
};
