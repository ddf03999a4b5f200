// The client end of a device session (devproto.h gt_sim_conn): connect, the attested handshake,
// records over the socket, the bounce slots mapped. The sim backend (device/) and the holder's end
// of a trainer-served trip (travel/) both run over it.
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

gt_err gt_sim_conn_fail(gt_sim_conn *c, gt_err e)
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
    return gt_is_ok(e) ? e : gt_sim_conn_fail(c, e);
}

gt_err gt_sim_conn_recv(gt_sim_conn *c, gt_sim_msg *m)
{
    GT_ENSURE(!c->broken, GT_E_STATE, "sim device: the session has ended");
    uint8_t body[GT_SIM_MAX_REC_PLAIN + GT_SIM_MAX_STATUS_MSG + 16 + GT_AEAD_TAG_BYTES];
    gt_err e = gt_sim_msg_recv(c->fd, &c->keys, body, sizeof body, NULL, &c->watch, m);
    if (e.code == GT_E_PEER) {  // only the socket says PEER: devd closed it
        e = gt_errf(GT_E_PEER, "sim device: devd ended the session");
    }
    return gt_is_ok(e) ? e : gt_sim_conn_fail(c, e);
}

gt_err gt_sim_conn_recv_reply(gt_sim_conn *c, uint16_t want, gt_sim_msg *m)
{
    GT_TRY(gt_sim_conn_recv(c, m));
    if (m->type == GT_SIM_REP_STATUS) {
        gt_err e = gt_sim_status_err(&m->status);
        if (want == GT_SIM_REP_STATUS || !gt_is_ok(e)) {
            return e;
        }
    }
    if (m->type != want) {
        return gt_sim_conn_fail(c, gt_errf(GT_E_STATE, "sim device: devd sent %s (expected %s)",
                                    gt_sim_msg_name(m->type), gt_sim_msg_name(want)));
    }
    return GT_OK;
}

gt_err gt_sim_conn_rpc(gt_sim_conn *c, const gt_sim_msg *req, uint16_t want, gt_sim_msg *rep)
{
    GT_TRY(gt_sim_conn_send(c, req));
    return gt_sim_conn_recv_reply(c, want, rep);
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

// Appraises devd's evidence (bound to rd). The default appraisal keeps the device's measurement
// for gt_device_sim_measurement (an agreement's device.accepted_measurements is checked by the
// caller); a caller's appraiser is used as it is.
static gt_err appraise_device(gt_sim_conn *c, const gt_device_sim_options *opt,
                              gt_err (*appraise)(void *, gt_span, const uint8_t *),
                              void *appraise_ctx, const gt_sim_server_hello *sh,
                              const uint8_t *rd)
{
    if (opt->attester.appraise != NULL) {
        GT_ENSURE(opt->expect_memory == GT_SIM_MEMORY_UNSTATED, GT_E_ARG,
                  "sim device: the device memory to expect is checked by the default appraisal "
                  "only, not with a caller's appraise hook");
        return appraise(appraise_ctx, sh->evidence, rd);
    }
    cJSON *claims = NULL;
    GT_TRY(gt_sim_device_evidence_appraise(sh->evidence, rd, opt->vendor_root_pem, NULL,
                                           &claims));
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "measurement"));
    c->has_measurement = m != NULL &&
                         gt_is_ok(gt_hex_decode_exact(c->device_measurement,
                                                      sizeof c->device_measurement, m));
    // A device is what its evidence says it is: a trip into host memory never passes as one into
    // device memory (the claim is signed with the rest and bound to this session).
    const char *mem =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "device_memory"));
    const char *want = gt_sim_device_memory_name(opt->expect_memory);
    gt_err err = GT_OK;
    if (opt->expect_memory != GT_SIM_MEMORY_UNSTATED && (mem == NULL || strcmp(mem, want) != 0)) {
        err = gt_errf(GT_E_POLICY, "device evidence: its memory is '%s', this trip is to '%s'",
                      mem ? mem : "unstated", want);
    }
    cJSON_Delete(claims);
    return err;
}

