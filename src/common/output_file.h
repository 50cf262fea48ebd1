/* Writing output files (reports, verdicts, baselines, HTML pages, listings, captures written
 * whole): OUT is replaced only once the new content is complete, or written through when it is
 * not a file that can be replaced.
 *
 *   "-"                           stdout (stdio's buffer is flushed first).
 *   a character device or FIFO    opened for writing and written through (/dev/null stays a
 *                                 device; a FIFO's reader gets the bytes; opening a FIFO waits
 *                                 for its reader, as a shell redirection does).
 *   a symbolic link               followed (up to 40 links); the final target is replaced and
 *                                 the link stays a link.
 *   a regular file or no file     the bytes go to a temporary file in OUT's directory: an
 *                                 unnamed one (O_TMPFILE) where the filesystem has it, else a
 *                                 hidden ".NAME.tmp-XXXXXXXXXXXX" beside it. On commit the
 *                                 temporary gets the old file's mode (and owner and group where
 *                                 permitted; a new file gets 0666 less the umask), is fsynced,
 *                                 and takes OUT's name with one rename(); the directory is then
 *                                 fsynced. A reader sees the old file or the new one, never a
 *                                 mixture.
 *   a directory, block device or socket   refused (AUDIT_EIO), nothing is opened.
 *
 * A failed write (disk full, EFBIG from a file-size limit: the process must ignore SIGXFSZ, as
 * main() does) or a failed fsync leaves OUT as it was, and the message says so, naming OUT (never
 * the temporary) and "writing". A process killed mid-write leaves OUT as it was and, with an
 * unnamed temporary, nothing else behind; with a named one, the hidden temporary. */
#ifndef DSATOPK_OUTPUT_FILE_H
#define DSATOPK_OUTPUT_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

struct output_file;

/* Opens OUT as described above. */
int output_file_open(struct output_file **out, const char *path, struct audit_error *err);

/* Appends bytes to the output. After a failure the output can only be discarded. */
int output_file_write(struct output_file *out, const void *bytes, size_t size,
                      struct audit_error *err);

/* Puts the new content in place (or closes the file written through) and frees out. On failure
 * OUT is as it was before output_file_open and the temporary is gone. */
int output_file_commit(struct output_file *out, struct audit_error *err);

/* Drops what was written (OUT untouched, unless it is written through) and frees out; NULL is
 * allowed. */
void output_file_discard(struct output_file *out);

/* open + write + commit of one buffer. */
int output_file_write_all(const char *path, const void *bytes, size_t size,
                          struct audit_error *err);

/* Tests: false makes later opens use the named temporary even where O_TMPFILE works. */
void output_file_allow_unnamed_temporaries(bool allow);

#endif
