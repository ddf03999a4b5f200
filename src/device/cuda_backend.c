// The cuda backend: device memory is GPU memory (one cudaMalloc per buffer, zeroed like fresh
// HBM), buffers live in the shared buffer table (buftab.c) as the cpu backend's and devd's do,
// with the same error codes (device.h), and gt_device_launch checks
// every ref against the op's shapes (gt_op_ref_sizes) and every token against V on the device
// before a kernel runs (gt_ops_cuda_run, src/kernels/cuda/). Work is queued on one stream;
// copy_in/copy_out/free and the token checks wait for it, launches and memsets do not
// (gt_device_sync does).
//
// Policy as every backend: NO_READBACK and labelled buffers refuse copy_out, launches label
// their outputs (the shared buffer table); free and close wipe.
#include <gputravel/device.h>
#include <gputravel/kernels_cuda.h>

#include <cudaTypedefs.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nvml_cc.h"
#include <gputravel/device_cuda.h>

// Entries' `at.device`: cudaMalloc'd (bytes long), or mapped by CUDA IPC when `foreign` (closed,
// not freed, and not counted against the limit: the exporter's memory).
typedef struct {
    gt_cuda_ctx cx;
    gt_buftab *tab;
    gt_release_state rel;
    bool cc_read;     // cc holds NVML's CC state (read at the first IPC call; fixed until reboot)
    gt_cc_state cc;
} cuda_dev;

static gt_err cuda_fail(cudaError_t e, const char *what)
{
    return gt_errf(GT_E_IO, "cuda: %s: %s", what, cudaGetErrorString(e));
}

#define CUDA_TRY(call, what)                      \
    do {                                          \
        cudaError_t ce_ = (call);                 \
        if (ce_ != cudaSuccess) {                 \
            return cuda_fail(ce_, (what));        \
        }                                         \
    } while (0)

// A kernel launcher's answer (NULL or a static message) as a gt_err.
static gt_err ran(const char *msg, const char *op)
{
    if (msg == NULL) {
        return GT_OK;
    }
    return gt_errf(GT_E_IO, "cuda: %s: %s", op, msg);
}

bool gt_cuda_probe(char *why, size_t cap)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, cap, "no usable CUDA driver or GPU (%s)", cudaGetErrorString(e));
        return false;
    }
    if (n < 1) {
        snprintf(why, cap, "no CUDA GPU");
        return false;
    }
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
        snprintf(why, cap, "cannot read the GPU's compute capability");
        return false;
    }
    if (major < 9) {
        snprintf(why, cap, "GPU 0 is sm_%d%d, older than the sm_90 (Hopper) this build targets",
                 major, minor);
        return false;
    }
    snprintf(why, cap, "GPU 0 is sm_%d%d", major, minor);
    return true;
}

// An exportable buffer is cudaMalloc'd as bytes rounded up to GT_CUDA_IPC_GRANULE (its own
// driver allocation: IPC shares whole allocations); all of what is allocated is zeroed.
static gt_err alloc_buf(cuda_dev *d, uint64_t bytes, uint32_t flags, bool exportable,
                        gt_dbuf *out)
{
    uint64_t real = bytes;
    if (exportable) {
        GT_ENSURE(bytes <= GT_BUFTAB_MAX_BYTES, GT_E_LIMIT, "cuda: buffer of %llu bytes",
                  (unsigned long long)bytes);
        real = (bytes + GT_CUDA_IPC_GRANULE - 1) / GT_CUDA_IPC_GRANULE * GT_CUDA_IPC_GRANULE;
    }
    gt_buftab_entry *be = NULL;
    gt_dbuf h = 0;
    GT_TRY(gt_buftab_alloc(d->tab, bytes, flags, 0, &h, &be));
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (size_t)real);
    if (e != cudaSuccess) {
        gt_buftab_release(d->tab, h);
        // An out-of-memory cudaMalloc is not sticky, but it stays the runtime's last error: clear
        // it, or the next gt_device_sync would report it.
        (void)cudaGetLastError();
        return gt_errf(e == cudaErrorMemoryAllocation ? GT_E_LIMIT : GT_E_IO,
                       "cuda: cannot allocate %llu bytes: %s", (unsigned long long)bytes,
                       cudaGetErrorString(e));
    }
    e = cudaMemsetAsync(p, 0, (size_t)real, d->cx.stream);
    if (e != cudaSuccess) {
        cudaFree(p);
        gt_buftab_release(d->tab, h);
        return cuda_fail(e, "memset of a new buffer");
    }
    be->at.device = p;
    be->ext.cuda.ipc_bytes = exportable ? real : 0;
    *out = h;
    return GT_OK;
}

