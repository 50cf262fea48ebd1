/* GPU test of the test plugins (suite gpu; exit 77 without a CUDA device): each plugin is
 * loaded and replayed the way `run` replays a backend (src/replay/replay.h: poisoned outputs, the
 * contract checks of src/verdict/checks.h, the verdict rules of src/report/report.h), each case in its own
 * child process with a deadline, so that the faulty plugins show what they were built to show
 * without taking this program down:
 *   example_plugin  every synth family (ties, -inf, NaN, signed zeros, short rows, row starts,
 *                   padding, page tables), eager reps and CUDA-graph replay: no violation, one
 *                   distinct output, verdict pass
 *   plugin_wrong    wrong_set on every rep, one distinct output, verdict fail
 *   plugin_arrival  tie rows: never a wrong set, but the tie rule broken or the output flapping,
 *                   verdict fail
 *   plugin_oob      a CUDA error (illegal address) reported as the backend's error, the child
 *                   exiting normally
 *   plugin_hang     the child still running at the deadline, killed (kernel spin, and with
 *                   DSATOPK_PLUGIN_HANG=host a launch that never returns)
 *   host_crash      the child killed by SIGSEGV inside launch()
 *   host_oom        scratch of 1 TiB: the allocation fails with cudaErrorMemoryAllocation, which
 *                   is the backend's error naming the record, backend and bytes; the child exits
 * The parent never initialises CUDA (a process must not use CUDA across fork), so the device
 * probe runs in a child too.
 *
 * Usage: test_gpu_plugins PLUGIN_DIR [--verbose] [--only NAME] [--k N]. --only runs the cases of
 * the plugins whose file name contains NAME (e.g. under compute-sanitizer: --only example_plugin);
 * --k runs the example plugin's cases at k = N only (default: 1, 100 and 2048), which keeps the
 * number of child processes down under compute-sanitizer (scripts/device-check.sh
 * sanitize-plugins). Exit 0 all expectations met, 1 not, 2 usage, 77 no device. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "topk_backends.h"
#include "capture.h"
#include "checks.h"
#include "error.h"
#include "hash.h"
#include "plugin.h"
#include "replay.h"
#include "report.h"
#include "synth.h"

#define EXIT_SKIPPED 77
#define CASE_DEADLINE_SECONDS 120
#define HANG_DEADLINE_SECONDS 20
#define RESULT_BYTES 4096

static const char *plugin_dir;
static bool verbose;
static int child_out_fd = -1; /* in a child: the pipe its result line goes to */
static const char *only;      /* --only: a substring of the plugin file names to run */
static uint32_t only_k;       /* --k: the example plugin's one k (0: all of them) */

/* What a child reports, one line: status, distinct outputs, rows with wrong_set, with tie_rule,
 * with any other violation (summed over reps), verdict, graph replay fine (1/0), reason. */
struct outcome {
    bool exited;           /* the child exited (else: killed by a signal or by the deadline) */
    int exit_code;
    int signal_number;
    bool timed_out;
    char line[RESULT_BYTES];
    char status[32], verdict[32];
    unsigned distinct, wrong_set, tie_rule, other_violations, graph_ok;
};

/* ---- the child ------------------------------------------------------------------------------ */

static int child_replay(const char *file, const char *family, uint32_t k, bool graph, int out_fd)
{
    struct audit_error err = { 0 };
    struct replay_device *device = NULL;
    struct replay_input *input = NULL;
    struct capture_record record = { 0 };
    struct check_context checks = { 0 };
    struct backend_result result;
    const struct topk_backend *backend = NULL;
    char path[4096], line[RESULT_BYTES];
    int status;

    snprintf(path, sizeof(path), "%s/%s.so", plugin_dir, file);
    if (hash_init() != 0 || plugin_load(path, &backend, &err) < 0) {
        dprintf(out_fd, "load_failed 0 0 0 0 none 0 %s\n", err.message);
        return 0;
    }
    struct synth_params params = { .family = family, .rows = 16, .length = 8192, .k = k,
                                   .seed = 7 };
    if (strcmp(family, "tie") == 0)
        params.tie_count = 512; /* the default, spelled out: ties straddle the boundary */
    if ((status = synth_generate(&params, &record, &err)) < 0 ||
        (status = replay_device_open(&device, 0, 0, NOISE_MEM, &err)) < 0 ||
        (status = replay_input_create(device, &record, k, &input, &err)) < 0 ||
        (status = checks_prepare(&checks, &record, k, &err)) < 0) {
        dprintf(out_fd, "setup_failed 0 0 0 0 none 0 %s\n", err.message);
        return 0;
    }
    backend_result_init(&result, backend);
    struct replay_options options = { .reps = 6, .graph = graph, .file = family };
    status = replay_backend(device, input, backend, &checks, &options, &result, &err);
    struct verdict_result verdict;
    report_verdict(&result, NULL, &verdict);
    unsigned other = 0;
    for (int kind = 0; kind < CHECK_KIND_COUNT; kind++)
        if (kind != CHECK_WRONG_SET && kind != CHECK_TIE_RULE)
            other += (unsigned)result.eager.violations[kind].total_rows;
    snprintf(line, sizeof(line), "%s %u %u %u %u %s %d %s",
             backend_status_name(result.status), result.eager.distinct_outputs,
             (unsigned)result.eager.violations[CHECK_WRONG_SET].total_rows,
             (unsigned)result.eager.violations[CHECK_TIE_RULE].total_rows, other,
             verdict_name(verdict.verdict), graph ? (result.graph_ran && !result.graph_error[0])
                                                  : 1,
             result.reason[0] ? result.reason : (status < 0 ? err.message : "-"));
    for (char *c = line; *c; c++)
        if (*c == '\n')
            *c = ' ';
    dprintf(out_fd, "%s\n", line);
    /* No cleanup on purpose: after an illegal address the context is gone, and the point of the
     * case is what was reported. The process exit releases everything. */
    return 0;
}

