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
    gt_pager *pg;    // paging on (cfg->paging_store): buffers live in its arena, capped
} cpu_dev;

// ---- paging (docs/paging.md): every access to buffer memory goes through the pager ----------

// After a page failed its check nothing the device holds is trusted: every buffer is wiped
// and released now, and every later call fails.
static void teardown(cpu_dev *d);

static gt_err paged(cpu_dev *d, gt_err result)
{
    if (d->pg != NULL && gt_pager_failed(d->pg)) {
        teardown(d);
        if (result.code != GT_E_AUTH) {
            return gt_errf(GT_E_AUTH, "device: torn down after a paging integrity failure");
        }
    }
    return result;
}

static uint64_t arena_off(const cpu_dev *d, const gt_buftab_entry *e)
{
    return (uint64_t)(e->at.host - gt_pager_base(d->pg));
}

typedef struct {
    uint8_t *dst;        // copy_out
    const uint8_t *src;  // copy_in
    int value;           // memset
} piece_job;

static gt_err piece_in(void *ctx, uint8_t *p, uint64_t done, uint64_t n)
{
    memcpy(p, ((piece_job *)ctx)->src + done, n);
    return GT_OK;
}

static gt_err piece_out(void *ctx, uint8_t *p, uint64_t done, uint64_t n)
{
    memcpy(((piece_job *)ctx)->dst + done, p, n);
    return GT_OK;
}

static gt_err piece_set(void *ctx, uint8_t *p, uint64_t done, uint64_t n)
{
    (void)done;
    memset(p, ((piece_job *)ctx)->value, n);
    return GT_OK;
}

static gt_err paged_each(cpu_dev *d, const gt_buftab_entry *e, uint64_t off, uint64_t len,
                         gt_pager_piece_fn fn, piece_job job)
{
    bool write = fn != piece_out;
    return paged(d, gt_pager_each(d->pg, arena_off(d, e) + off, len, write, fn, &job));
}

// The prefetcher may find a tampered page between calls: the next call tears down as well.
static gt_err torn(cpu_dev *d)
{
    if (d->pg != NULL && gt_pager_failed(d->pg)) {
        teardown(d);
        return gt_errf(GT_E_AUTH, "device: torn down after a paging integrity failure");
    }
    return GT_OK;
}

static gt_err cpu_alloc(void *impl, uint64_t bytes, uint32_t flags, gt_dbuf *out)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    gt_dbuf h = 0;
    GT_TRY(torn(d));
    GT_TRY(gt_buftab_alloc(d->tab, bytes, flags, 0, &h, &e));
    if (d->pg != NULL) {  // zero pages: no frame until first use
        uint64_t off = 0;
        gt_err err = gt_pager_place(d->pg, h, 0, bytes, &off);
        if (!gt_is_ok(err)) {
            gt_buftab_release(d->tab, h);
            return err;
        }
        e->at.host = gt_pager_base(d->pg) + off;
        *out = h;
        return GT_OK;
    }
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
    if (d->pg != NULL) {
        gt_pager_release(d->pg, arena_off(d, e));  // wipes what is resident
    } else {
        gt_secure_zero(e->at.host, (size_t)e->span);
        free(e->at.host);
    }
    gt_buftab_release(d->tab, h);
}

static void teardown(cpu_dev *d)
{
    size_t cursor = 0;
    gt_dbuf h = 0;
    for (gt_buftab_entry *e; (e = gt_buftab_next(d->tab, &cursor, &h)) != NULL;) {
        wipe_and_release(d, h, e);
    }
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
    GT_TRY(torn(d));
    GT_TRY(gt_buftab_access(d->tab, dst, 0, off, len, "copy_in", &e));
    if (d->pg != NULL) {
        return paged_each(d, e, off, len, piece_in, (piece_job){.src = src});
    }
    if (len > 0) {
        memcpy(e->at.host + off, src, len);
    }
    return GT_OK;
}

