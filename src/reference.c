/* placeholder: being written */
#include "reference.h"
