/* placeholder: being written */
#include "cli.h"
#include "error.h"
static int run_import(int argc, char **argv) { (void)argc; (void)argv; return EXIT_DEVICE; }
const struct cli_command cmd_import = { "import", "(being written)", "", run_import };