static gt_err cpu_copy_out(void *impl, void *dst, gt_dbuf src, uint64_t off, uint64_t len)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    GT_TRY(torn(d));
    GT_TRY(gt_buftab_read_out(d->tab, src, 0, off, len, &e));
    if (d->pg != NULL) {
        return paged_each(d, e, off, len, piece_out, (piece_job){.dst = dst});
    }
    if (len > 0) {
        memcpy(dst, e->at.host + off, len);
    }
    return GT_OK;
}

static gt_err cpu_memset(void *impl, gt_dbuf h, uint64_t off, int value, uint64_t len)
{
    cpu_dev *d = impl;
    gt_buftab_entry *e = NULL;
    GT_TRY(torn(d));
    GT_TRY(gt_buftab_access(d->tab, h, 0, off, len, "memset", &e));
    if (d->pg != NULL && value == 0) {
        return paged(d, gt_pager_zero(d->pg, arena_off(d, e) + off, len));
    }
    if (d->pg != NULL) {
        return paged_each(d, e, off, len, piece_set, (piece_job){.value = value});
    }
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

static gt_err where(void *ctx, gt_dbuf h, uint64_t *off)
{
    cpu_dev *d = ctx;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_find(d->tab, h, 0, &e));
    *off = arena_off(d, e);
    return GT_OK;
}

static gt_err run_kernel(void *ctx, const gt_op *op, const gt_op_part *part)
{
    return gt_ops_cpu_run_part(op, part, resolve, ctx);
}

static gt_err cpu_launch(void *impl, const gt_op *op)
{
    cpu_dev *d = impl;
    gt_op run = *op;  // a release op's precision is the declaration's, not the caller's
    GT_TRY(torn(d));
    GT_TRY(gt_buftab_launch_labels(d->tab, 0, &run, &d->rel));
    if (d->pg != NULL) {  // residency by op: what its refs cover, nothing else is needed
        gt_err r = paged(d, gt_pager_launch(d->pg, &run, where, run_kernel, d));
        return gt_buftab_launch_done(&d->rel, r);
    }
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
    gt_pager_free(d->pg);
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
    // With paging the limit is on resident memory (the pager's cap), not on what is allocated.
    bool paging = cfg->paging_store != NULL;
    gt_buftab_config tc = {.mem_limit = paging ? 0 : cfg->mem_limit,
                           .limit_hint = "the device's mem_limit, or page beyond it: --paging-store"};
    gt_err e = gt_buftab_new(&d->tab, &tc);
    if (gt_is_ok(e) && paging) {
        gt_pager_config pc = {.cap = cfg->mem_limit, .page_bytes = cfg->page_bytes,
                              .store_dir = cfg->paging_store, .tab = d->tab,
                              .prefetch = cfg->paging_prefetch};
        e = cfg->mem_limit ? gt_pager_new(&d->pg, &pc)
                           : gt_errf(GT_E_ARG, "device: paging needs a memory limit");
    }
    if (!gt_is_ok(e)) {
        gt_buftab_free(d->tab);
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
    GT_TRY(torn(d));
    GT_TRY(gt_buftab_access(d->tab, src, 0, off, len, "in-process read", &e));
    if (d->pg != NULL) {
        return paged_each(d, e, off, len, piece_out, (piece_job){.dst = dst});
    }
    if (len > 0) {
        memcpy(dst, e->at.host + off, len);
    }
    return GT_OK;
}

// Peers (device.c) seal from and open into a buffer's memory in place: with paging that range is
// made resident first, and stays so until the next hold or launch.
gt_err gt_device_cpu_hold(void *impl, const gt_buftab_entry *e, uint64_t off, uint64_t len,
                          bool write)
{
    cpu_dev *d = impl;
    GT_TRY(torn(d));
    if (d->pg == NULL || len == 0) {
        return GT_OK;
    }
    return paged(d, gt_pager_hold(d->pg, arena_off(d, e) + off, len, write));
}

gt_err gt_device_cpu_paging_stats(void *impl, gt_pager_stats *st)
{
    cpu_dev *d = impl;
    *st = (gt_pager_stats){0};
    if (d->pg != NULL) {
        gt_pager_stats_get(d->pg, st);
    }
    return GT_OK;
}

gt_pager *gt_device_cpu_pager(void *impl) { return ((cpu_dev *)impl)->pg; }
