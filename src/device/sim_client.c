// The sim device backend: the client end of an attested session with gputravel devd. Control
// messages go AEAD-protected over the Unix socket; bulk data is sealed straight into the shared
// bounce slots, and the client keeps sealing the next slots while devd opens the earlier ones.
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

#define SIM_DEFAULT_TIMEOUT_MS 60000
#define SIM_REATTACH_TIMEOUT_MS 2000

static gt_err conn_fail(gt_sim_conn *c, gt_err e)
{
    c->broken = true;
    return e;
}

static gt_err conn_send_fd(gt_sim_conn *c, const gt_sim_msg *m, int attach_fd);

gt_err gt_sim_conn_send(gt_sim_conn *c, const gt_sim_msg *m)
{
    return conn_send_fd(c, m, -1);
}

gt_err gt_sim_conn_send_fd(gt_sim_conn *c, const gt_sim_msg *m, int attach_fd)
{
    return conn_send_fd(c, m, attach_fd);
}

static gt_err conn_send_fd(gt_sim_conn *c, const gt_sim_msg *m, int attach_fd)
{
    GT_ENSURE(!c->broken, GT_E_STATE, "sim device: the session has ended");
    // devd reads a parked session only for the next trip's ATTACH
    GT_ENSURE(!c->parked || m->type == GT_SIM_REQ_ATTACH, GT_E_STATE,
              "sim device: %s on a parked session (reattach it first)", gt_sim_msg_name(m->type));
    gt_err e = gt_sim_msg_send(c->fd, &c->keys, m, attach_fd);
    return gt_is_ok(e) ? e : conn_fail(c, e);
}

gt_err gt_sim_conn_recv(gt_sim_conn *c, gt_sim_msg *m)
{
    GT_ENSURE(!c->broken, GT_E_STATE, "sim device: the session has ended");
    uint8_t body[GT_SIM_MAX_REC_PLAIN + GT_SIM_MAX_STATUS_MSG + 16 + GT_AEAD_TAG_BYTES];
    gt_err e = gt_sim_msg_recv(c->fd, &c->keys, body, sizeof body, NULL, &c->watch, m);
    if (e.code == GT_E_PEER) {  // only the socket says PEER: devd closed it
        e = gt_errf(GT_E_PEER, "sim device: devd ended the session");
    }
    return gt_is_ok(e) ? e : conn_fail(c, e);
}

// Receives the reply to a request: `want` or a STATUS. A STATUS error is the request's error
// (the session goes on); anything else unexpected ends the session.
static gt_err recv_reply(gt_sim_conn *c, uint16_t want, gt_sim_msg *m)
{
    GT_TRY(gt_sim_conn_recv(c, m));
    if (m->type == GT_SIM_REP_STATUS) {
        gt_err e = gt_sim_status_err(&m->status);
        if (want == GT_SIM_REP_STATUS || !gt_is_ok(e)) {
            return e;
        }
    }
    if (m->type != want) {
        return conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s (expected %s)",
                                    gt_sim_msg_name(m->type), gt_sim_msg_name(want)));
    }
    return GT_OK;
}

static gt_err rpc(gt_sim_conn *c, const gt_sim_msg *req, uint16_t want, gt_sim_msg *rep)
{
    GT_TRY(gt_sim_conn_send(c, req));
    return recv_reply(c, want, rep);
}

// ---- handshake --------------------------------------------------------------------------------

static gt_err connect_to(const char *path, int *out)
{
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    GT_ENSURE(path != NULL && path[0] != '\0', GT_E_ARG,
              "sim device: no devd socket given (--device-socket PATH)");
    GT_ENSURE(strlen(path) < sizeof addr.sun_path, GT_E_ARG, "sim device: socket path too long");
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    GT_ENSURE(fd >= 0, GT_E_IO, "sim device: socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        gt_err e = gt_errf(GT_E_IO, "sim device: cannot connect to devd at %s: %s "
                           "(is 'gputravel devd --socket %s' running?)", path, strerror(errno),
                           path);
        close(fd);
        return e;
    }
    *out = fd;
    return GT_OK;
}

