/* placeholder: being written */
#include "cli.h"
#include "error.h"
static int run_census(int argc, char **argv) { (void)argc; (void)argv; return EXIT_DEVICE; }
const struct cli_command cmd_census = { "census", "(being written)", "", run_census };
