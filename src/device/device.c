// The device API: dispatch to the backend chosen at open.
#include <gputravel/device.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "pager_test.h"
#include "sim_client.h"

struct gt_device {
    gt_device_kind kind;
    const gt_device_backend *ops;
    void *impl;
    void (*observer)(void *ctx, const gt_op *op);
    void *observer_ctx;
    gt_device_attester attester;  // cpu: the trainer's evidence for peer hellos
    gt_peer_core *peer;           // in-process backends: the run's peers (NULL until a hello)
};

const char *gt_device_kind_name(gt_device_kind kind)
{
    switch (kind) {
    case GT_DEVICE_CPU: return "cpu";
    case GT_DEVICE_SIM: return "sim";
    case GT_DEVICE_CUDA: return "cuda";
    default: return "unknown";
    }
}

gt_err gt_device_kind_parse(const char *name, gt_device_kind *kind)
{
    for (int k = GT_DEVICE_CPU; k <= GT_DEVICE_CUDA; k++) {
        if (strcmp(name, gt_device_kind_name((gt_device_kind)k)) == 0) {
            *kind = (gt_device_kind)k;
            return GT_OK;
        }
    }
    return gt_errf(GT_E_ARG, "unknown device '%s' (expected cpu, sim or cuda)", name);
}

static gt_err device_wrap(gt_device **dev, gt_device_kind kind, void *impl,
                          const gt_device_backend *ops)
{
    gt_device *d = calloc(1, sizeof *d);
    if (d == NULL) {
        ops->close(impl);
        return gt_errf(GT_E_NOMEM, "device: out of memory");
    }
    d->kind = kind;
    d->ops = ops;
    d->impl = impl;
    *dev = d;
    return GT_OK;
}

gt_err gt_device_open(gt_device **dev, const gt_device_config *cfg)
{
    *dev = NULL;
    void *impl = NULL;
    const gt_device_backend *ops = NULL;
    // sim pages in devd (devd --paging-store); cuda does not page yet (docs/paging.md)
    GT_ENSURE(cfg->paging_store == NULL || cfg->kind == GT_DEVICE_CPU, GT_E_UNSUPPORTED,
              "device: paging_store is the cpu backend's (sim: devd --paging-store DIR)");
    switch (cfg->kind) {
    case GT_DEVICE_CPU: {
        gt_err e = gt_device_cpu_open(cfg, &impl, &ops);
        if (e.code != GT_E_NONE) {
            return e;
        }
        break;
    }
    case GT_DEVICE_SIM:
        GT_TRY(gt_device_sim_open(cfg, &impl, &ops));
        break;
#ifdef GT_HAVE_CUDA
    case GT_DEVICE_CUDA: {
        gt_err e = gt_device_cuda_open(cfg, &impl, &ops);
        if (e.code != GT_E_NONE) {
            return e;
        }
        break;
    }
#endif
    default:
        return gt_errf(GT_E_UNSUPPORTED, "device backend '%s' is not built",
                       gt_device_kind_name(cfg->kind));
    }
    gt_device *d = calloc(1, sizeof *d);
    if (d == NULL) {
        ops->close(impl);
        return gt_errf(GT_E_NOMEM, "device: out of memory");
    }
    d->kind = cfg->kind;
    d->ops = ops;
    d->impl = impl;
    if (cfg->attester != NULL) {
        d->attester = *cfg->attester;
    }
    *dev = d;
    return GT_OK;
}

gt_err gt_device_open_sim(gt_device **dev, const gt_device_config *cfg,
                          const gt_device_sim_options *opt)
{
    *dev = NULL;
    void *impl = NULL;
    const gt_device_backend *ops = NULL;
    GT_ENSURE(cfg->kind == GT_DEVICE_SIM, GT_E_ARG, "gt_device_open_sim: device kind is %s",
              gt_device_kind_name(cfg->kind));
    GT_TRY(gt_device_sim_open_opts(cfg, opt, &impl, &ops));
    return device_wrap(dev, GT_DEVICE_SIM, impl, ops);
}