static gt_err cuda_alloc(void *impl, uint64_t bytes, uint32_t flags, gt_dbuf *out)
{
    return alloc_buf(impl, bytes, flags, false, out);
}

// Wipes the buffer (every buffer may hold holder data or activations derived from it), waits,
// and releases it. Errors are reported, but the slot is released either way.
static gt_err wipe_and_release(cuda_dev *d, gt_dbuf h, gt_buftab_entry *b)
{
    // an exportable buffer: its whole allocation (an importer may have written up to its end)
    uint64_t n = b->ext.cuda.ipc_bytes != 0 ? b->ext.cuda.ipc_bytes : b->bytes;
    cudaError_t e = cudaMemsetAsync(b->at.device, 0, (size_t)n, d->cx.stream);
    cudaError_t e2 = cudaStreamSynchronize(d->cx.stream);
    cudaError_t e3 = b->foreign ? cudaIpcCloseMemHandle(b->at.device) : cudaFree(b->at.device);
    gt_buftab_release(d->tab, h);
    if (e != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess) {
        return cuda_fail(e != cudaSuccess ? e : e2 != cudaSuccess ? e2 : e3, "wipe and free");
    }
    return GT_OK;
}

static gt_err cuda_free(void *impl, gt_dbuf h)
{
    cuda_dev *d = impl;
    gt_buftab_entry *b = NULL;
    GT_TRY(gt_buftab_find(d->tab, h, 0, &b));
    return wipe_and_release(d, h, b);
}

static gt_err cuda_buf_size(void *impl, gt_dbuf h, uint64_t *bytes)
{
    cuda_dev *d = impl;
    gt_buftab_entry *b = NULL;
    GT_TRY(gt_buftab_find(d->tab, h, 0, &b));
    *bytes = b->bytes;
    return GT_OK;
}

static gt_err cuda_copy_in(void *impl, gt_dbuf dst, uint64_t off, const void *src, uint64_t len)
{
    cuda_dev *d = impl;
    gt_buftab_entry *b = NULL;
    GT_TRY(gt_buftab_access(d->tab, dst, 0, off, len, "copy_in", &b));
    if (len > 0) {
        CUDA_TRY(cudaMemcpyAsync(b->at.device + off, src, (size_t)len, cudaMemcpyHostToDevice,
                                 d->cx.stream),
                 "copy_in");
        CUDA_TRY(cudaStreamSynchronize(d->cx.stream), "copy_in");  // src is the caller's again
    }
    return GT_OK;
}

static gt_err cuda_copy_out(void *impl, void *dst, gt_dbuf src, uint64_t off, uint64_t len)
{
    cuda_dev *d = impl;
    gt_buftab_entry *b = NULL;
    GT_TRY(gt_buftab_read_out(d->tab, src, 0, off, len, &b));
    if (len > 0) {
        CUDA_TRY(cudaMemcpyAsync(dst, b->at.device + off, (size_t)len, cudaMemcpyDeviceToHost,
                                 d->cx.stream),
                 "copy_out");
        CUDA_TRY(cudaStreamSynchronize(d->cx.stream), "copy_out");
    }
    return GT_OK;
}

static gt_err cuda_memset(void *impl, gt_dbuf h, uint64_t off, int value, uint64_t len)
{
    cuda_dev *d = impl;
    gt_buftab_entry *b = NULL;
    GT_TRY(gt_buftab_access(d->tab, h, 0, off, len, "memset", &b));
    if (len > 0) {
        CUDA_TRY(cudaMemsetAsync(b->at.device + off, value, (size_t)len, d->cx.stream), "memset");
    }
    return GT_OK;
}

