/* placeholder: being written */
#include "cli.h"
#include "error.h"
static int run_synth(int argc, char **argv) { (void)argc; (void)argv; return EXIT_DEVICE; }
const struct cli_command cmd_synth = { "synth", "(being written)", "", run_synth };
