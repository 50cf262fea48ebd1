/* bitonic's tuning constants, chosen by measurement on the H200 (docs/PERF.md has the method).
 * Each is a -D away from another value (meson setup -Dcuda_args=-DNAME=VALUE, see
 * scripts/device-bundle.sh's DEVICE_VARIANTS), so that a new device can be measured without an
 * edit. Host and device read the same values. */
#ifndef DSATOPK_BITONIC_TUNING_CUH
#define DSATOPK_BITONIC_TUNING_CUH

/* Entries per thread that the output stage's loops take at a time (tree_bucket_place,
 * tree_output_by_buckets, the cluster leader's count): their loads and atomics in flight
 * together. */
#ifndef OUTPUT_BATCH
#define OUTPUT_BATCH 2u
#endif

/* The cluster leader's two buffers hold up to CLUSTER_GATHER_FACTOR times the output's entries
 * (instead of twice) where shared memory allows and the row is longer than
 * CLUSTER_GATHER_RATIO * k: there the k-th's level-0 bin and the keys above it can outnumber
 * twice the output (random rows of 65536 at k 512: about 1500), and gathering them whole is
 * faster than level 1's pass and cluster barrier. On shorter rows wider buffers buy nothing and
 * cost shared memory. A factor of 2 keeps twice the output everywhere. */
#ifndef CLUSTER_GATHER_FACTOR
#define CLUSTER_GATHER_FACTOR 4u
#endif
#ifndef CLUSTER_GATHER_RATIO
#define CLUSTER_GATHER_RATIO 64u
#endif

/* Clusters of up to this many slices of 8192 (16 keys per thread); longer rows take larger
 * slices. Clusters of 16 CTAs win where the grid runs in one wave (1-4 rows of 131072). */
#ifndef CLUSTER_ITEMS16_PARTS
#define CLUSTER_ITEMS16_PARTS 16u
#endif

/* Clusters of at most this many CTAs pick a level's bin from every CTA's whole histogram (one
 * round trip of 8 or 16 KiB), larger ones by super-bins (two round trips of one warp:
 * cluster_level_pick). */
#ifndef CLUSTER_DIRECT_PARTS
#define CLUSTER_DIRECT_PARTS 2u
#endif

/* Clusters of at least this many CTAs gather the selection into the leader by asynchronous
 * stores counted on an mbarrier (no cluster barrier, whose membar waits for every remote
 * store's acknowledgement), smaller ones by plain remote stores and a cluster barrier: where a
 * CTA sends thousands of entries, one 8-byte asynchronous store each costs more than the
 * barrier. */
#ifndef CLUSTER_ASYNC_GATHER_PARTS
#define CLUSTER_ASYNC_GATHER_PARTS 5u
#endif

/* Slices loaded by bulk copy gather their selection from the copy in shared memory, a rolled
 * loop over the flags' set bits (cluster_for_each_selected, bitonic/cluster.cuh): the unrolled loop
 * over registers is code fetched cold once per CTA. 0 measures the unrolled loop there. */
#ifndef CLUSTER_STAGED_GATHER
#define CLUSTER_STAGED_GATHER 1
#endif

/* Cluster kernels of at most this many keys per thread check, on a one-CTA row whose k-th
 * largest is in the bin of +0.0, whether that bin is +0.0 alone (a ReLU plateau: then no level
 * 1). The check's code (5-12 KB a kernel) costs every shape that never takes it: without it the
 * 64- and 128-key kernels (slices of 32768 and 65536) are 0.4-1.1% faster on every row they
 * run, and 1.07x slower where it would be taken (one-CTA ReLU rows with fewer than k positives:
 * relu 1024-4096 x 32768 k 4096 measured, docs/PERF.md). 128 puts it in every kernel. */
#ifndef CLUSTER_PLATEAU_ITEMS
#define CLUSTER_PLATEAU_ITEMS 32u
#endif

/* Cluster kernels of at most this many keys per thread keep, as the leader counts its
 * selection's buckets, each entry's bucket and slot (output.cuh's tags), so that the placement
 * neither computes the bucket again nor takes a slot by an atomic. With 16 (rows of 8192) it
 * took 0.94-0.98x of the time at k 512 and 0.99x at k 2048 on many rows; in the 32- and 64-key
 * kernels 1.01-1.03x (rows of 32768-131072 at k 2048, 1024 x 32768 at k 512; their code 3.5 KB
 * larger, the cause not isolated further). 0 keeps no tags. */
#ifndef CLUSTER_TAG_ITEMS
#define CLUSTER_TAG_ITEMS 16u
#endif

/* Rows of one CTA (plans of one part) run a kernel of their own (k_cluster_topk ONE: the
 * cluster's size a constant, shared-memory instead of distributed accesses, no cluster launch)
 * for the keys per thread in this mask of (keys per thread) / 16: 1 for 16, 2 for 32, 4 for 64,
 * 8 for 128. With 16 and 64 (rows of 8192, and of 32768 on many rows) it took 0.95-0.99x and
 * 0.93-0.95x of the general kernel's time; with 32 and 128 1.07-1.09x (rows of 16384 and 65536
 * on many rows, docs/PERF.md). 0 runs every row in the general kernel. */
#ifndef CLUSTER_ONE_KERNELS
#define CLUSTER_ONE_KERNELS 5u
#endif

/* The bulk load of a slice (cluster_bulk_load): chunks of 8 keys per thread (16 KiB), each
 * counted on its own mbarrier, so that the first is counted while the others arrive. */
#ifndef CLUSTER_BULK_CHUNK_ITEMS
#define CLUSTER_BULK_CHUNK_ITEMS 8u
#endif

#endif