static int child_probe(void)
{
    int count = 0;
    char why[256];
    return gpu_device_count(&count, why, sizeof(why)) == 0 && count > 0 ? 0 : EXIT_SKIPPED;
}

/* ---- the parent ------------------------------------------------------------------------------ */

/* Runs fn in a child with a deadline; collects its line of output and how it ended. */
static void run_case(struct outcome *outcome, int deadline, int (*fn)(void *), void *arg)
{
    int pipe_fds[2];
    memset(outcome, 0, sizeof(*outcome));
    if (pipe(pipe_fds) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        close(pipe_fds[0]);
        child_out_fd = pipe_fds[1];
        _exit(fn(arg));
    }
    close(pipe_fds[1]);
    size_t used = 0;
    time_t start = time(NULL);
    int wait_status = 0;
    bool reaped = false;
    for (;;) {
        struct pollfd poll_fd = { .fd = pipe_fds[0], .events = POLLIN };
        int ready = poll(&poll_fd, 1, 200);
        if (ready > 0) {
            ssize_t n = read(pipe_fds[0], outcome->line + used, sizeof(outcome->line) - 1 - used);
            if (n > 0)
                used += (size_t)n;
        }
        pid_t done = waitpid(pid, &wait_status, WNOHANG);
        if (done == pid) {
            reaped = true;
            break;
        }
        if (time(NULL) - start >= deadline) {
            outcome->timed_out = true;
            kill(pid, SIGKILL);
            waitpid(pid, &wait_status, 0);
            reaped = true;
            break;
        }
    }
    ssize_t n;
    while (used < sizeof(outcome->line) - 1 &&
           (n = read(pipe_fds[0], outcome->line + used, sizeof(outcome->line) - 1 - used)) > 0)
        used += (size_t)n;
    close(pipe_fds[0]);
    outcome->line[used] = '\0';
    if (reaped && WIFEXITED(wait_status)) {
        outcome->exited = !outcome->timed_out;
        outcome->exit_code = WEXITSTATUS(wait_status);
    } else if (reaped && WIFSIGNALED(wait_status)) {
        outcome->signal_number = WTERMSIG(wait_status);
    }
    sscanf(outcome->line, "%31s %u %u %u %u %31s %u", outcome->status, &outcome->distinct,
           &outcome->wrong_set, &outcome->tie_rule, &outcome->other_violations, outcome->verdict,
           &outcome->graph_ok);
}

struct replay_case {
    const char *file, *family;
    uint32_t k;
    bool graph;
};

static int replay_case_main(void *arg)
{
    const struct replay_case *c = arg;
    return child_replay(c->file, c->family, c->k, c->graph, child_out_fd);
}

static int probe_main(void *arg)
{
    (void)arg;
    return child_probe();
}

/* Returns false (and runs nothing) for a plugin --only leaves out. */
static bool run_replay(struct outcome *outcome, const char *file, const char *family, uint32_t k,
                       bool graph, int deadline)
{
    if (only && !strstr(file, only))
        return false;
    struct replay_case c = { file, family, k, graph };
    run_case(outcome, deadline, replay_case_main, &c);
    return true;
}

static int failures;

