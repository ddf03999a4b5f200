// Device-sealed exports (device.h "device-sealed exports"): on sim the requests that have devd
// seal weights and optimizer state itself, and the in-process read the cpu and cuda backends
// give travel for sealing in the trainer's own process.
#include <gputravel/device.h>

#include <string.h>

#include "backend.h"

// The largest sealed object a device hands back: a resume state of three 32 GiB parts and its
// header. Bounds what the client reserves from a size devd reports.
#define EXPORT_MAX_BYTES ((uint64_t)3 * (32ull << 30) + (64u << 10))

static gt_err sim_impl(gt_device *dev, const char *what, void **impl)
{
    *impl = gt_device_backend_impl(dev, GT_DEVICE_SIM);
    GT_ENSURE(*impl != NULL, GT_E_UNSUPPORTED,
              "device: %s is a sim device request; on %s the trainer seals in-process "
              "(gt_travel_export_*)", what, gt_device_kind_name(gt_device_get_kind(dev)));
    return GT_OK;
}

// The sealed bytes devd wrote into a new buffer: copied out (an ordinary copy_out: devd made the
// buffer unlabelled) and freed whatever happened.
static gt_err fetch_exported(gt_device *dev, const gt_sim_msg *rep, gt_buf *out)
{
    out->len = 0;
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, rep->len > 0 && rep->len <= EXPORT_MAX_BYTES, done, GT_E_FORMAT,
                   "device: exported %llu bytes", (unsigned long long)rep->len);
    GT_TRY_GOTO(err, gt_buf_reserve(out, (size_t)rep->len), done);
    GT_TRY_GOTO(err, gt_device_copy_out(dev, out->data, rep->handle, 0, rep->len), done);
    out->len = (size_t)rep->len;
done: {
    gt_err f = gt_device_free(dev, rep->handle);
    return gt_is_ok(err) ? f : err;
}
}

gt_err gt_device_export_checkpoint(gt_device *dev, gt_dbuf params, uint64_t len, uint64_t step,
                                   const uint32_t config[6], gt_buf *sealed)
{
    void *c = NULL;
    GT_TRY(sim_impl(dev, "export_checkpoint", &c));
    gt_sim_msg req = {.type = GT_SIM_REQ_EXPORT_CHECKPOINT, .handle = params, .offset = 0,
                      .len = len, .step = step}, rep;
    memcpy(req.config, config, sizeof req.config);
    GT_TRY(gt_sim_conn_rpc(c, &req, GT_SIM_REP_EXPORTED, &rep));
    return fetch_exported(dev, &rep, sealed);
}

gt_err gt_device_export_signer(gt_device *dev, uint8_t pub[GT_SIM_EXPORT_KEY_BYTES])
{
    void *c = NULL;
    GT_TRY(sim_impl(dev, "export_signer", &c));
    gt_sim_msg req = {.type = GT_SIM_REQ_EXPORT_SIGNER}, rep;
    GT_TRY(gt_sim_conn_rpc(c, &req, GT_SIM_REP_SIGNER, &rep));
    memcpy(pub, rep.export_key, GT_SIM_EXPORT_KEY_BYTES);
    return GT_OK;
}

gt_err gt_device_export_resume(gt_device *dev, const gt_dbuf bufs[3], uint64_t len, uint64_t step,
                               const gt_sim_loader *pos, const uint32_t config[6],
                               gt_buf *state)
{
    void *c = NULL;
    GT_TRY(sim_impl(dev, "export_resume", &c));
    gt_sim_msg req = {.type = GT_SIM_REQ_EXPORT_RESUME, .len = len, .step = step,
                      .loader = *pos}, rep;
    memcpy(req.bufs, bufs, sizeof req.bufs);
    memcpy(req.config, config, sizeof req.config);
    GT_TRY(gt_sim_conn_rpc(c, &req, GT_SIM_REP_EXPORTED, &rep));
    return fetch_exported(dev, &rep, state);
}

