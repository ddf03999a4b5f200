// The sim device backend: a device session with gputravel devd (devproto.h gt_sim_conn) behind
// the device API. Control messages go AEAD-protected over the Unix socket; bulk data is sealed
// straight into the shared bounce slots, and the client keeps sealing the next slots while devd
// opens the earlier ones.
#include "sim_client.h"

#include <gputravel/devproto.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define SIM_REATTACH_TIMEOUT_MS 2000

// ---- the backend ------------------------------------------------------------------------------

static gt_err sim_alloc(void *impl, uint64_t bytes, uint32_t flags, gt_dbuf *out)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_ALLOC, .len = bytes, .flags = flags}, rep;
    GT_TRY(gt_sim_conn_rpc(impl, &req, GT_SIM_REP_HANDLE, &rep));
    *out = rep.handle;
    return GT_OK;
}

static gt_err sim_free(void *impl, gt_dbuf buf)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_FREE, .handle = buf}, rep;
    return gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

static gt_err sim_buf_size(void *impl, gt_dbuf buf, uint64_t *bytes)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_SIZE, .handle = buf}, rep;
    GT_TRY(gt_sim_conn_rpc(impl, &req, GT_SIM_REP_SIZE, &rep));
    *bytes = rep.len;
    return GT_OK;
}

static gt_err sim_memset(void *impl, gt_dbuf buf, uint64_t offset, int value, uint64_t len)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_MEMSET, .handle = buf, .offset = offset,
                      .value = (uint32_t)(unsigned char)value, .len = len}, rep;
    return gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

static uint64_t chunk_count(uint64_t len, uint64_t chunk)
{
    return len / chunk + (len % chunk != 0);
}

static gt_err sim_copy_in(void *impl, gt_dbuf dst, uint64_t dst_offset, const void *src,
                          uint64_t len)
{
    gt_sim_conn *c = impl;
    gt_sim_msg req = {.type = GT_SIM_REQ_COPY_IN, .handle = dst, .offset = dst_offset, .len = len};
    gt_sim_msg m;
    GT_TRY(gt_sim_conn_rpc(c, &req, GT_SIM_REP_STATUS, &m));
    uint64_t chunk = GT_SIM_BULK_CHUNK(c->slot_bytes);
    uint64_t n = chunk_count(len, chunk);
    const uint8_t *p = src;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t slot = (uint32_t)(i % c->slot_count);
        if (i >= c->slot_count) {  // wait until devd has opened what this slot held
            GT_TRY(gt_sim_conn_recv(c, &m));
            if (m.type != GT_SIM_MSG_SLOT_FREE || m.slot != slot) {
                return gt_sim_conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s during "
                                            "copy_in", gt_sim_msg_name(m.type)));
            }
        }
        uint64_t want = len - i * chunk < chunk ? len - i * chunk : chunk;
        uint8_t aad[GT_SIM_BULK_AAD_BYTES], iv[GT_AEAD_IV_BYTES];
        size_t ct_len = 0;
        gt_sim_bulk_aad(aad, dst, dst_offset + i * chunk, (uint32_t)want);
        GT_TRY(gt_sim_iv_next(&c->keys, GT_SIM_STREAM_BULK_C2S, iv));
        gt_err e = gt_aead_seal(c->bounce + (size_t)slot * c->slot_bytes, c->slot_bytes, &ct_len,
                                p + i * chunk, (size_t)want, aad, sizeof aad, iv,
                                gt_sim_stream_key(&c->keys, GT_SIM_STREAM_BULK_C2S));
        if (!gt_is_ok(e)) {
            return gt_sim_conn_fail(c, e);
        }
        gt_sim_msg ready = {.type = GT_SIM_MSG_CHUNK, .slot = slot, .len = want};
        GT_TRY(gt_sim_conn_send(c, &ready));
    }
    GT_TRY(gt_sim_conn_recv(c, &m));
    if (m.type != GT_SIM_REP_STATUS) {
        return gt_sim_conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s after copy_in",
                                    gt_sim_msg_name(m.type)));
    }
    return gt_sim_status_err(&m.status);
}