static gt_err resolve(cuda_dev *d, gt_dref ref, uint64_t bytes, void **ptr)
{
    gt_buftab_entry *b = NULL;
    GT_TRY(gt_buftab_access(d->tab, ref.buf, 0, ref.offset, bytes, "op operand", &b));
    *ptr = b->at.device + ref.offset;
    return GT_OK;
}

static gt_err resolve_ref(void *ctx, gt_dref ref, uint64_t bytes, void **ptr)
{
    return resolve(ctx, ref, bytes, ptr);
}

// The cuda executor (kernels layer) checks and runs the op on the buffers this table resolves.
static gt_err cuda_launch(void *impl, const gt_op *op)
{
    cuda_dev *d = impl;
    gt_op run = *op;  // a release op's precision is the declaration's, not the caller's
    GT_TRY(gt_buftab_launch_labels(d->tab, 0, &run, &d->rel));
    return gt_buftab_launch_done(&d->rel, gt_ops_cuda_run(&d->cx, &run, resolve_ref, d));
}

static gt_err cuda_sync(void *impl)
{
    cuda_dev *d = impl;
    CUDA_TRY(cudaStreamSynchronize(d->cx.stream), "sync");
    CUDA_TRY(cudaGetLastError(), "sync");
    return GT_OK;
}

static void cuda_close(void *impl)
{
    cuda_dev *d = impl;
    gt_cuda_ctx *cx = &d->cx;
    size_t cursor = 0;
    gt_dbuf h = 0;
    gt_buftab_entry *b = NULL;
    // d->tab is NULL when open failed before making it
    while (d->tab != NULL && (b = gt_buftab_next(d->tab, &cursor, &h)) != NULL) {
        gt_err e = wipe_and_release(d, h, b);
        if (e.code != GT_E_NONE) {
            gt_log(GT_LOG_WARN, "%s", e.msg);
        }
    }
    gt_buftab_free(d->tab);
    gt_release_state_free(&d->rel);
    if (cx->scratch != NULL && cx->stream != NULL) {
        (void)cudaMemsetAsync(cx->scratch, 0, cx->scratch_bytes, cx->stream);  // activations
        (void)cudaStreamSynchronize(cx->stream);
    }
    if (cx->scratch != NULL) {
        (void)cudaFree(cx->scratch);
    }
    if (cx->lt_workspace != NULL) {
        (void)cudaFree(cx->lt_workspace);
    }
    if (cx->flag != NULL) {
        (void)cudaFree(cx->flag);
    }
    gt_cuda_lt_plans_free(cx);
    if (cx->lt != NULL) {
        (void)cublasLtDestroy(cx->lt);
    }
    if (cx->blas != NULL) {
        (void)cublasDestroy(cx->blas);
    }
    if (cx->stream != NULL) {
        (void)cudaStreamSynchronize(cx->stream);
        (void)cudaStreamDestroy(cx->stream);
    }
    free(d);
}

static void cuda_local(void *impl, gt_buftab **tab, gt_release_state **rel)
{
    cuda_dev *d = impl;
    *tab = d->tab;
    *rel = &d->rel;
}

static const gt_device_backend cuda_backend = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .buf_size = cuda_buf_size,
    .copy_in = cuda_copy_in,
    .copy_out = cuda_copy_out,
    .memset = cuda_memset,
    .launch = cuda_launch,
    .sync = cuda_sync,
    .close = cuda_close,
    .local = cuda_local,
};