gt_err gt_device_sim_stat_get(gt_device *dev, gt_device_sim_stat *stat)
{
    GT_ENSURE(dev->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_stat(dev->impl, stat);
}

gt_err gt_device_sim_evidence(gt_device *dev, gt_span *evidence,
                              uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    GT_ENSURE(dev->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_evidence(dev->impl, evidence, report_data);
}

gt_err gt_device_sim_measurement(gt_device *dev, uint8_t out[GT_MEASUREMENT_BYTES])
{
    GT_ENSURE(dev->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_measurement(dev->impl, out);
}

void gt_device_close(gt_device *dev)
{
    if (dev == NULL) {
        return;
    }
    dev->ops->close(dev->impl);
    gt_peer_core_free(dev->peer);
    free(dev);
}

gt_device_kind gt_device_get_kind(const gt_device *dev) { return dev->kind; }

void *gt_device_backend_impl(gt_device *dev, gt_device_kind kind)
{
    return dev != NULL && dev->kind == kind ? dev->impl : NULL;
}

gt_err gt_device_alloc(gt_device *dev, uint64_t bytes, uint32_t flags, gt_dbuf *out)
{
    *out = 0;
    return dev->ops->alloc(dev->impl, bytes, flags, out);
}

gt_err gt_device_free(gt_device *dev, gt_dbuf buf) { return dev->ops->free(dev->impl, buf); }

gt_err gt_device_buf_size(gt_device *dev, gt_dbuf buf, uint64_t *bytes)
{
    return dev->ops->buf_size(dev->impl, buf, bytes);
}

gt_err gt_device_copy_in(gt_device *dev, gt_dbuf dst, uint64_t dst_offset, const void *src,
                         uint64_t len)
{
    return dev->ops->copy_in(dev->impl, dst, dst_offset, src, len);
}

gt_err gt_device_copy_out(gt_device *dev, void *dst, gt_dbuf src, uint64_t src_offset,
                          uint64_t len)
{
    return dev->ops->copy_out(dev->impl, dst, src, src_offset, len);
}

gt_err gt_device_memset(gt_device *dev, gt_dbuf buf, uint64_t offset, int value, uint64_t len)
{
    return dev->ops->memset(dev->impl, buf, offset, value, len);
}

gt_err gt_device_launch(gt_device *dev, const gt_op *op)
{
    if (dev->observer != NULL) {
        dev->observer(dev->observer_ctx, op);
    }
    return dev->ops->launch(dev->impl, op);
}

void gt_device_observe(gt_device *dev, void (*fn)(void *ctx, const gt_op *op), void *ctx)
{
    dev->observer = fn;
    dev->observer_ctx = ctx;
}

gt_err gt_device_sync(gt_device *dev) { return dev->ops->sync(dev->impl); }

// ---- labels and declared outputs ----------------------------------------------------------------
// In-process backends (ops->local) keep the table and the rules here, and these calls run on
// them directly; sim sends each to devd, which keeps its own.

static gt_buftab *local_tab(gt_device *dev)
{
    gt_buftab *tab = NULL;
    gt_release_state *rel = NULL;
    dev->ops->local(dev->impl, &tab, &rel);
    return tab;
}

static gt_release_state *local_rel(gt_device *dev)
{
    gt_buftab *tab = NULL;
    gt_release_state *rel = NULL;
    dev->ops->local(dev->impl, &tab, &rel);
    return rel;
}

gt_err gt_device_label_add(gt_device *dev, gt_dbuf buf, const uint8_t id[GT_LABEL_ID_BYTES])
{
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_label_add(dev->impl, buf, id);
    }
    gt_buftab *tab = local_tab(dev);
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_find(tab, buf, 0, &e));
    return gt_buftab_label_add(tab, buf, id);
}

gt_err gt_device_label_get(gt_device *dev, gt_dbuf buf, size_t *count,
                           uint8_t (*ids)[GT_LABEL_ID_BYTES], size_t cap)
{
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_label_get(dev->impl, buf, count, ids, cap);
    }
    gt_buftab *tab = local_tab(dev);
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_find(tab, buf, 0, &e));
    *count = gt_buftab_label_ids(tab, e->label, ids, cap);
    return GT_OK;
}

