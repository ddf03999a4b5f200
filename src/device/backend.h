// Internal to device/: the interface every backend implements, and the shared CPU op executor.
#ifndef GT_DEVICE_BACKEND_H
#define GT_DEVICE_BACKEND_H

#include <gputravel/device.h>
#ifdef GT_HAVE_CUDA
#include <gputravel/device_cuda.h>  // built only with CUDA
#endif

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
    // In-process backends (cpu, cuda): their buffer table and declared outputs, on which device.c
    // runs the label and declaration calls itself; NULL for sim (devd holds both).
    void (*local)(void *impl, gt_buftab **tab, gt_release_state **rel);
} gt_device_backend;

// Each backend's constructor. Only those built are referenced by device.c.
gt_err gt_device_cpu_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops);
gt_err gt_device_sim_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops);
gt_err gt_device_cuda_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops);

// The backend state of dev when it is of `kind`, else NULL: for backend-specific extensions
// (cuda_backend.h) that work on a gt_device.
void *gt_device_backend_impl(gt_device *dev, gt_device_kind kind);

// In-process backends only: reads a buffer whatever its flags and label, for sealing inside the
// trainer's own process (gt_device_inproc_read; export.c). cuda's exists when it is built.
gt_err gt_device_cpu_inproc_read(void *impl, void *dst, gt_dbuf src, uint64_t off, uint64_t len);
// cpu: makes [off, +len) of buffer e resident (paging) for an in-place access by device.c.
gt_err gt_device_cpu_hold(void *impl, const gt_buftab_entry *e, uint64_t off, uint64_t len,
                          bool write);
gt_err gt_device_cuda_inproc_read(void *impl, void *dst, gt_dbuf src, uint64_t off, uint64_t len);

// The cpu backend's pager (NULL: not paging) and its counters (zero when not paging).
gt_err gt_device_cpu_paging_stats(void *impl, gt_pager_stats *st);
gt_pager *gt_device_cpu_pager(void *impl);

#ifdef GT_HAVE_CUDA
// cuda's extensions (device_cuda.h) on its own state; export.c finds the state of a gt_device
// and calls these, so the backend never reaches back up into device.c.
gt_err gt_cuda_backend_ipc_check(void *impl);
gt_err gt_cuda_backend_alloc_exportable(void *impl, uint64_t bytes, uint32_t flags, gt_dbuf *out);
gt_err gt_cuda_backend_ipc_export(void *impl, gt_dbuf buf, gt_cuda_ipc_desc *out);
gt_err gt_cuda_backend_ipc_import(void *impl, const gt_cuda_ipc_desc *desc, uint32_t flags,
                                  gt_dbuf *out);
gt_err gt_cuda_backend_aes_gcm_open(void *impl, gt_dbuf pt, gt_dbuf ct, uint64_t off, uint64_t len,
                                    const uint8_t *aad, size_t aad_len, const uint8_t iv[12],
                                    const uint8_t tag[16], const uint8_t key[32]);
// gt_device_peer_seal / _open on cuda: pc's checks, wire format and keys (peer.c) over h's
// floats of buf in GPU memory, encrypted and authenticated by the GCM kernels on the device.
gt_err gt_cuda_backend_peer_seal(void *impl, gt_peer_core *pc, const gt_peer_hdr *h, gt_dbuf buf,
                                 uint8_t *out, size_t cap, size_t *outlen);
gt_err gt_cuda_backend_peer_open(void *impl, gt_peer_core *pc, const gt_peer_hdr *h,
                                 gt_span chunk, gt_dbuf buf, int mode);
#endif

// The cpu executor (gt_ops_cpu_run, gt_ops_cpu_set_threads) is in gputravel/kernels.h.

#endif