static gt_err open_ctx(gt_cuda_ctx *cx)
{
    char why[160];
    GT_ENSURE(gt_cuda_probe(why, sizeof why), GT_E_UNSUPPORTED, "cuda: %s", why);
    cx->device = 0;
    CUDA_TRY(cudaSetDevice(cx->device), "set device");
    CUDA_TRY(cudaStreamCreateWithFlags(&cx->stream, cudaStreamNonBlocking), "stream");
    cublasStatus_t st = cublasCreate(&cx->blas);
    GT_ENSURE(st == CUBLAS_STATUS_SUCCESS, GT_E_IO, "cublas: create: %s",
              cublasGetStatusString(st));
    st = cublasSetStream(cx->blas, cx->stream);
    GT_ENSURE(st == CUBLAS_STATUS_SUCCESS, GT_E_IO, "cublas: stream: %s",
              cublasGetStatusString(st));
    // Plain fp32 (docs/cuda.md): never TF32 tensor-op math.
    st = cublasSetMathMode(cx->blas, CUBLAS_DEFAULT_MATH);
    GT_ENSURE(st == CUBLAS_STATUS_SUCCESS, GT_E_IO, "cublas: math mode: %s",
              cublasGetStatusString(st));
    st = cublasLtCreate(&cx->lt);
    GT_ENSURE(st == CUBLAS_STATUS_SUCCESS, GT_E_IO, "cublasLt: create: %s",
              cublasGetStatusString(st));
    CUDA_TRY(cudaMalloc(&cx->lt_workspace, GT_CUDA_LT_WORKSPACE_BYTES), "cublasLt workspace");
    CUDA_TRY(cudaMalloc((void **)&cx->flag, sizeof *cx->flag), "flag");
    return GT_OK;
}

gt_err gt_device_cuda_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops)
{
    cuda_dev *d = calloc(1, sizeof *d);
    GT_ENSURE(d != NULL, GT_E_NOMEM, "device: out of memory");
    gt_buftab_config tc = {.mem_limit = cfg->mem_limit, .limit_hint = "the device's mem_limit"};
    gt_err e = gt_buftab_new(&d->tab, &tc);
    if (e.code == GT_E_NONE) {
        e = open_ctx(&d->cx);
    }
    if (e.code != GT_E_NONE) {
        cuda_close(d);
        return e;
    }
    *impl = d;
    *ops = &cuda_backend;
    return GT_OK;
}

// ---- CUDA IPC -------------------------------------------------------------------------------

void gt_cuda_ipc_desc_write(uint8_t out[GT_CUDA_IPC_DESC_BYTES], const gt_cuda_ipc_desc *desc)
{
    memcpy(out, desc->handle, GT_CUDA_IPC_HANDLE_BYTES);
    for (int i = 0; i < 8; i++) {
        out[GT_CUDA_IPC_HANDLE_BYTES + i] = (uint8_t)(desc->bytes >> (8 * i));
    }
}

gt_err gt_cuda_ipc_desc_read(gt_reader *r, gt_cuda_ipc_desc *desc)
{
    GT_TRY(gt_reader_bytes(r, desc->handle, GT_CUDA_IPC_HANDLE_BYTES));
    GT_TRY(gt_reader_u64le(r, &desc->bytes));
    GT_ENSURE(desc->bytes > 0 && desc->bytes <= ((uint64_t)1 << 46), GT_E_FORMAT,
              "cuda ipc: buffer size %llu", (unsigned long long)desc->bytes);
    return GT_OK;
}

// CUDA IPC is refused outright in protected PCIe mode (cc_mode.h), on both ends.
static gt_err ipc_allowed(cuda_dev *d)
{
    if (!d->cc_read) {
        GT_TRY(gt_nvml_cc_state(&d->cc));
        d->cc_read = true;
    }
    return gt_cc_ipc_check(&d->cc);
}

gt_err gt_cuda_backend_ipc_check(void *impl)
{
    cuda_dev *d = impl;
    return ipc_allowed(d);
}

gt_err gt_cuda_backend_alloc_exportable(void *impl, uint64_t bytes, uint32_t flags,
                                        gt_dbuf *out)
{
    *out = 0;
    cuda_dev *d = impl;
    return alloc_buf(d, bytes, flags, true, out);
}

