/* Opening named input files: captures, .npy / .safetensors arrays, JSON documents.
 *
 * Every reader of a file named on the command line opens it here, so that no input can hang
 * the tool or be read as something it is not. The path is checked with stat() first (a FIFO,
 * directory, device or socket is refused without being opened), then opened with O_NONBLOCK
 * (a FIFO put in its place meanwhile cannot make open() wait for a writer) and checked again
 * with fstat() on the descriptor. Anything but a regular file is refused with AUDIT_EIO and a
 * message naming the file and what it is ("PATH: is a FIFO, not a regular file"), which the
 * commands turn into exit 3. O_NONBLOCK is cleared before the descriptor is handed back. */
#ifndef DSATOPK_INPUT_FILE_H
#define DSATOPK_INPUT_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* "a FIFO", "a directory", "a character device", "a block device", "a socket", "a symbolic
 * link", "a regular file", or "a file of unknown type". */
const char *input_file_kind(mode_t mode);

/* Opens path for reading (close-on-exec). Returns AUDIT_OK with *fd and *size (bytes at open
 * time), or AUDIT_EIO naming the file: missing, unreadable, or not a regular file. */
int input_file_open(const char *path, int *fd, uint64_t *size, struct audit_error *err);

/* pread() until size bytes are read or the file ends: *got tells how many. Returns 0, or -1 with
 * errno set on a read error. Never moves the file offset. */
int input_file_read_at(int fd, void *buffer, uint64_t size, uint64_t offset, uint64_t *got);

/* Reads a whole regular file of at most max_bytes into a malloc'ed buffer of *size + 1 bytes,
 * the last one a NUL (so text parsers can take it as a string; the file may hold NULs itself).
 * what names the kind of file in the size message ("a JSON document"). A larger file is
 * refused with AUDIT_EDATA ("PATH: N bytes, over the limit of M bytes for WHAT"); a file that
 * shrinks while being read with AUDIT_EIO. The readers of JSON documents and array files stand on this. */
int input_file_read_all(const char *path, uint64_t max_bytes, const char *what, uint8_t **bytes,
                        size_t *size, struct audit_error *err);

#endif
