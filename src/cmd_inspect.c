/* placeholder: being written */
#include "cli.h"
#include "error.h"
static int run_inspect(int argc, char **argv) { (void)argc; (void)argv; return EXIT_DEVICE; }
const struct cli_command cmd_inspect = { "inspect", "(being written)", "", run_inspect };