gt_err gt_device_outputs_check(const gt_device_outputs *o)
{
    GT_ENSURE(!o->loss || (o->loss_mantissa_bits >= 1 && o->loss_mantissa_bits <= 23), GT_E_ARG,
              "device: loss released with %u mantissa bits (1..23)", o->loss_mantissa_bits);
    return GT_OK;
}

gt_err gt_device_declare_outputs(gt_device *dev, const gt_device_outputs *outputs,
                                 gt_span agreement)
{
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_declare(dev->impl, agreement);
    }
    gt_release_state *rel = local_rel(dev);
    GT_ENSURE(!rel->declared, GT_E_STATE, "device: outputs are declared once per session");
    GT_TRY(gt_device_outputs_check(outputs));
    rel->rules = *outputs;
    rel->declared = true;
    return GT_OK;
}

gt_err gt_device_pin_program(gt_device *dev, gt_span program)
{
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_pin(dev->impl, program);
    }
    gt_release_state *rel = local_rel(dev);
    return gt_release_pin(rel, program);
}

gt_err gt_device_outputs_get(gt_device *dev, gt_device_outputs *now)
{
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_outputs_get(dev->impl, now);
    }
    gt_release_state *rel = local_rel(dev);
    GT_ENSURE(rel->declared, GT_E_NOTFOUND, "device: no outputs declared");
    *now = rel->rules;
    return GT_OK;
}

// ---- sim travelling ---------------------------------------------------------------------------

