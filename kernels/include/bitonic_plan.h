/* bitonic's plans as arguments (docs/BACKENDS.md "bitonic").
 *
 * bitonic runs one of three paths per call: one thread-block cluster per row, rows cut into
 * leaves merged up a tree, or one 1024-thread CTA per row. Which one, and how it cuts the row,
 * is a plan: bitonic_plan_make() computes it from a described device and a shape alone (no CUDA
 * call, so the CPU tests check it: tests/test_bitonic_plan.c), and bitonic_plan_launch() runs
 * it. The backend table's entry plans with BITONIC_CHOICE_AUTO; a test or a measurement forces
 * another choice through the same two calls, or through bitonic_backend_with(), the table entry
 * with that choice (as CUB's tests pass a custom policy hub), never through the environment.
 *
 * Plain C with extern "C" guards. */
#ifndef DSATOPK_BITONIC_PLAN_H
#define DSATOPK_BITONIC_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "error.h"
#include "gpu_device.h"
#include "topk_backends.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to plan. A forced path that does not apply to a shape falls back as auto does: a cluster
 * choice to the tree, the tree to one CTA per row. */
enum bitonic_choice {
    BITONIC_CHOICE_AUTO = 0,   /* "auto": what the backend runs */
    BITONIC_CHOICE_TREE,       /* "tree": auto without the cluster path */
    BITONIC_CHOICE_CLUSTER,    /* "cluster": the cluster path on every shape it can run */
    BITONIC_CHOICE_CLUSTER16,  /* "cluster16": the same with 16 keys per thread only */
    BITONIC_CHOICE_CLUSTER32,  /* "cluster32" */
    BITONIC_CHOICE_CLUSTER64,  /* "cluster64" */
    BITONIC_CHOICE_CLUSTER128, /* "cluster128" (64 in registers, 64 in shared memory) */
    BITONIC_CHOICE_TREE_DEEP,  /* "tree_deep": the tree with leaves of 2048 elements */
    BITONIC_CHOICE_ONE_CTA,    /* "one_cta": one CTA per row everywhere */
    BITONIC_CHOICES
};

#define BITONIC_CHOICE_NAMES                                                                      \
    "auto, tree, cluster, cluster16, cluster32, cluster64, cluster128, tree_deep or one_cta"

/* The choice's name ("auto", ...), or "unknown". */
const char *bitonic_choice_name(enum bitonic_choice choice);
/* 0 with *choice set, or AUDIT_EUSAGE for a name that is none of BITONIC_CHOICE_NAMES. */
int bitonic_choice_parse(const char *text, enum bitonic_choice *choice);

enum bitonic_path {
    BITONIC_PATH_ONE_CTA = 0,
    BITONIC_PATH_TREE,
    BITONIC_PATH_CLUSTER,
};

#define BITONIC_TREE_MAX_LEVELS 16

/* How the tree path cuts a shape (host and device: the tree kernels receive it): level 0 holds
 * the leaves, the last level the root. */
struct bitonic_tree_plan {
    uint32_t leaf_elements;                          /* a multiple of 2048, at most 8192 */
    uint32_t fan_in;                                 /* children per parent: min(64, 8192 / k) */
    uint32_t levels;                                 /* 1: the leaf is the root (no scratch) */
    uint32_t nodes_per_row;                          /* every level */
    uint32_t nodes[BITONIC_TREE_MAX_LEVELS];         /* nodes per row at each level */
    uint32_t first_node[BITONIC_TREE_MAX_LEVELS];    /* row-local number of a level's first node */
};

/* How the cluster path cuts a shape: one cluster of `parts` CTAs per row. */
struct bitonic_cluster_plan {
    uint32_t parts;    /* CTAs per cluster, 1 to 16 */
    uint32_t items;    /* keys per thread: 16, 32, 64 or 128 (half of 128 in shared memory) */
    uint32_t capacity; /* entries of each of the leader's two composite buffers */
    uint32_t staged;   /* 1: slices are bulk-copied into shared memory before use */
    size_t smem;       /* dynamic shared memory per CTA, bytes */
};

/* The one-CTA path: the composite buffer and the stage of threshold-bin candidates. */
struct bitonic_one_cta_plan {
    uint32_t composite_capacity; /* entries: next_pow2(k), at least 64 */
    uint32_t stage_capacity;     /* candidates the stage holds */
    size_t smem;                 /* dynamic shared memory per CTA, bytes */
};

/* A plan holds every path that applies, in the order the launch tries them: the cluster path
 * falls back to the tree where no cluster of that size fits (which only the launch finds out),
 * the tree to one CTA per row. `path` is the first that applies. */
struct bitonic_plan {
    enum bitonic_choice choice;
    enum bitonic_path path;
    bool has_cluster;
    struct bitonic_cluster_plan cluster;
    bool has_tree;
    struct bitonic_tree_plan tree;
    size_t scratch_bytes; /* the tree's scratch (0 without parents); what scratch_bytes() says */
    struct bitonic_one_cta_plan one_cta;
};

/* Plans one call. Returns 1 with *plan filled and what it runs described in reason (what
 * supports() says), or 0 with the reason the shape is refused (k above 8192, a negative length,
 * too many rows, a page size that is not a power of two, too little shared memory, no kernels
 * for the device). Pure: no CUDA call. */
int bitonic_plan_make(const struct gpu_device_info *device, const struct topk_shape *shape,
                      enum bitonic_choice choice, struct bitonic_plan *plan, char *reason,
                      size_t reason_bytes);

/* Enqueues `plan`, made by bitonic_plan_make() for problem->shape on device, on stream: no
 * allocation, no host synchronisation (capturable). 0 or a negative code with err filled;
 * AUDIT_EUSAGE where the problem's scratch is smaller than plan->scratch_bytes. */
int bitonic_plan_launch(const struct topk_problem *problem, const struct gpu_device_info *device,
                        const struct bitonic_plan *plan, cudaStream_t stream,
                        struct audit_error *err);

/* The backend-table entry planning with `choice` (the table's own for BITONIC_CHOICE_AUTO,
 * named "bitonic"; the others "bitonic@NAME"), or NULL for a choice out of range. */
const struct topk_backend *bitonic_backend_with(enum bitonic_choice choice);

#ifdef __cplusplus
}
#endif

#endif