static void expect(bool condition, const char *what, const struct outcome *outcome)
{
    if (!condition) {
        failures++;
        printf("FAIL  %s\n      child %s%s, exit %d, signal %d: %s", what,
               outcome->exited ? "exited" : "did not exit",
               outcome->timed_out ? " (deadline)" : "", outcome->exit_code,
               outcome->signal_number, outcome->line[0] ? outcome->line : "(no output)\n");
    } else if (verbose) {
        printf("ok    %s: %s", what, outcome->line[0] ? outcome->line : "(no output)\n");
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_plugins PLUGIN_DIR [--verbose] [--only NAME] [--k N]\n");
        return 2;
    }
    plugin_dir = argv[1];
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--verbose") == 0) {
            verbose = true;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--k") == 0 && i + 1 < argc) {
            char *end;
            unsigned long value = strtoul(argv[++i], &end, 10);
            if (!*argv[i] || *end || value == 0 || value > CAPTURE_MAX_K) {
                fprintf(stderr, "test_gpu_plugins: --k: expected 1..%u: %s\n", CAPTURE_MAX_K,
                        argv[i]);
                return 2;
            }
            only_k = (uint32_t)value;
        } else {
            fprintf(stderr, "test_gpu_plugins: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    struct outcome outcome;
    run_case(&outcome, 60, probe_main, NULL);
    if (!outcome.exited || outcome.exit_code != 0) {
        printf("no CUDA device: skipped\n");
        return EXIT_SKIPPED;
    }

    static const char *const families[] = { "random", "tie", "plateau", "neginf", "nan",
                                            "signedzero", "subnormal", "allequal", "short",
                                            "offsets", "padded", "paged", "relu", "indexer" };
    static const uint32_t ks[] = { 1, 100, 2048 };
    char what[256];
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
            const uint32_t k = only_k ? only_k : ks[i];
            if (only_k && i > 0)
                break;
            if (!run_replay(&outcome, "example_plugin", families[f], k, true,
                            CASE_DEADLINE_SECONDS))
                continue;
            snprintf(what, sizeof(what), "example_plugin %s k=%u: clean pass, graph too",
                     families[f], k);
            expect(outcome.exited && strcmp(outcome.status, "ok") == 0 &&
                       strcmp(outcome.verdict, "pass") == 0 && outcome.distinct == 1 &&
                       outcome.wrong_set == 0 && outcome.tie_rule == 0 &&
                       outcome.other_violations == 0 && outcome.graph_ok == 1,
                   what, &outcome);
        }
    }

    if (run_replay(&outcome, "plugin_wrong", "random", 100, false, CASE_DEADLINE_SECONDS))
        expect(outcome.exited && strcmp(outcome.status, "ok") == 0 && outcome.wrong_set > 0 &&
                   outcome.distinct == 1 && strcmp(outcome.verdict, "fail") == 0,
               "plugin_wrong: wrong sets, deterministically, verdict fail", &outcome);

    if (run_replay(&outcome, "plugin_arrival", "tie", 2048, false, CASE_DEADLINE_SECONDS))
        expect(outcome.exited && strcmp(outcome.status, "ok") == 0 && outcome.wrong_set == 0 &&
                   (outcome.tie_rule > 0 || outcome.distinct > 1) &&
                   strcmp(outcome.verdict, "fail") == 0,
               "plugin_arrival: exact sets, tie rule broken or flapping, verdict fail", &outcome);

    if (run_replay(&outcome, "plugin_oob", "random", 100, false, CASE_DEADLINE_SECONDS))
        expect(outcome.exited && outcome.exit_code == 0 &&
                   (strcmp(outcome.status, "error") == 0 ||
                    strcmp(outcome.status, "cuda_error") == 0) &&
                   (strstr(outcome.line, "illegal") || strstr(outcome.line, "Illegal")),
               "plugin_oob: the illegal address is the backend's error, the child exits", &outcome);

    if (run_replay(&outcome, "plugin_hang", "random", 100, false, HANG_DEADLINE_SECONDS))
        expect(outcome.timed_out, "plugin_hang: still running at the deadline, killed", &outcome);

    setenv("DSATOPK_PLUGIN_HANG", "host", 1);
    bool ran = run_replay(&outcome, "plugin_hang", "random", 100, false, HANG_DEADLINE_SECONDS);
    unsetenv("DSATOPK_PLUGIN_HANG");
    if (ran)
        expect(outcome.timed_out, "plugin_hang (host): launch never returns, killed", &outcome);

    if (run_replay(&outcome, "host_crash", "random", 100, false, CASE_DEADLINE_SECONDS))
        expect(!outcome.exited && !outcome.timed_out && outcome.signal_number == SIGSEGV,
               "host_crash: the child dies of SIGSEGV in launch()", &outcome);

    /* The caller allocates the scratch: 1 TiB fails (not sticky), which is the backend's error
     * with the CUDA error name, the bytes, the record and the backend; the child goes on and
     * exits normally. */
    if (run_replay(&outcome, "host_oom", "random", 100, false, CASE_DEADLINE_SECONDS))
        expect(outcome.exited && outcome.exit_code == 0 && strcmp(outcome.status, "error") == 0 &&
                   strcmp(outcome.verdict, "fail") == 0 &&
                   strstr(outcome.line, "cudaErrorMemoryAllocation") &&
                   strstr(outcome.line, "1099511627776 bytes") &&
                   strstr(outcome.line, "record 0, backend faulty-oom"),
               "host_oom: 1 TiB of scratch is the backend's error (cudaErrorMemoryAllocation), "
               "naming record, backend and bytes; the child exits",
               &outcome);

    printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