static gt_err sim_copy_out(void *impl, void *dst, gt_dbuf src, uint64_t src_offset, uint64_t len)
{
    gt_sim_conn *c = impl;
    gt_sim_msg req = {.type = GT_SIM_REQ_COPY_OUT, .handle = src, .offset = src_offset,
                      .len = len};
    gt_sim_msg m;
    GT_TRY(gt_sim_conn_rpc(c, &req, GT_SIM_REP_STATUS, &m));
    uint64_t chunk = GT_SIM_BULK_CHUNK(c->slot_bytes);
    uint64_t n = chunk_count(len, chunk);
    uint8_t *p = dst;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t slot = (uint32_t)(i % c->slot_count);
        uint64_t want = len - i * chunk < chunk ? len - i * chunk : chunk;
        GT_TRY(gt_sim_conn_recv(c, &m));
        if (m.type != GT_SIM_MSG_CHUNK || m.slot != slot || m.len != want) {
            return gt_sim_conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s during copy_out",
                                        gt_sim_msg_name(m.type)));
        }
        uint8_t aad[GT_SIM_BULK_AAD_BYTES], iv[GT_AEAD_IV_BYTES];
        size_t pt_len = 0;
        gt_sim_bulk_aad(aad, src, src_offset + i * chunk, (uint32_t)want);
        GT_TRY(gt_sim_iv_next(&c->keys, GT_SIM_STREAM_BULK_S2C, iv));
        gt_err e = gt_aead_open(p + i * chunk, (size_t)want, &pt_len,
                                c->bounce + (size_t)slot * c->slot_bytes,
                                (size_t)want + GT_AEAD_TAG_BYTES, aad, sizeof aad, iv,
                                gt_sim_stream_key(&c->keys, GT_SIM_STREAM_BULK_S2C));
        if (!gt_is_ok(e)) {
            gt_secure_zero(dst, (size_t)len);
            return gt_sim_conn_fail(c, gt_errf(GT_E_AUTH, "sim device: copy_out chunk "
                                        "authentication failed"));
        }
        if (i + c->slot_count < n) {
            gt_sim_msg f = {.type = GT_SIM_MSG_SLOT_FREE, .slot = slot};
            GT_TRY(gt_sim_conn_send(c, &f));
        }
    }
    return GT_OK;
}

static gt_err sim_launch(void *impl, const gt_op *op)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_LAUNCH, .op = *op}, rep;
    return gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

static gt_err sim_sync(void *impl)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_SYNC}, rep;
    return gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

static void sim_close(void *impl)
{
    if (impl == NULL) {
        return;
    }
    gt_sim_conn_close(impl);
    free(impl);
}

static const gt_device_backend sim_backend = {
    .name = "sim",
    .alloc = sim_alloc,
    .free = sim_free,
    .buf_size = sim_buf_size,
    .copy_in = sim_copy_in,
    .copy_out = sim_copy_out,
    .memset = sim_memset,
    .launch = sim_launch,
    .sync = sim_sync,
    .close = sim_close,
};

gt_err gt_device_sim_open_opts(const gt_device_config *cfg, const gt_device_sim_options *opt,
                               void **impl, const gt_device_backend **ops)
{
    *impl = NULL;
    *ops = NULL;
    gt_sim_conn *c = calloc(1, sizeof *c);
    GT_ENSURE(c != NULL, GT_E_NOMEM, "sim device: out of memory");
    gt_err err = gt_sim_conn_open(c, cfg->socket_path, opt);
    const double give_up = gt_now_seconds() + opt->busy_wait_ms / 1000.0;
    long backoff_ms = 20;
    while (err.code == GT_E_STATE && strstr(err.msg, "device busy") != NULL &&
           gt_now_seconds() < give_up) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = backoff_ms * 1000000L};
        nanosleep(&ts, NULL);
        backoff_ms = backoff_ms < 320 ? 2 * backoff_ms : 320;
        err = gt_sim_conn_open(c, cfg->socket_path, opt);
    }
    if (!gt_is_ok(err)) {
        free(c);
        return err;
    }
    *impl = c;
    *ops = &sim_backend;
    return GT_OK;
}

gt_err gt_device_sim_open(const gt_device_config *cfg, void **impl, const gt_device_backend **ops)
{
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    return gt_device_sim_open_opts(cfg, &opt, impl, ops);
}