gt_err gt_cuda_backend_ipc_export(void *impl, gt_dbuf buf, gt_cuda_ipc_desc *out)
{
    memset(out, 0, sizeof *out);
    cuda_dev *d = impl;
    gt_buftab_entry *b = NULL;
    GT_TRY(gt_buftab_find(d->tab, buf, 0, &b));
    GT_ENSURE(!b->foreign, GT_E_STATE, "cuda ipc: buffer %#llx is itself imported",
              (unsigned long long)buf);
    GT_TRY(ipc_allowed(d));
    GT_ENSURE(b->ext.cuda.ipc_bytes != 0, GT_E_STATE,
              "cuda ipc: buffer %#llx is not exportable (it may share its driver allocation "
              "with other buffers); allocate it with gt_device_cuda_alloc_exportable",
              (unsigned long long)buf);
    // Whatever was queued for the buffer (copy_in, decryption) lands before the handle leaves.
    CUDA_TRY(cudaStreamSynchronize(d->cx.stream), "ipc export");
    cudaIpcMemHandle_t h;
    CUDA_TRY(cudaIpcGetMemHandle(&h, b->at.device), "ipc export");
    _Static_assert(sizeof h == GT_CUDA_IPC_HANDLE_BYTES, "cudaIpcMemHandle_t is 64 bytes");
    memcpy(out->handle, &h, sizeof h);
    out->bytes = b->bytes;
    return GT_OK;
}

// How many bytes the driver's allocation holds from p on (base <= p, base + size - p), from
// cuMemGetAddressRange through the runtime's entry-point lookup (nothing links libcuda
// directly). p need not be the base: an opened handle points where the exporter's pointer was.
static gt_err allocation_size(const void *p, uint64_t *size)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    // ByVersion exists from CUDA 12.5 on (and is the only form CUDA 13 keeps undeprecated); 12000
    // asks for the ABI of cuMemGetAddressRange as of CUDA 12.0 (the _v2 entry point).
    CUDA_TRY(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
                                              cudaEnableDefault, &q),
             "driver entry point");
#else
    // CUDA 12.0-12.4: the entry point of the runtime's own version (also the _v2 one).
    CUDA_TRY(cudaGetDriverEntryPoint("cuMemGetAddressRange", &fn, cudaEnableDefault, &q),
             "driver entry point");
#endif
    GT_ENSURE(fn != NULL && q == cudaDriverEntryPointSuccess, GT_E_IO,
              "cuda: cuMemGetAddressRange not found in the driver");
    PFN_cuMemGetAddressRange_v3020 get_range = (PFN_cuMemGetAddressRange_v3020)fn;
    CUdeviceptr base = 0;
    size_t n = 0;
    CUresult r = get_range(&base, &n, (CUdeviceptr)(uintptr_t)p);
    GT_ENSURE(r == CUDA_SUCCESS, GT_E_IO, "cuda: cuMemGetAddressRange failed (%d)", (int)r);
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)p;
    GT_ENSURE(base <= at && at - base < n, GT_E_IO,
              "cuda ipc: the driver's allocation [%#llx, +%zu) does not hold the mapping at %#llx",
              (unsigned long long)base, n, (unsigned long long)at);
    *size = n - (at - base);
    return GT_OK;
}

gt_err gt_cuda_backend_ipc_import(void *impl, const gt_cuda_ipc_desc *desc, uint32_t flags,
                                  gt_dbuf *out)
{
    *out = 0;
    cuda_dev *d = impl;
    GT_ENSURE(desc->bytes > 0 && desc->bytes <= ((uint64_t)1 << 46), GT_E_ARG,
              "cuda ipc: buffer size %llu", (unsigned long long)desc->bytes);
    GT_TRY(ipc_allowed(d));
    gt_buftab_entry *b = NULL;
    gt_dbuf bh = 0;
    GT_TRY(gt_buftab_import(d->tab, desc->bytes, flags, 0, &bh, &b));
    cudaIpcMemHandle_t h;
    memcpy(&h, desc->handle, sizeof h);
    void *p = NULL;
    cudaError_t ce = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (ce != cudaSuccess) {
        gt_buftab_release(d->tab, bh);
        return cuda_fail(ce, "ipc import");
    }
    uint64_t real = 0;
    gt_err e = allocation_size(p, &real);
    if (e.code == GT_E_NONE && desc->bytes > real) {
        e = gt_errf(GT_E_ARG,
                    "cuda ipc: handle claims %llu bytes, the allocation holds %llu from the "
                    "mapped address on",
                    (unsigned long long)desc->bytes, (unsigned long long)real);
    }
    if (e.code != GT_E_NONE) {
        (void)cudaIpcCloseMemHandle(p);
        gt_buftab_release(d->tab, bh);
        return e;
    }
    b->at.device = p;
    *out = bh;
    return GT_OK;
}