// Maps the bounce buffers devd sent with its hello, after checking their size against it.
static gt_err map_bounce(gt_sim_conn *c, int bounce_fd, const gt_sim_server_hello *sh)
{
    size_t bytes = (size_t)sh->slot_count * sh->slot_bytes;
    struct stat st;
    GT_ENSURE(fstat(bounce_fd, &st) == 0 && (uint64_t)st.st_size == bytes, GT_E_FORMAT,
              "sim device: bounce buffers are not %zu bytes", bytes);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, bounce_fd, 0);  // see devd
    GT_ENSURE(p != MAP_FAILED, GT_E_NOMEM, "sim device: mapping bounce buffers: %s",
              strerror(errno));
    c->bounce = p;
    c->bounce_bytes = bytes;
    c->slot_count = sh->slot_count;
    c->slot_bytes = sh->slot_bytes;
    c->mem_limit = sh->mem_limit;
    return GT_OK;
}

// long: the client handshake in wire order (challenge, hello, appraisal, keys, bounce), one exit
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
    uint8_t sec[GT_X25519_BYTES], shared[GT_X25519_BYTES], rd[GT_REPORT_DATA_BYTES];
    gt_sim_client_hello ch;
    gt_sim_server_hello sh;
    memset(&ch, 0, sizeof ch);
    memset(&sh, 0, sizeof sh);
    GT_ENSURE_GOTO(err, rx != NULL, out, GT_E_NOMEM, "sim device: out of memory");

    // devd speaks first: its challenge, or a refusal (e.g. device busy).
    GT_TRY_GOTO(err, gt_sim_frame_recv(c->fd, rx, GT_SIM_MAX_FRAME, &rx_len, NULL, &c->watch),
                out);
    gt_sim_status refused;
    if (gt_is_ok(gt_sim_refuse_parse((gt_span){rx, rx_len}, &refused))) {
        gt_err why = gt_sim_status_err(&refused);
        err = gt_errf(why.code ? why.code : GT_E_STATE, "sim device: devd refused the session: %s",
                      why.msg);
        goto out;
    }
    GT_TRY_GOTO(err, gt_sim_challenge_parse((gt_span){rx, rx_len}, ch.server_nonce), out);
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
    GT_TRY_GOTO(err, appraise_device(c, opt, appraise, appraise_ctx, &sh, rd), out);
    memcpy(c->device_report_data, rd, sizeof rd);
    GT_TRY_GOTO(err, gt_x25519_shared(shared, sh.pub, sec), out);
    GT_TRY_GOTO(err, gt_sim_keys_derive(&c->keys, true, shared, (gt_span){w.data, w.len}, sh_span),
                out);
    memcpy(c->keys.server_pub, sh.pub, sizeof sh.pub);
    GT_TRY_GOTO(err, map_bounce(c, bounce_fd, &sh), out);
    GT_TRY_GOTO(err, gt_buf_append(&c->device_evidence, sh.evidence.data, sh.evidence.len), out);
    GT_TRY_GOTO(err, gt_buf_append(&c->client_hello, w.data, w.len), out);
    GT_TRY_GOTO(err, gt_buf_append(&c->server_hello, rx, rx_len), out);
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
    gt_buf_free_nowipe(&c->client_hello);
    gt_buf_free_nowipe(&c->server_hello);
    gt_secure_zero(c, sizeof *c);
    c->fd = -1;
}

gt_err gt_sim_conn_attach(gt_sim_conn *c, const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    gt_sim_msg req = {.type = GT_SIM_REQ_ATTACH}, rep;
    memcpy(req.ticket, ticket, GT_SIM_TICKET_BYTES);
    gt_err err = gt_sim_conn_rpc(c, &req, GT_SIM_REP_STATUS, &rep);
    gt_secure_zero(&req, sizeof req);
    if (!gt_is_ok(err)) {
        return err;  // devd closes a refused attach; close waits for that
    }
    c->holder = true;
    return GT_OK;
}

gt_err gt_sim_conn_measurement(const gt_sim_conn *c, uint8_t out[GT_MEASUREMENT_BYTES])
{
    GT_ENSURE(c->has_measurement, GT_E_NOTFOUND,
              "sim device: no measurement kept (a custom appraise hook judged the device)");
    memcpy(out, c->device_measurement, GT_MEASUREMENT_BYTES);
    return GT_OK;
}