gt_err gt_device_sim_impl_stat(void *impl, gt_device_sim_stat *stat)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_STAT}, rep;
    GT_TRY(gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STAT, &rep));
    *stat = (gt_device_sim_stat){.sessions = rep.stat.sessions,
                                 .bytes_in_use = rep.stat.bytes_in_use,
                                 .bytes_wiped = rep.stat.bytes_wiped,
                                 .buffers_live = rep.stat.buffers_live,
                                 .mem_limit = rep.stat.mem_limit,
                                 .paging = {.page_bytes = rep.stat.page_bytes,
                                            .cap = rep.stat.paging_cap,
                                            .resident_bytes = rep.stat.resident,
                                            .peak_resident = rep.stat.peak_resident,
                                            .evicted_bytes = rep.stat.evicted,
                                            .page_outs = rep.stat.page_outs,
                                            .fault_ins = rep.stat.fault_ins,
                                            .clean_drops = rep.stat.clean_drops,
                                            .prefetch = rep.stat.prefetch != 0,
                                            .demand_faults = rep.stat.demand_faults,
                                            .prefetch_issued = rep.stat.prefetch_issued,
                                            .prefetch_hits = rep.stat.prefetch_hits,
                                            .prefetch_wasted = rep.stat.prefetch_wasted,
                                            .assist_faults = rep.stat.assist_faults,
                                            .pre_evictions = rep.stat.pre_evictions,
                                            .mispredicts = rep.stat.mispredicts,
                                            .map_calls = rep.stat.map_calls,
                                            .ops_in_parts = rep.stat.ops_in_parts,
                                            .discards = rep.stat.discards}};
    return GT_OK;
}

gt_err gt_device_sim_impl_evidence(void *impl, gt_span *evidence,
                                   uint8_t report_data[GT_REPORT_DATA_BYTES])
{
    gt_sim_conn *c = impl;
    *evidence = gt_buf_span(&c->device_evidence);
    memcpy(report_data, c->device_report_data, GT_REPORT_DATA_BYTES);
    return GT_OK;
}

gt_err gt_device_sim_impl_measurement(void *impl, uint8_t out[GT_MEASUREMENT_BYTES])
{
    return gt_sim_conn_measurement(impl, out);
}

// ---- travelling -------------------------------------------------------------------------------

gt_err gt_device_sim_impl_lend(void *impl, uint32_t lease_ms,
                               uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    gt_sim_msg req = {.type = GT_SIM_REQ_LEND, .ms = lease_ms}, rep;
    gt_err err = gt_sim_conn_rpc(impl, &req, GT_SIM_REP_TICKET, &rep);
    if (gt_is_ok(err)) {
        memcpy(ticket, rep.ticket, GT_SIM_TICKET_BYTES);
    }
    gt_secure_zero(&rep, sizeof rep);
    return err;
}

gt_err gt_device_sim_impl_trip(void *impl, uint32_t *state, uint32_t *code,
                               gt_device_sim_loaded *loaded, size_t cap, size_t *count)
{
    gt_sim_conn *c = impl;
    gt_sim_msg req = {.type = GT_SIM_REQ_TRIP_STATUS}, rep;
    GT_TRY(gt_sim_conn_rpc(c, &req, GT_SIM_REP_TRIP, &rep));
    *state = rep.state;
    *code = rep.code;
    *count = rep.count;
    for (uint32_t i = 0; i < rep.count; i++) {  // always read them all: the session goes on
        gt_sim_msg l;
        GT_TRY(gt_sim_conn_recv(c, &l));
        if (l.type != GT_SIM_REP_LOADED) {
            return gt_sim_conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s in a trip report",
                                        gt_sim_msg_name(l.type)));
        }
        if (i < cap) {
            loaded[i] = (gt_device_sim_loaded){.buf = l.handle, .bytes = l.len};
        }
    }
    return GT_OK;
}

gt_err gt_device_sim_impl_recall(void *impl)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_RECALL}, rep;
    return gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

gt_err gt_device_sim_impl_attach(void *impl, const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    return gt_sim_conn_attach(impl, ticket);
}

