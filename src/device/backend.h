// Internal to device/: the interface every backend implements, and the shared CPU op executor.
#ifndef GT_DEVICE_BACKEND_H
#define GT_DEVICE_BACKEND_H

#include <gputravel/device.h>

// One backend's operations on its own state (`impl`). Handles and ranges are checked by the
// backend itself (it owns the buffer table); device.c only dispatches.
typedef struct {
    const char *name;
    gt_err (*alloc)(void *impl, uint64_t bytes, uint32_t flags, gt_dbuf *out);
    gt_err (*free)(void *impl, gt_dbuf buf);
    gt_err (*buf_size)(void *impl, gt_dbuf buf, uint64_t *bytes);
    gt_err (*copy_in)(void *impl, gt_dbuf dst, uint64_t dst_offset, const void *src, uint64_t len);
    gt_err (*copy_out)(void *impl, void *dst, gt_dbuf src, uint64_t src_offset, uint64_t len);
    gt_err (*memset)(void *impl, gt_dbuf buf, uint64_t offset, int value, uint64_t len);
    gt_err (*launch)(void *impl, const gt_op *op);
    gt_err (*sync)(void *impl);
    void (*close)(void *impl);  // frees and wipes everything
} gt_device_backend;

// Each backend's constructor. Only those built are referenced by device.c.
gt_err gt_device_cpu_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops);
gt_err gt_device_sim_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops);
gt_err gt_device_cuda_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops);

// The CPU kernels behind an op descriptor, shared by the cpu backend and devd (which runs them on
// its own protected memory). `resolve` turns a dref into a host pointer after checking that
// `bytes` bytes are available from that offset in a buffer the caller may use; gt_ops_cpu_run
// computes every ref's byte count from the op's shapes before running anything.
typedef gt_err (*gt_dref_resolve_fn)(void *ctx, gt_dref ref, uint64_t bytes, void **ptr);
gt_err gt_ops_cpu_run(const gt_op *op, gt_dref_resolve_fn resolve, void *ctx);
// Process-wide: OpenMP threads for the cpu kernels (0 keeps OpenMP's default) and OpenBLAS held
// at one thread (the kernels split matmuls across OpenMP threads themselves). Call before any
// launch, from the thread that launches.
void gt_ops_cpu_set_threads(int threads);

#endif