static gt_err handshake(gt_sim_conn *c, const gt_device_sim_options *opt)
{
    gt_err (*produce)(void *, const uint8_t *, gt_buf *) = opt->attester.produce;
    gt_err (*appraise)(void *, gt_span, const uint8_t *) = opt->attester.appraise;
    void *produce_ctx = opt->attester.ctx, *appraise_ctx = opt->attester.ctx;
    if (produce == NULL) {
        produce = gt_sim_default_client_produce;
    }
    if (appraise == NULL) {
        appraise = gt_sim_default_client_appraise;
        appraise_ctx = (void *)opt->vendor_root_pem;
    }
    gt_err err = GT_OK;
    gt_buf ev = {0};
    gt_writer w = gt_writer_init_dynamic();
    uint8_t *rx = malloc(GT_SIM_MAX_FRAME);
    int bounce_fd = -1;
    size_t rx_len = 0;
    uint8_t sec[GT_X25519_BYTES], shared[GT_X25519_BYTES], rd[GT_SIM_REPORT_DATA_BYTES];
    gt_sim_client_hello ch;
    gt_sim_server_hello sh;
    memset(&ch, 0, sizeof ch);
    memset(&sh, 0, sizeof sh);
    GT_ENSURE_GOTO(err, rx != NULL, out, GT_E_NOMEM, "sim device: out of memory");

    ch.version = GT_SIM_VERSION;
    GT_TRY_GOTO(err, gt_random_bytes(ch.nonce, sizeof ch.nonce), out);
    GT_TRY_GOTO(err, gt_x25519_keypair(ch.pub, sec), out);
    memcpy(ch.agreement, opt->agreement_hash, sizeof ch.agreement);
    GT_TRY_GOTO(err, gt_sim_client_report_data(rd, &ch), out);
    GT_TRY_GOTO(err, produce(produce_ctx, rd, &ev), out);
    ch.evidence = gt_buf_span(&ev);
    GT_TRY_GOTO(err, gt_sim_client_hello_write(&w, &ch), out);
    gt_err sent = gt_sim_frame_send(c->fd, w.data, w.len, -1);
    // devd may have refused us before reading the hello: its reason is still worth reading
    err = gt_sim_frame_recv(c->fd, rx, GT_SIM_MAX_FRAME, &rx_len, &bounce_fd, &c->watch);
    if (!gt_is_ok(err)) {
        err = gt_is_ok(sent) ? err : sent;
        goto out;
    }
    gt_sim_status refused;
    if (gt_is_ok(gt_sim_refuse_parse((gt_span){rx, rx_len}, &refused))) {
        gt_err why = gt_sim_status_err(&refused);
        err = gt_errf(why.code ? why.code : GT_E_STATE, "sim device: devd refused the session: %s",
                      why.msg);
        goto out;
    }
    GT_TRY_GOTO(err, sent, out);
    gt_span sh_span = {rx, rx_len};
    GT_TRY_GOTO(err, gt_sim_server_hello_parse(sh_span, &sh), out);
    GT_ENSURE_GOTO(err, bounce_fd >= 0, out, GT_E_FORMAT,
                   "sim device: server hello came without bounce buffers");
    // device evidence: bound to our nonce, devd's X25519 key and our whole hello
    GT_TRY_GOTO(err, gt_sim_device_report_data(rd, ch.nonce, &sh, (gt_span){w.data, w.len}), out);
    if (opt->attester.appraise == NULL) {
        // The default appraisal, keeping the device's measurement for gt_device_sim_measurement
        // (an agreement's device.accepted_measurements is checked by the caller).
        cJSON *claims = NULL;
        GT_TRY_GOTO(err, gt_sim_device_evidence_appraise(sh.evidence, rd, opt->vendor_root_pem,
                                                         NULL, &claims),
                    out);
        const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims,
                                                                              "measurement"));
        c->has_measurement = m != NULL &&
                             gt_is_ok(gt_hex_decode_exact(c->device_measurement,
                                                          sizeof c->device_measurement, m));
        cJSON_Delete(claims);
    } else {
        GT_TRY_GOTO(err, appraise(appraise_ctx, sh.evidence, rd), out);
    }
    memcpy(c->device_report_data, rd, sizeof rd);
    GT_TRY_GOTO(err, gt_x25519_shared(shared, sh.pub, sec), out);
    GT_TRY_GOTO(err, gt_sim_keys_derive(&c->keys, true, shared, (gt_span){w.data, w.len}, sh_span),
                out);
    size_t bytes = (size_t)sh.slot_count * sh.slot_bytes;
    struct stat st;
    GT_ENSURE_GOTO(err, fstat(bounce_fd, &st) == 0 && (uint64_t)st.st_size == bytes, out,
                   GT_E_FORMAT, "sim device: bounce buffers are not %zu bytes", bytes);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, bounce_fd, 0);  // see devd
    GT_ENSURE_GOTO(err, p != MAP_FAILED, out, GT_E_NOMEM, "sim device: mapping bounce buffers: %s",
                   strerror(errno));
    c->bounce = p;
    c->bounce_bytes = bytes;
    c->slot_count = sh.slot_count;
    c->slot_bytes = sh.slot_bytes;
    c->mem_limit = sh.mem_limit;
    GT_TRY_GOTO(err, gt_buf_append(&c->device_evidence, sh.evidence.data, sh.evidence.len), out);