// ---- AES-256-GCM open -----------------------------------------------------------------------

gt_err gt_cuda_backend_aes_gcm_open(void *impl, gt_dbuf pt, gt_dbuf ct, uint64_t off,
                                    uint64_t len, const uint8_t *aad, size_t aad_len,
                                    const uint8_t iv[12], const uint8_t tag[16],
                                    const uint8_t key[32])
{
    cuda_dev *d = impl;
    gt_buftab_entry *bp = NULL, *bc = NULL;
    GT_TRY(gt_buftab_access(d->tab, pt, 0, off, len, "aes-gcm plaintext", &bp));
    GT_TRY(gt_buftab_access(d->tab, ct, 0, off, len, "aes-gcm ciphertext", &bc));
    // Holder plaintext never lands where copy_out could read it: the backend enforces it, not
    // the caller's discipline.
    GT_ENSURE(bp->flags & GT_DBUF_NO_READBACK, GT_E_POLICY,
              "aes-gcm: the plaintext buffer %#llx is readable; allocate it with "
              "GT_DBUF_NO_READBACK",
              (unsigned long long)pt);
    uint8_t *pdev = bp->at.device + off, *cdev = bc->at.device + off;
    // GCM's limit for one (key, iv): 2^32 - 2 blocks.
    GT_ENSURE(len <= ((uint64_t)1 << 36) - 32, GT_E_ARG, "aes-gcm: %llu bytes is over GCM's limit",
              (unsigned long long)len);
    GT_ENSURE(aad_len <= ((size_t)1 << 20), GT_E_ARG, "aes-gcm: %zu bytes of AAD", aad_len);
    uint32_t rk[GT_CUDA_AES256_RK_WORDS];
    uint8_t got[16] = {0};
    uint32_t *dkey = NULL;
    gt_err err = GT_OK;
    cudaError_t ce = cudaMalloc((void **)&dkey, sizeof rk);
    if (ce != cudaSuccess) {
        return cuda_fail(ce, "aes-gcm key");
    }
    gt_cuda_aes256_expand_key(rk, key);
    GT_TRY_GOTO(err,
                ran(gt_cuda_aes_gcm_tag(&d->cx, got, cdev, (size_t)len, aad, aad_len, iv, rk,
                                        dkey),
                    "aes-gcm tag"),
                out);
    // The tag decides before any plaintext exists on the device.
    GT_ENSURE_GOTO(err, gt_ct_equal(got, tag, 16), out, GT_E_AUTH,
                   "aes-gcm: authentication failed");
    GT_TRY_GOTO(err,
                ran(gt_cuda_aes_gcm_ctr(&d->cx, pdev, cdev, (size_t)len, iv, rk, dkey),
                    "aes-gcm ctr"),
                out);
out:
    gt_secure_zero(rk, sizeof rk);
    gt_secure_zero(got, sizeof got);
    // The launchers wipe dkey too; this covers every early exit.
    (void)cudaMemsetAsync(dkey, 0, sizeof rk, d->cx.stream);
    (void)cudaStreamSynchronize(d->cx.stream);
    (void)cudaFree(dkey);
    return err;
}

// ---- peers: GPU memory as the peer core's range (peer.c) -------------------------------------
// Keys, admission, sequence numbers and the wire bytes are peer.c's, as on cpu (the trainer's
// attested process owns this GPU); only the floats' side is here. Seal: the CTR pass encrypts
// the floats into device staging, the tag is computed over that ciphertext on the device, and
// only ciphertext || tag reach the host. Open: the ciphertext goes to device staging, its tag is
// computed there and compared before the CTR pass decrypts it in staging; the add (or copy) into
// the destination runs on the device after the core has added the labels. Plaintext never
// crosses PCIe. Staging is one cudaMalloc per chunk, wiped before it is freed.
typedef struct {
    cuda_dev *d;
    uint8_t *floats;  // the chunk's floats in the buffer (device)
    uint8_t *stage;   // len bytes (device): ciphertext; on open, then plaintext
    uint32_t *dkey;   // the round keys' room (device); the launchers wipe it
    uint64_t len;
} gpu_range;