gt_err gt_device_import_resume(gt_device *dev, gt_span state, const gt_dbuf bufs[3],
                               uint64_t *step, gt_sim_loader *pos)
{
    void *c = NULL;
    GT_TRY(sim_impl(dev, "import_resume", &c));
    GT_ENSURE(state.len > 0, GT_E_FORMAT, "device: empty resume state");
    // The state's bytes go in as ciphertext through an ordinary buffer; devd opens them there.
    gt_dbuf in = 0;
    GT_TRY(gt_device_alloc(dev, state.len, 0, &in));
    gt_err err = gt_device_copy_in(dev, in, 0, state.data, state.len);
    if (gt_is_ok(err)) {
        gt_sim_msg req = {.type = GT_SIM_REQ_IMPORT_RESUME, .handle = in, .len = state.len},
                   rep;
        memcpy(req.bufs, bufs, sizeof req.bufs);
        err = gt_sim_conn_rpc(c, &req, GT_SIM_REP_RESUMED, &rep);
        if (gt_is_ok(err)) {
            *step = rep.step;
            *pos = rep.loader;
        }
    }
    gt_err f = gt_device_free(dev, in);
    return gt_is_ok(err) ? f : err;
}

gt_err gt_device_inproc_read(gt_device *dev, void *dst, gt_dbuf src, uint64_t offset,
                             uint64_t len)
{
    void *impl = gt_device_backend_impl(dev, GT_DEVICE_CPU);
    if (impl != NULL) {
        return gt_device_cpu_inproc_read(impl, dst, src, offset, len);
    }
#ifdef GT_HAVE_CUDA
    impl = gt_device_backend_impl(dev, GT_DEVICE_CUDA);
    if (impl != NULL) {
        return gt_device_cuda_inproc_read(impl, dst, src, offset, len);
    }
#endif
    return gt_errf(GT_E_UNSUPPORTED, "device: no in-process read on a %s device: its memory is "
                                     "devd's (exports are sealed there)",
                   gt_device_kind_name(gt_device_get_kind(dev)));
}

#ifdef GT_HAVE_CUDA
// ---- cuda's extensions (device_cuda.h): find the backend state, let the backend work ----------

static gt_err cuda_impl(gt_device *dev, void **impl)
{
    *impl = gt_device_backend_impl(dev, GT_DEVICE_CUDA);
    GT_ENSURE(*impl != NULL, GT_E_ARG, "device: not a cuda device");
    return GT_OK;
}

gt_err gt_device_cuda_ipc_check(gt_device *dev)
{
    void *impl = NULL;
    GT_TRY(cuda_impl(dev, &impl));
    return gt_cuda_backend_ipc_check(impl);
}

gt_err gt_device_cuda_alloc_exportable(gt_device *dev, uint64_t bytes, uint32_t flags,
                                       gt_dbuf *out)
{
    *out = 0;
    void *impl = NULL;
    GT_TRY(cuda_impl(dev, &impl));
    return gt_cuda_backend_alloc_exportable(impl, bytes, flags, out);
}

gt_err gt_device_cuda_ipc_export(gt_device *dev, gt_dbuf buf, gt_cuda_ipc_desc *out)
{
    memset(out, 0, sizeof *out);
    void *impl = NULL;
    GT_TRY(cuda_impl(dev, &impl));
    return gt_cuda_backend_ipc_export(impl, buf, out);
}

gt_err gt_device_cuda_ipc_import(gt_device *dev, const gt_cuda_ipc_desc *desc, uint32_t flags,
                                 gt_dbuf *out)
{
    *out = 0;
    void *impl = NULL;
    GT_TRY(cuda_impl(dev, &impl));
    return gt_cuda_backend_ipc_import(impl, desc, flags, out);
}

gt_err gt_device_cuda_aes_gcm_open(gt_device *dev, gt_dbuf pt, gt_dbuf ct, uint64_t len,
                                   const uint8_t *aad, size_t aad_len, const uint8_t iv[12],
                                   const uint8_t tag[16], const uint8_t key[32])
{
    void *impl = NULL;
    GT_TRY(cuda_impl(dev, &impl));
    return gt_cuda_backend_aes_gcm_open(impl, pt, ct, 0, len, aad, aad_len, iv, tag, key);
}

gt_err gt_device_cuda_aes_gcm_open_at(gt_device *dev, gt_dbuf pt, gt_dbuf ct, uint64_t off,
                                      uint64_t len, const uint8_t *aad, size_t aad_len,
                                      const uint8_t iv[12], const uint8_t tag[16],
                                      const uint8_t key[32])
{
    void *impl = NULL;
    GT_TRY(cuda_impl(dev, &impl));
    return gt_cuda_backend_aes_gcm_open(impl, pt, ct, off, len, aad, aad_len, iv, tag, key);
}
#endif
