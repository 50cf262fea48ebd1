/* UTF-8 as Unicode table 3-7 defines it: no overlong form, no UTF-16 surrogate, nothing above
 * U+10FFFF. */
#ifndef DSATOPK_UTF8_H
#define DSATOPK_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1 to 4) of the well-formed sequence that starts at p, of the available bytes; 0
 * when none starts there. */
size_t utf8_sequence_length(const uint8_t *p, size_t available);

#endif