static void gpu_range_end(gpu_range *g)
{
    cudaStream_t st = g->d->cx.stream;
    if (g->stage != NULL) {
        (void)cudaMemsetAsync(g->stage, 0, (size_t)g->len, st);
    }
    if (g->dkey != NULL) {
        (void)cudaMemsetAsync(g->dkey, 0, GT_CUDA_AES256_RK_WORDS * 4, st);
    }
    (void)cudaStreamSynchronize(st);
    (void)cudaFree(g->stage);
    (void)cudaFree(g->dkey);
    g->stage = NULL;
    g->dkey = NULL;
}

static gt_err gpu_range_begin(gpu_range *g, cuda_dev *d, gt_dbuf buf, const gt_peer_hdr *h,
                              const char *what, gt_buftab_entry **e)
{
    memset(g, 0, sizeof *g);
    g->d = d;
    uint64_t off = 0;
    GT_TRY(gt_peer_hdr_bytes(h, &off, &g->len));
    GT_TRY(gt_buftab_access(d->tab, buf, 0, off, g->len, what, e));
    g->floats = (*e)->at.device + off;
    cudaError_t ce = cudaMalloc((void **)&g->stage, (size_t)g->len);
    if (ce == cudaSuccess) {
        ce = cudaMalloc((void **)&g->dkey, GT_CUDA_AES256_RK_WORDS * 4);
    }
    if (ce != cudaSuccess) {
        (void)cudaGetLastError();  // as in alloc_buf: not sticky, but not to be reported later
        gpu_range_end(g);
        return gt_errf(ce == cudaErrorMemoryAllocation ? GT_E_LIMIT : GT_E_IO,
                       "cuda: %s: no room for %llu bytes of staging: %s", what,
                       (unsigned long long)g->len, cudaGetErrorString(ce));
    }
    return GT_OK;
}

static gt_err gpu_seal(void *ctx, uint8_t *ct_tag, uint64_t len, const uint8_t *aad,
                       size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                       const uint8_t key[GT_AEAD_KEY_BYTES])
{
    gpu_range *g = ctx;
    gt_cuda_ctx *cx = &g->d->cx;
    uint32_t rk[GT_CUDA_AES256_RK_WORDS];
    gt_cuda_aes256_expand_key(rk, key);
    // Same stream as the launches: the gradient kernels queued before have written the floats.
    gt_err err = ran(gt_cuda_aes_gcm_ctr(cx, g->stage, g->floats, (size_t)len, iv, rk, g->dkey),
                     "peer seal (ctr)");
    if (gt_is_ok(err)) {
        err = ran(gt_cuda_aes_gcm_tag(cx, ct_tag + len, g->stage, (size_t)len, aad, aad_len, iv,
                                      rk, g->dkey),
                  "peer seal (tag)");
    }
    gt_secure_zero(rk, sizeof rk);
    if (gt_is_ok(err)) {
        CUDA_TRY(cudaMemcpyAsync(ct_tag, g->stage, (size_t)len, cudaMemcpyDeviceToHost,
                                 cx->stream),
                 "peer seal (ciphertext out)");
        CUDA_TRY(cudaStreamSynchronize(cx->stream), "peer seal (ciphertext out)");
    }
    return err;
}

