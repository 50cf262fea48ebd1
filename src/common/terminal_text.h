/* Text that came from users or files (paths, JSON strings, metadata, messages quoting them)
 * reaches a terminal only through here, so that a file name with a newline cannot forge a table
 * line and one with an escape sequence cannot drive the terminal. Control characters (U+0000 to
 * U+001F, DEL, and the C1 controls U+0080 to U+009F) and bytes that are not UTF-8 are written as
 * \n, \r, \t or \xNN; everything else, other UTF-8 included, as it is. */
#ifndef DSATOPK_TERMINAL_TEXT_H
#define DSATOPK_TERMINAL_TEXT_H

#include <stdio.h>

/* Calls of terminal_safe whose results may be in use at once (one printf's arguments). */
#define TERMINAL_SAFE_SLOTS 8
/* Longest escaped text terminal_safe returns; longer ends in "...". */
#define TERMINAL_SAFE_BYTES 2048

/* text itself when nothing in it needs escaping (NULL gives "(null)"); else the escaped text in
 * one of TERMINAL_SAFE_SLOTS buffers of the calling thread, reused in turn. */
const char *terminal_safe(const char *text);

/* Writes text escaped to out, however long. */
void terminal_fputs(const char *text, FILE *out);

#endif
