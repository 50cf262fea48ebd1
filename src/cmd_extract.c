/* placeholder: being written */
#include "cli.h"
#include "error.h"
static int run_extract(int argc, char **argv) { (void)argc; (void)argv; return EXIT_DEVICE; }
const struct cli_command cmd_extract = { "extract", "(being written)", "", run_extract };