static gt_err gpu_open(void *ctx, const uint8_t *ct_tag, uint64_t len, const uint8_t *aad,
                       size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                       const uint8_t key[GT_AEAD_KEY_BYTES])
{
    gpu_range *g = ctx;
    gt_cuda_ctx *cx = &g->d->cx;
    CUDA_TRY(cudaMemcpyAsync(g->stage, ct_tag, (size_t)len, cudaMemcpyHostToDevice, cx->stream),
             "peer open (ciphertext in)");
    uint32_t rk[GT_CUDA_AES256_RK_WORDS];
    uint8_t got[GT_AEAD_TAG_BYTES] = {0};
    gt_cuda_aes256_expand_key(rk, key);
    gt_err err = ran(gt_cuda_aes_gcm_tag(cx, got, g->stage, (size_t)len, aad, aad_len, iv, rk,
                                         g->dkey),
                     "peer open (tag)");
    // The tag decides before any plaintext exists on the device.
    if (gt_is_ok(err) && !gt_ct_equal(got, ct_tag + len, GT_AEAD_TAG_BYTES)) {
        err = gt_errf(GT_E_AUTH, "authentication failed");
    }
    if (gt_is_ok(err)) {
        err = ran(gt_cuda_aes_gcm_ctr(cx, g->stage, g->stage, (size_t)len, iv, rk, g->dkey),
                  "peer open (ctr)");
    }
    gt_secure_zero(rk, sizeof rk);
    return err;
}

static gt_err gpu_apply(void *ctx, int mode)
{
    gpu_range *g = ctx;
    gt_cuda_ctx *cx = &g->d->cx;
    if (mode == GT_PEER_COPY) {
        CUDA_TRY(cudaMemcpyAsync(g->floats, g->stage, (size_t)g->len, cudaMemcpyDeviceToDevice,
                                 cx->stream),
                 "peer open (copy)");
    } else {
        // dst = dst + chunk, one fp32 add per float: the cpu backend's sum, bit for bit.
        float *dst = (float *)(void *)g->floats;
        GT_TRY(ran(gt_cuda_residual_forward(cx, dst, dst, (const float *)(void *)g->stage,
                                            (size_t)g->len / 4),
                   "peer open (add)"));
    }
    CUDA_TRY(cudaStreamSynchronize(cx->stream), "peer open");
    return GT_OK;
}

gt_err gt_cuda_backend_peer_seal(void *impl, gt_peer_core *pc, const gt_peer_hdr *h, gt_dbuf buf,
                                 uint8_t *out, size_t cap, size_t *outlen)
{
    *outlen = 0;
    gpu_range g;
    gt_buftab_entry *e = NULL;
    GT_TRY(gpu_range_begin(&g, impl, buf, h, "peer_seal", &e));
    gt_peer_range r = {.seal = gpu_seal, .ctx = &g};
    gt_err err = gt_peer_core_seal_range(pc, g.d->tab, e->label, h, &r, out, cap, outlen);
    gpu_range_end(&g);
    return err;
}

gt_err gt_cuda_backend_peer_open(void *impl, gt_peer_core *pc, const gt_peer_hdr *h,
                                 gt_span chunk, gt_dbuf buf, int mode)
{
    gpu_range g;
    gt_buftab_entry *e = NULL;
    GT_TRY(gpu_range_begin(&g, impl, buf, h, "peer_open", &e));
    gt_peer_range r = {.open = gpu_open, .apply = gpu_apply, .ctx = &g};
    gt_err err = gt_peer_core_open_range(pc, g.d->tab, buf, h, chunk, &r, mode);
    gpu_range_end(&g);
    return err;
}

// As the cpu backend's: for sealing in the trainer's process (travel/export.c). The CPU TEE that
// runs the trainer is in the trusted base on cuda (docs/security.md), so reading its own GPU's
// memory grants nothing it could not already do.
gt_err gt_device_cuda_inproc_read(void *impl, void *dst, gt_dbuf src, uint64_t off, uint64_t len)
{
    cuda_dev *d = impl;
    gt_buftab_entry *b = NULL;
    GT_TRY(gt_buftab_access(d->tab, src, 0, off, len, "in-process read", &b));
    if (len > 0) {
        CUDA_TRY(cudaMemcpyAsync(dst, b->at.device + off, (size_t)len, cudaMemcpyDeviceToHost,
                                 d->cx.stream),
                 "in-process read");
        CUDA_TRY(cudaStreamSynchronize(d->cx.stream), "in-process read");
    }
    return GT_OK;
}