// The plaintext bytes of a sealed chunk body of len bytes (ciphertext and tags: one tag, or one
// per segment of seg_bytes, seal.h's GTCHUNK2): every segment but the last holds seg_bytes and a
// tag, the last 1..seg_bytes and its tag.
static gt_err sealed_plain_len(uint64_t len, uint32_t seg_bytes, uint64_t *pt_len)
{
    uint64_t step = (uint64_t)seg_bytes + GT_AEAD_TAG_BYTES;
    uint64_t nseg = seg_bytes == 0 ? 1 : (len + step - 1) / step;
    GT_ENSURE(len > GT_AEAD_TAG_BYTES * nseg || (seg_bytes == 0 && len == GT_AEAD_TAG_BYTES),
              GT_E_ARG, "sim device: a sealed chunk of %llu bytes holds no data beyond its tags",
              (unsigned long long)len);
    *pt_len = len - GT_AEAD_TAG_BYTES * nseg;
    return GT_OK;
}

gt_err gt_device_sim_impl_load_sealed(void *impl, gt_dbuf dst, uint64_t dst_offset,
                                      const uint8_t *ct_and_tag, uint64_t len,
                                      const uint8_t iv[GT_AEAD_IV_BYTES],
                                      const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                      const uint8_t key[GT_AEAD_KEY_BYTES], uint32_t seg_bytes)
{
    gt_sim_conn *c = impl;
    uint64_t pt_len = 0;
    GT_TRY(sealed_plain_len(len, seg_bytes, &pt_len));
    gt_sim_msg req = {.type = GT_SIM_REQ_LOAD_SEALED, .handle = dst, .offset = dst_offset,
                      .len = pt_len, .seg_bytes = seg_bytes};
    memcpy(req.iv, iv, sizeof req.iv);
    memcpy(req.aad, aad, sizeof req.aad);
    memcpy(req.key, key, sizeof req.key);
    gt_sim_msg m;
    gt_err err = gt_sim_conn_rpc(c, &req, GT_SIM_REP_STATUS, &m);
    gt_secure_zero(&req, sizeof req);  // the chunk key
    GT_TRY(err);
    // ciphertext || tag as stored: no second encryption (GCM's tag protects it end to end)
    uint64_t sb = c->slot_bytes;
    uint64_t n = chunk_count(len, sb);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t slot = (uint32_t)(i % c->slot_count);
        if (i >= c->slot_count) {
            GT_TRY(gt_sim_conn_recv(c, &m));
            if (m.type != GT_SIM_MSG_SLOT_FREE || m.slot != slot) {
                return gt_sim_conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s during "
                                            "load_sealed", gt_sim_msg_name(m.type)));
            }
        }
        uint64_t want = len - i * sb < sb ? len - i * sb : sb;
        memcpy(c->bounce + (size_t)slot * sb, ct_and_tag + i * sb, (size_t)want);
        gt_sim_msg ready = {.type = GT_SIM_MSG_CHUNK, .slot = slot, .len = want};
        GT_TRY(gt_sim_conn_send(c, &ready));
    }
    GT_TRY(gt_sim_conn_recv(c, &m));
    if (m.type != GT_SIM_REP_STATUS) {
        return gt_sim_conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s after load_sealed",
                                    gt_sim_msg_name(m.type)));
    }
    return gt_sim_status_err(&m.status);
}

gt_err gt_device_sim_impl_return(void *impl)
{
    gt_sim_conn *c = impl;
    GT_ENSURE(c->holder, GT_E_STATE, "sim device: return: this session is not attached to a "
              "lent device");
    gt_sim_msg req = {.type = GT_SIM_REQ_RETURN}, rep;
    GT_TRY(gt_sim_conn_rpc(c, &req, GT_SIM_REP_STATUS, &rep));
    // devd ends the holder's session now; wait until it has (the device is the trainer's again)
    gt_sim_watch w = {.fd = -1, .timeout_ms = 5000};
    uint8_t sink[64];
    size_t n = 0;
    gt_err e = gt_sim_frame_recv(c->fd, sink, sizeof sink, &n, NULL, &w);
    (void)e;
    c->broken = true;  // every later call: "the session has ended"
    return GT_OK;
}

