// The cpu backend: device memory is ordinary process memory, buffers live in the shared buffer
// table (buftab.c), and kernels run in-process through gt_ops_cpu_run. No protection (DESIGN §3:
// tests, baselines), but the same policy and error codes as every backend (device.h): NO_READBACK
// buffers refuse copy_out, free and close wipe.
#include <gputravel/device.h>

#include <stdlib.h>
#include <string.h>

#include "backend.h"

typedef struct {
    gt_buftab *tab;  // entries' `at.host`: 64-byte aligned, span bytes, zeroed at alloc
    gt_release_state rel;
} cpu_dev;

static gt_err cpu_alloc(void *impl, uint64_t bytes, uint32_t flags, gt_dbuf *out)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    gt_dbuf h = 0;
    GT_TRY(gt_buftab_alloc(d->tab, bytes, flags, 0, &h, &e));
    // Whole 64-byte lines, so vector loops may read them; zeroed like fresh HBM. Here device
    // memory is host memory: running out of it is device memory exhausted.
    uint8_t *p = aligned_alloc(GT_BUFTAB_ALIGN, (size_t)e->span);
    if (p == NULL) {
        gt_buftab_release(d->tab, h);
        return gt_errf(GT_E_LIMIT, "device memory exhausted: cannot allocate %llu bytes",
                       (unsigned long long)bytes);
    }
    memset(p, 0, (size_t)e->span);
    e->at.host = p;
    *out = h;
    return GT_OK;
}

static void wipe_and_release(cpu_dev *d, gt_dbuf h, gt_buftab_entry *e)
{
    gt_secure_zero(e->at.host, (size_t)e->span);
    free(e->at.host);
    gt_buftab_release(d->tab, h);
}

static gt_err cpu_free(void *impl, gt_dbuf h)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_find(d->tab, h, 0, &e));
    wipe_and_release(d, h, e);
    return GT_OK;
}

static gt_err cpu_buf_size(void *impl, gt_dbuf h, uint64_t *bytes)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_find(d->tab, h, 0, &e));
    *bytes = e->bytes;
    return GT_OK;
}

static gt_err cpu_copy_in(void *impl, gt_dbuf dst, uint64_t off, const void *src, uint64_t len)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_access(d->tab, dst, 0, off, len, "copy_in", &e));
    if (len > 0) {
        memcpy(e->at.host + off, src, len);
    }
    return GT_OK;
}

static gt_err cpu_copy_out(void *impl, void *dst, gt_dbuf src, uint64_t off, uint64_t len)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_read_out(d->tab, src, 0, off, len, &e));
    if (len > 0) {
        memcpy(dst, e->at.host + off, len);
    }
    return GT_OK;
}

static gt_err cpu_memset(void *impl, gt_dbuf h, uint64_t off, int value, uint64_t len)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_access(d->tab, h, 0, off, len, "memset", &e));
    // Large fills (zeroing gradients) in 1 MiB pieces across threads: one core alone does not
    // reach the memory bandwidth.
    const uint64_t piece = 1u << 20;
    uint64_t npieces = (len + piece - 1) / piece;
#pragma omp parallel for schedule(static) if (npieces >= 8)
    for (uint64_t i = 0; i < npieces; i++) {
        uint64_t at = i * piece, n = len - at < piece ? len - at : piece;
        memset(e->at.host + off + at, value, n);
    }
    return GT_OK;
}

static gt_err resolve(void *ctx, gt_dref ref, uint64_t bytes, void **ptr)
{
    cpu_dev *d = ctx;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_access(d->tab, ref.buf, 0, ref.offset, bytes, "op operand", &e));
    *ptr = e->at.host + ref.offset;
    return GT_OK;
}

static gt_err cpu_launch(void *impl, const gt_op *op)
{
    cpu_dev *d = impl;
    gt_op run = *op;  // a release op's precision is the declaration's, not the caller's
    GT_TRY(gt_buftab_launch_labels(d->tab, 0, &run, &d->rel));
    return gt_buftab_launch_done(&d->rel, gt_ops_cpu_run(&run, resolve, impl));
}

static void cpu_local(void *impl, gt_buftab **tab, gt_release_state **rel)
{
    cpu_dev *d = impl;
    *tab = d->tab;
    *rel = &d->rel;
}

static gt_err cpu_sync(void *impl)
{
    (void)impl;
    return GT_OK;
}

static void cpu_close(void *impl)
{
    cpu_dev *d = impl;
    size_t cursor = 0;
    gt_dbuf h = 0;
    for (gt_buftab_entry *e; (e = gt_buftab_next(d->tab, &cursor, &h)) != NULL;) {
        wipe_and_release(d, h, e);
    }
    gt_buftab_free(d->tab);
    gt_release_state_free(&d->rel);
    free(d);
}

static const gt_device_backend cpu_backend = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .buf_size = cpu_buf_size,
    .copy_in = cpu_copy_in,
    .copy_out = cpu_copy_out,
    .memset = cpu_memset,
    .launch = cpu_launch,
    .sync = cpu_sync,
    .close = cpu_close,
    .local = cpu_local,
};

gt_err gt_device_cpu_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops)
{
    GT_ENSURE(cfg->threads >= 0 && cfg->threads <= 1024, GT_E_ARG, "device: %d threads",
              cfg->threads);
    cpu_dev *d = calloc(1, sizeof *d);
    GT_ENSURE(d != NULL, GT_E_NOMEM, "device: out of memory");
    gt_buftab_config tc = {.mem_limit = cfg->mem_limit, .limit_hint = "the device's mem_limit"};
    gt_err e = gt_buftab_new(&d->tab, &tc);
    if (!gt_is_ok(e)) {
        free(d);
        return e;
    }
    gt_ops_cpu_set_threads(cfg->threads);
    *impl = d;
    *ops = &cpu_backend;
    return GT_OK;
}

// The trainer's own process is this device: its memory is readable to it anyway (no protection
// here, DESIGN §3). This door exists so that travel can seal labelled weights in-process
// (travel/export.c) without a copy_out that labels refuse; nothing else calls it.
gt_err gt_device_cpu_inproc_read(void *impl, void *dst, gt_dbuf src, uint64_t off, uint64_t len)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_access(d->tab, src, 0, off, len, "in-process read", &e));
    if (len > 0) {
        memcpy(dst, e->at.host + off, len);
    }
    return GT_OK;
}
