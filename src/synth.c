/* placeholder: being written */
#include "synth.h"