gt_err gt_device_sim_lend(gt_device *dev, uint32_t lease_ms,
                          uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    GT_ENSURE(dev->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_lend(dev->impl, lease_ms, ticket);
}

gt_err gt_device_sim_wait_return(gt_device *dev, int timeout_ms, gt_device_sim_loaded *loaded,
                                 size_t cap, size_t *count)
{
    GT_ENSURE(dev->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    *count = 0;
    double end = gt_now_seconds() + timeout_ms / 1000.0;
    long backoff_us = 500;
    for (;;) {
        uint32_t state = 0, code = 0;
        size_t n = 0;
        GT_TRY(gt_device_sim_impl_trip(dev->impl, &state, &code, loaded, cap, &n));
        switch (state) {
        case GT_SIM_TRIP_AT_TRAINER:
            return gt_errf(GT_E_STATE, "device: not lent");
        case GT_SIM_TRIP_RETURNED:
            *count = n;
            GT_ENSURE(n <= cap, GT_E_LIMIT, "device: %zu buffers loaded (room for %zu)", n, cap);
            return GT_OK;
        case GT_SIM_TRIP_FAILED:
            return gt_errf(code > GT_E_NONE && code <= GT_E_TIMEOUT ? (gt_code)code : GT_E_PEER,
                           "device: the trip failed (%s); its buffers were wiped and the "
                           "device is back", gt_code_text((gt_code)code));
        default:
            break;
        }
        if (timeout_ms > 0 && gt_now_seconds() >= end) {
            return gt_errf(GT_E_TIMEOUT, "device: still lent (%s) after %d ms",
                           gt_sim_trip_state_name(state), timeout_ms);
        }
        // Back off from 0.5 ms to 8 ms: a trip that is already over (the usual case: the holder
        // said TRAVELLED) costs one status round trip, a long one little CPU.
        struct timespec ts = {.tv_sec = 0, .tv_nsec = backoff_us * 1000L};
        nanosleep(&ts, NULL);
        backoff_us = backoff_us < 8000 ? backoff_us * 2 : 8000;
    }
}

gt_err gt_device_sim_recall(gt_device *dev)
{
    GT_ENSURE(dev->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_recall(dev->impl);
}

gt_err gt_device_sim_attach(gt_device **holder, const gt_device_config *cfg,
                            const gt_device_sim_options *opt,
                            const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    *holder = NULL;
    gt_device *dev = NULL;
    GT_TRY(gt_device_open_sim(&dev, cfg, opt));
    gt_err err = gt_device_sim_impl_attach(dev->impl, ticket);
    if (!gt_is_ok(err)) {
        gt_device_close(dev);
        return err;
    }
    *holder = dev;
    return GT_OK;
}

gt_err gt_device_sim_load_sealed(gt_device *holder, gt_dbuf dst, uint64_t dst_offset,
                                 const uint8_t *ct_and_tag, uint64_t len, const uint8_t iv[12],
                                 const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                 const uint8_t key[32], uint32_t seg_bytes)
{
    GT_ENSURE(holder->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_load_sealed(holder->impl, dst, dst_offset, ct_and_tag, len, iv, aad,
                                          key, seg_bytes);
}

gt_err gt_device_sim_load_sealed_fd(gt_device *holder, gt_dbuf dst, uint64_t dst_offset, int fd,
                                    uint64_t file_offset, uint64_t len, const uint8_t iv[12],
                                    const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                    const uint8_t key[32], uint32_t seg_bytes)
{
    GT_ENSURE(holder->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_load_sealed_fd(holder->impl, dst, dst_offset, fd, file_offset, len,
                                             iv, aad, key, seg_bytes);
}

gt_err gt_device_sim_load_sealed_wrapped(gt_device *holder, gt_dbuf dst, uint64_t dst_offset,
                                         int fd, uint64_t file_offset, uint64_t len,
                                         const uint8_t iv[GT_AEAD_IV_BYTES],
                                         const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                         const uint8_t wrapped[GT_KEYWRAP_BYTES],
                                         uint32_t seg_bytes)
{
    GT_ENSURE(holder->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_load_sealed_wrapped(holder->impl, dst, dst_offset, fd, file_offset,
                                                  len, iv, aad, wrapped, seg_bytes);
}

gt_err gt_device_sim_session_binding(gt_device *holder, uint8_t server_pub[GT_X25519_BYTES],
                                     uint8_t server_hello_hash[GT_SHA256_BYTES])
{
    GT_ENSURE(holder->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    gt_device_sim_impl_session_binding(holder->impl, server_pub, server_hello_hash);
    return GT_OK;
}

gt_err gt_device_sim_session_hellos(gt_device *holder, gt_span *client_hello,
                                    gt_span *server_hello)
{
    GT_ENSURE(holder->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    gt_device_sim_impl_session_hellos(holder->impl, client_hello, server_hello);
    return GT_OK;
}

gt_err gt_device_sim_return(gt_device *holder)
{
    GT_ENSURE(holder->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_return(holder->impl);
}

gt_err gt_device_sim_return_stay(gt_device *holder)
{
    GT_ENSURE(holder->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_return_stay(holder->impl);
}

gt_err gt_device_sim_reattach(gt_device *holder, const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    GT_ENSURE(holder->kind == GT_DEVICE_SIM, GT_E_UNSUPPORTED, "device: not a sim device");
    return gt_device_sim_impl_reattach(holder->impl, ticket);
}

// ---- peers (issue 16) -----------------------------------------------------------------------------
// cpu and cuda: the trainer's attested process owns the device (as for declared outputs), so the
// peer core (hellos, admission, keys, sequence numbers, the wire format) runs here; cpu seals and
// opens the buffer table's host memory with OpenSSL, cuda hands the core a range of GPU memory
// that its GCM kernels encrypt and authenticate on the device (cuda_backend.c). sim sends each
// call to devd, which runs the same core on its arena.

static gt_err peer_local(gt_device *dev, const char *what)
{
    GT_ENSURE(dev->kind == GT_DEVICE_CPU || dev->kind == GT_DEVICE_CUDA, GT_E_UNSUPPORTED,
              "device: %s on %s has no peers", what, gt_device_kind_name(dev->kind));
    if (dev->peer == NULL) {
        GT_TRY(gt_peer_core_new(&dev->peer));
    }
    return GT_OK;
}

gt_err gt_device_peer_hello(gt_device *dev, uint32_t rank, uint32_t nranks, uint8_t *hello,
                            size_t cap, size_t *len)
{
    *len = 0;
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_peer_hello(dev->impl, rank, nranks, hello, cap, len);
    }
    GT_TRY(peer_local(dev, "peer_hello"));
    gt_release_state *rel = local_rel(dev);
    GT_ENSURE(rel->declared, GT_E_STATE, "device: declare the agreement's outputs before a peer "
              "hello (its rules say which peers to admit)");
    gt_peer_identity id = {
        .kind = GT_PEER_KIND_INPROC,
        .produce = dev->attester.produce ? dev->attester.produce : gt_sim_default_client_produce,
        .produce_ctx = dev->attester.ctx,
    };
    return gt_peer_core_hello(dev->peer, &rel->rules.peers, &id, rank, nranks, hello, cap, len);
}

gt_err gt_device_peer_admit(gt_device *dev, uint32_t peer_rank, const uint8_t *hello, size_t len)
{
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_peer_admit(dev->impl, peer_rank, hello, len);
    }
    GT_TRY(peer_local(dev, "peer_admit"));
    return gt_peer_core_admit(dev->peer, peer_rank, (gt_span){hello, len});
}

gt_err gt_device_peer_run_id(gt_device *dev, uint8_t run[16])
{
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_peer_run_id(dev->impl, run);
    }
    GT_TRY(peer_local(dev, "peer_run_id"));
    return gt_peer_core_run_id(dev->peer, run);
}

// The in-process backends' floats of h in buf: checked against the buffer (range, policy) and,
// on a paging device, made resident for the in-place seal or open.
static gt_err peer_floats(gt_device *dev, const gt_peer_hdr *h, gt_dbuf buf, const char *what,
                          bool write, gt_buftab_entry **e, uint8_t **floats)
{
    GT_TRY(peer_local(dev, what));
    uint64_t off = 0, n = 0;
    GT_TRY(gt_peer_hdr_bytes(h, &off, &n));
    GT_TRY(gt_buftab_access(local_tab(dev), buf, 0, off, n, what, e));
    GT_TRY(gt_device_cpu_hold(dev->impl, *e, off, n, write));
    *floats = (*e)->at.host + off;
    return GT_OK;
}

gt_err gt_device_peer_seal(gt_device *dev, const gt_peer_hdr *h, gt_dbuf buf, uint8_t *out,
                           size_t cap, size_t *outlen)
{
    *outlen = 0;
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_peer_seal(dev->impl, h, buf, out, cap, outlen);
    }
#ifdef GT_HAVE_CUDA
    if (dev->kind == GT_DEVICE_CUDA) {
        GT_TRY(peer_local(dev, "peer_seal"));
        return gt_cuda_backend_peer_seal(dev->impl, dev->peer, h, buf, out, cap, outlen);
    }
#endif
    gt_buftab_entry *e = NULL;
    uint8_t *floats = NULL;
    GT_TRY(peer_floats(dev, h, buf, "peer_seal", false, &e, &floats));
    return gt_peer_core_seal(dev->peer, local_tab(dev), e->label, h, floats, out, cap, outlen);
}

gt_err gt_device_peer_open(gt_device *dev, const gt_peer_hdr *h, const uint8_t *in, size_t len,
                           gt_dbuf buf, int mode)
{
    if (dev->ops->local == NULL) {
        return gt_device_sim_impl_peer_open(dev->impl, h, in, len, buf, mode);
    }
#ifdef GT_HAVE_CUDA
    if (dev->kind == GT_DEVICE_CUDA) {
        GT_TRY(peer_local(dev, "peer_open"));
        return gt_cuda_backend_peer_open(dev->impl, dev->peer, h, (gt_span){in, len}, buf, mode);
    }
#endif
    gt_buftab_entry *e = NULL;
    uint8_t *floats = NULL;
    GT_TRY(peer_floats(dev, h, buf, "peer_open", true, &e, &floats));
    return gt_peer_core_open(dev->peer, local_tab(dev), buf, h, (gt_span){in, len}, floats, mode);
}

gt_err gt_device_paging_stats(gt_device *dev, gt_pager_stats *st)
{
    void *impl = gt_device_backend_impl(dev, GT_DEVICE_CPU);
    GT_ENSURE(impl != NULL, GT_E_UNSUPPORTED,
              "device: paging counters are the cpu backend's (sim: gt_device_sim_stat_get)");
    return gt_device_cpu_paging_stats(impl, st);
}

gt_pager *gt_device_test_pager(gt_device *dev)
{
    void *impl = gt_device_backend_impl(dev, GT_DEVICE_CPU);
    return impl != NULL ? gt_device_cpu_pager(impl) : NULL;
}
