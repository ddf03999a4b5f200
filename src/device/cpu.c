// The cpu backend: device memory is ordinary process memory, handles index a buffer table, and
// kernels run in-process through gt_ops_cpu_run. No protection (DESIGN §3: tests, baselines),
// but the same policy as every backend: NO_READBACK buffers refuse copy_out, free wipes.
#include <gputravel/device.h>

#include <stdlib.h>
#include <string.h>

#include "backend.h"

// Handle = generation << 32 | (slot + 1): a freed slot's old handle never resolves again.
typedef struct {
    uint8_t *data;
    uint64_t bytes;
    uint32_t flags;
    uint32_t gen;
    bool live;
} cpu_buf;

typedef struct {
    cpu_buf *bufs;
    size_t nbufs;
    size_t cap;
    uint64_t used;
    uint64_t limit;  // 0: none
} cpu_dev;

static gt_err lookup(cpu_dev *d, gt_dbuf h, cpu_buf **out)
{
    uint64_t slot = (h & 0xffffffffu);
    uint32_t gen = (uint32_t)(h >> 32);
    GT_ENSURE(slot >= 1 && slot <= d->nbufs && d->bufs[slot - 1].live &&
                  d->bufs[slot - 1].gen == gen,
              GT_E_ARG, "device: no buffer with handle %#llx", (unsigned long long)h);
    *out = &d->bufs[slot - 1];
    return GT_OK;
}

static gt_err range(const cpu_buf *b, uint64_t offset, uint64_t len, const char *what)
{
    GT_ENSURE(offset <= b->bytes && len <= b->bytes - offset, GT_E_ARG,
              "device: %s of %llu bytes at %llu exceeds a %llu-byte buffer", what,
              (unsigned long long)len, (unsigned long long)offset, (unsigned long long)b->bytes);
    return GT_OK;
}

static gt_err cpu_alloc(void *impl, uint64_t bytes, uint32_t flags, gt_dbuf *out)
{
    cpu_dev *d = impl;
    GT_ENSURE(bytes > 0 && bytes <= ((uint64_t)1 << 46), GT_E_ARG, "device: cannot allocate %llu bytes",
              (unsigned long long)bytes);
    GT_ENSURE(d->limit == 0 || bytes <= d->limit - d->used, GT_E_NOMEM,
              "device: %llu bytes requested, %llu of %llu in use", (unsigned long long)bytes,
              (unsigned long long)d->used, (unsigned long long)d->limit);
    size_t slot = 0;
    while (slot < d->nbufs && d->bufs[slot].live) {
        slot++;
    }
    if (slot == d->nbufs) {
        GT_ENSURE(d->nbufs < 0xfffffff0u, GT_E_LIMIT, "device: too many buffers");
        if (d->nbufs == d->cap) {
            size_t cap = d->cap ? 2 * d->cap : 64;
            cpu_buf *nb = realloc(d->bufs, cap * sizeof *nb);
            GT_ENSURE(nb != NULL, GT_E_NOMEM, "device: out of memory for the buffer table");
            memset(nb + d->cap, 0, (cap - d->cap) * sizeof *nb);
            d->bufs = nb;
            d->cap = cap;
        }
        d->nbufs++;
    }
    // 64-byte aligned, rounded up so vector loops may read whole lines; zeroed like fresh HBM.
    size_t rounded = (size_t)((bytes + 63) & ~(uint64_t)63);
    uint8_t *p = aligned_alloc(64, rounded);
    GT_ENSURE(p != NULL, GT_E_NOMEM, "device: cannot allocate %llu bytes",
              (unsigned long long)bytes);
    memset(p, 0, rounded);
    cpu_buf *b = &d->bufs[slot];
    b->data = p;
    b->bytes = bytes;
    b->flags = flags;
    b->gen++;
    b->live = true;
    d->used += bytes;
    *out = ((uint64_t)b->gen << 32) | (uint64_t)(slot + 1);
    return GT_OK;
}