out:
    if (bounce_fd >= 0) {
        close(bounce_fd);  // the mapping stays
    }
    gt_secure_zero(sec, sizeof sec);
    gt_secure_zero(shared, sizeof shared);
    gt_buf_free(&ev);
    gt_writer_free(&w);
    free(rx);
    return err;
}

gt_err gt_sim_conn_open(gt_sim_conn *c, const char *socket_path, const gt_device_sim_options *opt)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->watch = (gt_sim_watch){.fd = -1, .timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms
                                                                          : SIM_DEFAULT_TIMEOUT_MS};
    GT_TRY(connect_to(socket_path, &c->fd));
    struct timeval tv = {.tv_sec = 30};
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    gt_err err = handshake(c, opt);
    if (!gt_is_ok(err)) {
        c->broken = true;
        gt_sim_conn_close(c);
    }
    return err;
}

void gt_sim_conn_close(gt_sim_conn *c)
{
    if (c->fd >= 0 && !c->broken && !c->parked) {
        gt_sim_msg bye = {.type = GT_SIM_REQ_BYE};
        if (gt_is_ok(gt_sim_conn_send(c, &bye))) {
            // Wait until devd has ended the session (wiped its buffers and closed): the device
            // is free again when close returns.
            gt_sim_watch w = {.fd = -1, .timeout_ms = 5000};
            uint8_t sink[64];
            size_t n = 0;
            gt_err e = gt_sim_frame_recv(c->fd, sink, sizeof sink, &n, NULL, &w);
            (void)e;
        }
    }
    if (c->bounce != NULL) {
        munmap(c->bounce, c->bounce_bytes);  // ciphertext only
    }
    if (c->fd >= 0) {
        close(c->fd);
    }
    gt_buf_free_nowipe(&c->device_evidence);
    gt_secure_zero(c, sizeof *c);
    c->fd = -1;
}

// ---- the backend ------------------------------------------------------------------------------

static gt_err sim_alloc(void *impl, uint64_t bytes, uint32_t flags, gt_dbuf *out)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_ALLOC, .len = bytes, .flags = flags}, rep;
    GT_TRY(rpc(impl, &req, GT_SIM_REP_HANDLE, &rep));
    *out = rep.handle;
    return GT_OK;
}

static gt_err sim_free(void *impl, gt_dbuf buf)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_FREE, .handle = buf}, rep;
    return rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