gt_err gt_device_sim_impl_return_stay(void *impl)
{
    gt_sim_conn *c = impl;
    GT_ENSURE(c->holder, GT_E_STATE, "sim device: return: this session is not attached to a "
              "lent device");
    gt_sim_msg req = {.type = GT_SIM_REQ_RETURN_STAY}, rep;
    GT_TRY(gt_sim_conn_rpc(c, &req, GT_SIM_REP_STATUS, &rep));
    c->holder = false;
    c->parked = true;  // the device is the trainer's again; this session waits for a reattach
    return GT_OK;
}

gt_err gt_device_sim_impl_reattach(void *impl, const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    gt_sim_conn *c = impl;
    GT_ENSURE(c->parked && !c->broken, GT_E_STATE,
              "sim device: reattach: this session is not parked after a trip");
    // While lent or idle devd answers a parked session at once; no answer soon means the lend
    // is over and the trainer has its device again (devd reads parked sessions only at the
    // next lend): give up quickly rather than hold the trip for the whole reply timeout.
    const int timeout_ms = c->watch.timeout_ms;
    if (timeout_ms <= 0 || timeout_ms > SIM_REATTACH_TIMEOUT_MS) {
        c->watch.timeout_ms = SIM_REATTACH_TIMEOUT_MS;
    }
    gt_err err = gt_device_sim_impl_attach(c, ticket);
    c->watch.timeout_ms = timeout_ms;
    c->parked = false;
    if (!gt_is_ok(err)) {
        c->broken = true;  // devd ends a parked session whose attach it refused
    }
    return err;
}

// LOAD_SEALED_FD and LOAD_SEALED_WRAPPED: req carries its type and key material; the chunk's
// ciphertext || tag (len bytes) is read by devd from fd. req is wiped (it may hold a key).
static gt_err load_from_file(gt_sim_conn *c, gt_sim_msg *req, gt_dbuf dst, uint64_t dst_offset,
                             int fd, uint64_t file_offset, uint64_t len,
                             const uint8_t iv[GT_AEAD_IV_BYTES],
                             const uint8_t aad[GT_SIM_LOAD_AAD_BYTES], uint32_t seg_bytes)
{
    uint64_t pt_len = 0;
    gt_err err = sealed_plain_len(len, seg_bytes, &pt_len);
    if (!gt_is_ok(err)) {
        // named there
    } else if (fd < 0) {
        err = gt_errf(GT_E_ARG, "sim device: loading a sealed chunk: no file");
    } else {
        req->handle = dst;
        req->offset = dst_offset;
        req->len = pt_len;
        req->seg_bytes = seg_bytes;
        req->file_offset = file_offset;
        memcpy(req->iv, iv, sizeof req->iv);
        memcpy(req->aad, aad, sizeof req->aad);
        err = gt_sim_conn_send_fd(c, req, fd);
    }
    gt_secure_zero(req, sizeof *req);
    GT_TRY(err);
    gt_sim_msg m;
    return gt_sim_conn_recv_reply(c, GT_SIM_REP_STATUS, &m);
}

gt_err gt_device_sim_impl_load_sealed_fd(void *impl, gt_dbuf dst, uint64_t dst_offset, int fd,
                                         uint64_t file_offset, uint64_t len,
                                         const uint8_t iv[GT_AEAD_IV_BYTES],
                                         const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                         const uint8_t key[GT_AEAD_KEY_BYTES], uint32_t seg_bytes)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_LOAD_SEALED_FD};
    memcpy(req.key, key, sizeof req.key);
    return load_from_file(impl, &req, dst, dst_offset, fd, file_offset, len, iv, aad, seg_bytes);
}

gt_err gt_device_sim_impl_load_sealed_wrapped(void *impl, gt_dbuf dst, uint64_t dst_offset,
                                              int fd, uint64_t file_offset, uint64_t len,
                                              const uint8_t iv[GT_AEAD_IV_BYTES],
                                              const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                              const uint8_t wrapped[GT_KEYWRAP_BYTES],
                                              uint32_t seg_bytes)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_LOAD_SEALED_WRAPPED};
    memcpy(req.wrapped, wrapped, sizeof req.wrapped);
    return load_from_file(impl, &req, dst, dst_offset, fd, file_offset, len, iv, aad, seg_bytes);
}