static void wipe_and_release(cpu_dev *d, cpu_buf *b)
{
    gt_secure_zero(b->data, b->bytes);
    free(b->data);
    d->used -= b->bytes;
    b->data = NULL;
    b->bytes = 0;
    b->flags = 0;
    b->live = false;
}

static gt_err cpu_free(void *impl, gt_dbuf h)
{
    cpu_dev *d = impl;
    cpu_buf *b = NULL;
    GT_TRY(lookup(d, h, &b));
    wipe_and_release(d, b);
    return GT_OK;
}

static gt_err cpu_buf_size(void *impl, gt_dbuf h, uint64_t *bytes)
{
    cpu_buf *b = NULL;
    GT_TRY(lookup(impl, h, &b));
    *bytes = b->bytes;
    return GT_OK;
}

static gt_err cpu_copy_in(void *impl, gt_dbuf dst, uint64_t off, const void *src, uint64_t len)
{
    cpu_buf *b = NULL;
    GT_TRY(lookup(impl, dst, &b));
    GT_TRY(range(b, off, len, "copy_in"));
    if (len > 0) {
        memcpy(b->data + off, src, len);
    }
    return GT_OK;
}

static gt_err cpu_copy_out(void *impl, void *dst, gt_dbuf src, uint64_t off, uint64_t len)
{
    cpu_buf *b = NULL;
    GT_TRY(lookup(impl, src, &b));
    GT_ENSURE(!(b->flags & GT_DBUF_NO_READBACK), GT_E_POLICY,
              "device: buffer %#llx is marked no-readback", (unsigned long long)src);
    GT_TRY(range(b, off, len, "copy_out"));
    if (len > 0) {
        memcpy(dst, b->data + off, len);
    }
    return GT_OK;
}

static gt_err cpu_memset(void *impl, gt_dbuf h, uint64_t off, int value, uint64_t len)
{
    cpu_buf *b = NULL;
    GT_TRY(lookup(impl, h, &b));
    GT_TRY(range(b, off, len, "memset"));
    // Large fills (zeroing gradients) in 1 MiB pieces across threads: one core alone does not
    // reach the memory bandwidth.
    const uint64_t piece = 1u << 20;
    uint64_t npieces = (len + piece - 1) / piece;
#pragma omp parallel for schedule(static) if (npieces >= 8)
    for (uint64_t i = 0; i < npieces; i++) {
        uint64_t at = i * piece, n = len - at < piece ? len - at : piece;
        memset(b->data + off + at, value, n);
    }
    return GT_OK;
}

static gt_err resolve(void *ctx, gt_dref ref, uint64_t bytes, void **ptr)
{
    cpu_buf *b = NULL;
    GT_TRY(lookup(ctx, ref.buf, &b));
    GT_TRY(range(b, ref.offset, bytes, "operand"));
    *ptr = b->data + ref.offset;
    return GT_OK;
}

static gt_err cpu_launch(void *impl, const gt_op *op) { return gt_ops_cpu_run(op, resolve, impl); }

static gt_err cpu_sync(void *impl)
{
    (void)impl;
    return GT_OK;
}

static void cpu_close(void *impl)
{
    cpu_dev *d = impl;
    for (size_t i = 0; i < d->nbufs; i++) {
        if (d->bufs[i].live) {
            wipe_and_release(d, &d->bufs[i]);
        }
    }
    free(d->bufs);
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
};

gt_err gt_device_cpu_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops)
{
    GT_ENSURE(cfg->threads >= 0 && cfg->threads <= 1024, GT_E_ARG, "device: %d threads",
              cfg->threads);
    cpu_dev *d = calloc(1, sizeof *d);
    GT_ENSURE(d != NULL, GT_E_NOMEM, "device: out of memory");
    d->limit = cfg->mem_limit;
    gt_ops_cpu_set_threads(cfg->threads);
    *impl = d;
    *ops = &cpu_backend;
    return GT_OK;
}
