#include "topk_backends.h"
