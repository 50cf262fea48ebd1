/* placeholder: being written */
#include "capture.h"