void gt_device_sim_impl_session_binding(void *impl, uint8_t server_pub[GT_X25519_BYTES],
                                        uint8_t server_hello_hash[GT_SHA256_BYTES])
{
    gt_sim_conn *c = impl;
    memcpy(server_pub, c->keys.server_pub, GT_X25519_BYTES);
    memcpy(server_hello_hash, c->keys.server_hello_hash, GT_SHA256_BYTES);
}

void gt_device_sim_impl_session_hellos(void *impl, gt_span *client_hello, gt_span *server_hello)
{
    gt_sim_conn *c = impl;
    *client_hello = gt_buf_span(&c->client_hello);
    *server_hello = gt_buf_span(&c->server_hello);
}

// ---- labels and declared outputs (device.h) ---------------------------------------------------

gt_err gt_device_sim_impl_label_add(void *impl, gt_dbuf buf, const uint8_t id[GT_LABEL_ID_BYTES])
{
    gt_sim_msg req = {.type = GT_SIM_REQ_LABEL_ADD, .handle = buf}, rep;
    memcpy(req.label_ids[0], id, GT_LABEL_ID_BYTES);
    return gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

gt_err gt_device_sim_impl_label_get(void *impl, gt_dbuf buf, size_t *count,
                                    uint8_t (*ids)[GT_LABEL_ID_BYTES], size_t cap)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_LABEL_GET, .handle = buf}, rep;
    GT_TRY(gt_sim_conn_rpc(impl, &req, GT_SIM_REP_LABEL, &rep));
    *count = rep.count;
    for (size_t i = 0; i < rep.label_n && i < cap; i++) {
        memcpy(ids[i], rep.label_ids[i], GT_LABEL_ID_BYTES);
    }
    return GT_OK;
}

// The bytes go into a device buffer by the ordinary encrypted copy_in; devd reads them from its
// own memory, so it parses exactly what it hashed.
static gt_err send_document(void *impl, uint16_t type, gt_span doc)
{
    GT_ENSURE(doc.len > 0, GT_E_ARG, "device: %s needs the document's bytes",
              gt_sim_msg_name(type));
    gt_dbuf b = 0;
    GT_TRY(sim_alloc(impl, doc.len, 0, &b));
    gt_err e = sim_copy_in(impl, b, 0, doc.data, doc.len);
    if (gt_is_ok(e)) {
        gt_sim_msg req = {.type = type, .handle = b, .len = doc.len}, rep;
        e = gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
    }
    gt_err f = sim_free(impl, b);
    return gt_is_ok(e) ? f : e;
}

gt_err gt_device_sim_impl_declare(void *impl, gt_span agreement)
{
    return send_document(impl, GT_SIM_REQ_DECLARE, agreement);
}

gt_err gt_device_sim_impl_pin(void *impl, gt_span program)
{
    return send_document(impl, GT_SIM_REQ_PIN, program);
}

gt_err gt_device_sim_impl_outputs_get(void *impl, gt_device_outputs *now)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_OUTPUTS}, rep;
    GT_TRY(gt_sim_conn_rpc(impl, &req, GT_SIM_REP_OUTPUTS, &rep));
    const gt_sim_outputs *o = &rep.outputs;
    *now = (gt_device_outputs){.loss = o->loss, .loss_mantissa_bits = o->loss_bits,
                               .loss_budget = o->loss_budget, .grad_norm = o->grad_norm,
                               .grad_norm_budget = o->grad_norm_budget,
                               .checkpoint = o->checkpoint, .resume = o->resume};
    return GT_OK;
}

// ---- peers (issue 16) ---------------------------------------------------------------------------
// devd holds the run: these only move the hello and the chunks. Both cross as ordinary buffers
// through the AEAD bounce slots: the client copies a peer's hello or chunk into a fresh buffer
// for devd to read, and copies out (then frees) the buffer devd wrote its hello or sealed chunk
// into. The chunk is ciphertext already; the hello is public.

// Copies out and frees the buffer devd answered with (EXPORTED), whatever happened.
static gt_err fetch_reply(void *impl, const gt_sim_msg *rep, uint8_t *out, size_t cap,
                          size_t *len)
{
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, rep->len > 0 && rep->len <= cap, done, GT_E_LIMIT,
                   "sim device: devd answered with %llu bytes (room for %zu)",
                   (unsigned long long)rep->len, cap);
    GT_TRY_GOTO(err, sim_copy_out(impl, out, rep->handle, 0, rep->len), done);
    *len = (size_t)rep->len;