static gt_err sim_buf_size(void *impl, gt_dbuf buf, uint64_t *bytes)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_SIZE, .handle = buf}, rep;
    GT_TRY(rpc(impl, &req, GT_SIM_REP_SIZE, &rep));
    *bytes = rep.len;
    return GT_OK;
}

static gt_err sim_memset(void *impl, gt_dbuf buf, uint64_t offset, int value, uint64_t len)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_MEMSET, .handle = buf, .offset = offset,
                      .value = (uint32_t)(unsigned char)value, .len = len}, rep;
    return rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
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
    GT_TRY(rpc(c, &req, GT_SIM_REP_STATUS, &m));
    uint64_t chunk = GT_SIM_BULK_CHUNK(c->slot_bytes);
    uint64_t n = chunk_count(len, chunk);
    const uint8_t *p = src;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t slot = (uint32_t)(i % c->slot_count);
        if (i >= c->slot_count) {  // wait until devd has opened what this slot held
            GT_TRY(gt_sim_conn_recv(c, &m));
            if (m.type != GT_SIM_MSG_SLOT_FREE || m.slot != slot) {
                return conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s during "
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
            return conn_fail(c, e);
        }
        gt_sim_msg ready = {.type = GT_SIM_MSG_CHUNK, .slot = slot, .len = want};
        GT_TRY(gt_sim_conn_send(c, &ready));
    }
    GT_TRY(gt_sim_conn_recv(c, &m));
    if (m.type != GT_SIM_REP_STATUS) {
        return conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s after copy_in",
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
    GT_TRY(rpc(c, &req, GT_SIM_REP_STATUS, &m));
    uint64_t chunk = GT_SIM_BULK_CHUNK(c->slot_bytes);
    uint64_t n = chunk_count(len, chunk);
    uint8_t *p = dst;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t slot = (uint32_t)(i % c->slot_count);
        uint64_t want = len - i * chunk < chunk ? len - i * chunk : chunk;
        GT_TRY(gt_sim_conn_recv(c, &m));
        if (m.type != GT_SIM_MSG_CHUNK || m.slot != slot || m.len != want) {
            return conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s during copy_out",
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
            return conn_fail(c, gt_errf(GT_E_AUTH, "sim device: copy_out chunk "
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
    return rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

static gt_err sim_sync(void *impl)
{
    gt_sim_msg req = {.type = GT_SIM_REQ_SYNC}, rep;
    return rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
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
    GT_TRY(rpc(impl, &req, GT_SIM_REP_STAT, &rep));
    *stat = (gt_device_sim_stat){.sessions = rep.stat.sessions,
                                 .bytes_in_use = rep.stat.bytes_in_use,
                                 .bytes_wiped = rep.stat.bytes_wiped,
                                 .buffers_live = rep.stat.buffers_live,
                                 .mem_limit = rep.stat.mem_limit};
    return GT_OK;
}

gt_err gt_device_sim_impl_evidence(void *impl, gt_span *evidence,
                                   uint8_t report_data[GT_SIM_REPORT_DATA_BYTES])
{
    gt_sim_conn *c = impl;
    *evidence = gt_buf_span(&c->device_evidence);
    memcpy(report_data, c->device_report_data, GT_SIM_REPORT_DATA_BYTES);
    return GT_OK;
}

gt_err gt_device_sim_impl_measurement(void *impl, uint8_t out[GT_DEVICE_MEASUREMENT_BYTES])
{
    gt_sim_conn *c = impl;
    GT_ENSURE(c->has_measurement, GT_E_NOTFOUND,
              "sim device: no measurement kept (a custom appraise hook judged the device)");
    memcpy(out, c->device_measurement, GT_DEVICE_MEASUREMENT_BYTES);
    return GT_OK;
}

// ---- travelling -------------------------------------------------------------------------------

gt_err gt_device_sim_impl_lend(void *impl, uint32_t lease_ms,
                               uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    gt_sim_msg req = {.type = GT_SIM_REQ_LEND, .ms = lease_ms}, rep;
    gt_err err = rpc(impl, &req, GT_SIM_REP_TICKET, &rep);
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
    GT_TRY(rpc(c, &req, GT_SIM_REP_TRIP, &rep));
    *state = rep.state;
    *code = rep.code;
    *count = rep.count;
    for (uint32_t i = 0; i < rep.count; i++) {  // always read them all: the session goes on
        gt_sim_msg l;
        GT_TRY(gt_sim_conn_recv(c, &l));
        if (l.type != GT_SIM_REP_LOADED) {
            return conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s in a trip report",
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
    return rpc(impl, &req, GT_SIM_REP_STATUS, &rep);
}

gt_err gt_device_sim_impl_attach(void *impl, const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    gt_sim_conn *c = impl;
    gt_sim_msg req = {.type = GT_SIM_REQ_ATTACH}, rep;
    memcpy(req.ticket, ticket, GT_SIM_TICKET_BYTES);
    gt_err err = rpc(c, &req, GT_SIM_REP_STATUS, &rep);
    gt_secure_zero(&req, sizeof req);
    if (!gt_is_ok(err)) {
        return err;  // devd closes a refused attach; close waits for that
    }
    c->holder = true;
    return GT_OK;
}

gt_err gt_device_sim_impl_load_sealed(void *impl, gt_dbuf dst, uint64_t dst_offset,
                                      const uint8_t *ct_and_tag, uint64_t len,
                                      const uint8_t iv[GT_AEAD_IV_BYTES],
                                      const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                      const uint8_t key[GT_AEAD_KEY_BYTES])
{
    gt_sim_conn *c = impl;
    GT_ENSURE(len >= GT_AEAD_TAG_BYTES, GT_E_ARG,
              "sim device: a sealed chunk of %llu bytes has no tag", (unsigned long long)len);
    gt_sim_msg req = {.type = GT_SIM_REQ_LOAD_SEALED, .handle = dst, .offset = dst_offset,
                      .len = len - GT_AEAD_TAG_BYTES};
    memcpy(req.iv, iv, sizeof req.iv);
    memcpy(req.aad, aad, sizeof req.aad);
    memcpy(req.key, key, sizeof req.key);
    gt_sim_msg m;
    gt_err err = rpc(c, &req, GT_SIM_REP_STATUS, &m);
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
                return conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s during "
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
        return conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s after load_sealed",
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
    GT_TRY(rpc(c, &req, GT_SIM_REP_STATUS, &rep));
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
    GT_TRY(rpc(c, &req, GT_SIM_REP_STATUS, &rep));
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

gt_err gt_device_sim_impl_load_sealed_fd(void *impl, gt_dbuf dst, uint64_t dst_offset, int fd,
                                         uint64_t file_offset, uint64_t len,
                                         const uint8_t iv[GT_AEAD_IV_BYTES],
                                         const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                         const uint8_t key[GT_AEAD_KEY_BYTES])
{
    gt_sim_conn *c = impl;
    GT_ENSURE(len >= GT_AEAD_TAG_BYTES, GT_E_ARG,
              "sim device: a sealed chunk of %llu bytes has no tag", (unsigned long long)len);
    GT_ENSURE(fd >= 0, GT_E_ARG, "sim device: load_sealed_fd: no file");
    gt_sim_msg req = {.type = GT_SIM_REQ_LOAD_SEALED_FD, .handle = dst, .offset = dst_offset,
                      .len = len - GT_AEAD_TAG_BYTES, .file_offset = file_offset};
    memcpy(req.iv, iv, sizeof req.iv);
    memcpy(req.aad, aad, sizeof req.aad);
    memcpy(req.key, key, sizeof req.key);
    gt_err err = conn_send_fd(c, &req, fd);
    gt_secure_zero(&req, sizeof req);
    GT_TRY(err);
    gt_sim_msg m;
    return recv_reply(c, GT_SIM_REP_STATUS, &m);
}
