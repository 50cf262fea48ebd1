/* placeholder: being written */
#include "cli.h"
#include "error.h"
static int run_diff(int argc, char **argv) { (void)argc; (void)argv; return EXIT_DEVICE; }
const struct cli_command cmd_diff = { "diff", "(being written)", "", run_diff };
