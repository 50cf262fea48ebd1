/* What an array file looks like, from its bytes alone: the loader (tensor_file_load in
 * src/capture/safetensors.h) picks its reader by this, and a file of no kind it reads is refused
 * with what it looks like (an empty file, a zip archive such as numpy.savez's .npz or
 * torch.save's, a pickle) and what to do, instead of a parse error from the wrong reader. */
#ifndef DSATOPK_TENSOR_KIND_H
#define DSATOPK_TENSOR_KIND_H

#include <stddef.h>
#include <stdint.h>

enum tensor_kind {
    TENSOR_KIND_EMPTY,       /* no byte */
    TENSOR_KIND_NPY,         /* the \x93NUMPY magic */
    TENSOR_KIND_SAFETENSORS, /* a header length within the limit and '{' where it starts */
    TENSOR_KIND_TORCH_ZIP,   /* a zip archive holding a data.pkl: torch.save */
    TENSOR_KIND_ZIP,         /* another zip archive: numpy.savez's .npz, ... */
    TENSOR_KIND_PICKLE,      /* a pickle stream (0x80, protocol 2-5): the legacy torch.save */
    TENSOR_KIND_UNKNOWN,
};

enum tensor_kind tensor_kind_sniff(const uint8_t *bytes, size_t size);

/* For a refusal of a file of a kind no reader takes: "LABEL: is ...: advice", with the first
 * bytes of an unknown file in hex. */
void tensor_kind_describe(enum tensor_kind kind, const uint8_t *bytes, size_t size,
                          char *out, size_t out_size);

#endif
