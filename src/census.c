/* placeholder: being written */
#include "census.h"
