/* placeholder: being written */
#include "cli.h"
#include "error.h"
static int run_run(int argc, char **argv) { (void)argc; (void)argv; return EXIT_DEVICE; }
const struct cli_command cmd_run = { "run", "(being written)", "", run_run };