done: {
    gt_err f = sim_free(impl, rep->handle);
    return gt_is_ok(err) ? f : err;
}
}

static gt_err put_bytes(void *impl, const uint8_t *p, size_t len, gt_dbuf *b)
{
    GT_ENSURE(len > 0, GT_E_ARG, "sim device: nothing to send");
    GT_TRY(sim_alloc(impl, len, 0, b));
    gt_err e = sim_copy_in(impl, *b, 0, p, len);
    if (!gt_is_ok(e)) {
        gt_err f = sim_free(impl, *b);
        (void)f;
    }
    return e;
}

static gt_sim_peer peer_fields(const gt_peer_hdr *h)
{
    gt_sim_peer p = {.step = h->step, .elem_off = h->elem_off, .nelem = h->nelem,
                     .bucket = h->bucket, .hop = h->hop, .src = h->src, .dst = h->dst};
    memcpy(p.run, h->run, sizeof p.run);
    return p;
}

gt_err gt_device_sim_impl_peer_hello(void *impl, uint32_t rank, uint32_t nranks, uint8_t *hello,
                                     size_t cap, size_t *len)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_PEER_HELLO, .peer = {.rank = rank, .nranks = nranks}};
    gt_sim_msg rep;
    GT_TRY(gt_sim_conn_rpc(impl, &req, GT_SIM_REP_EXPORTED, &rep));
    return fetch_reply(impl, &rep, hello, cap, len);
}

gt_err gt_device_sim_impl_peer_admit(void *impl, uint32_t peer_rank, const uint8_t *hello,
                                     size_t len)
{
    GT_ENSURE(len <= GT_PEER_HELLO_MAX, GT_E_LIMIT, "device: a hello of %zu bytes", len);
    gt_dbuf b = 0;
    GT_TRY(put_bytes(impl, hello, len, &b));
    gt_sim_msg req = {.type = GT_SIM_REQ_PEER_ADMIT, .handle = b, .len = len,
                      .peer = {.rank = peer_rank}};
    gt_sim_msg rep;
    gt_err e = gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
    gt_err f = sim_free(impl, b);
    return gt_is_ok(e) ? f : e;
}

gt_err gt_device_sim_impl_peer_run_id(void *impl, uint8_t run[16])
{
    gt_sim_msg req = {.type = GT_SIM_REQ_PEER_RUN_ID}, rep;
    GT_TRY(gt_sim_conn_rpc(impl, &req, GT_SIM_REP_PEER_RUN, &rep));
    memcpy(run, rep.peer.run, 16);
    return GT_OK;
}

gt_err gt_device_sim_impl_peer_seal(void *impl, const gt_peer_hdr *h, gt_dbuf buf, uint8_t *out,
                                    size_t cap, size_t *outlen)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_PEER_SEAL, .handle = buf, .peer = peer_fields(h)};
    gt_sim_msg rep;
    GT_TRY(gt_sim_conn_rpc(impl, &req, GT_SIM_REP_EXPORTED, &rep));
    return fetch_reply(impl, &rep, out, cap, outlen);
}

gt_err gt_device_sim_impl_peer_open(void *impl, const gt_peer_hdr *h, const uint8_t *in,
                                    size_t len, gt_dbuf buf, int mode)
{
    GT_ENSURE(len <= gt_peer_chunk_bytes(h->nelem), GT_E_AUTH, "device: a chunk of %zu bytes "
              "for %llu floats", len, (unsigned long long)h->nelem);
    gt_dbuf c = 0;
    GT_TRY(put_bytes(impl, in, len, &c));
    gt_sim_msg req = {.type = GT_SIM_REQ_PEER_OPEN, .handle = buf, .peer = peer_fields(h)};
    req.peer.mode = (uint32_t)mode;
    req.peer.chunk = c;
    req.peer.chunk_len = len;
    gt_sim_msg rep;
    gt_err e = gt_sim_conn_rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
    gt_err f = sim_free(impl, c);
    return gt_is_ok(e) ? f : e;
}
