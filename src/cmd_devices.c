/* placeholder: being written */
#include "cli.h"
#include "error.h"
static int run_devices(int argc, char **argv) { (void)argc; (void)argv; return EXIT_DEVICE; }
const struct cli_command cmd_devices = { "devices", "(being written)", "", run_devices };
