// The server end of the sim device handshake (devproto.h), used by devd and by a trainer that
// serves a trip itself (trip_ipc.c).
#include <gputravel/devproto.h>

#include <stdlib.h>
#include <string.h>

gt_err gt_sim_server_handshake(int fd, uint8_t *rx, const gt_sim_watch *watch,
                               const gt_sim_server_params *p, gt_sim_keys *keys,
                               uint8_t agreement[GT_SHA256_BYTES])
{
    gt_err err = GT_OK;
    size_t ch_len = 0;
    uint8_t *ch_body = NULL;
    int bounce_fd = -1;
    gt_buf ev = {0};
    gt_writer w = gt_writer_init_dynamic();
    uint8_t sec[GT_X25519_BYTES], shared[GT_X25519_BYTES], rd[GT_REPORT_DATA_BYTES];
    gt_sim_client_hello ch;
    memset(&ch, 0, sizeof ch);

    // A fresh challenge first: the client's evidence must bind it, so a hello recorded from
    // another connection is refused here, before its evidence is appraised or any device state
    // is set up for it.
    uint8_t challenge[GT_SIM_NONCE_BYTES], challenge_msg[GT_SIM_CHALLENGE_BYTES];
    gt_writer cw = gt_writer_init_fixed(challenge_msg, sizeof challenge_msg);
    GT_TRY_GOTO(err, gt_random_bytes(challenge, sizeof challenge), out);
    GT_TRY_GOTO(err, gt_sim_challenge_write(&cw, challenge), out);
    GT_TRY_GOTO(err, gt_sim_frame_send(fd, cw.data, cw.len, -1), out);
    GT_TRY_GOTO(err, gt_sim_frame_recv(fd, rx, GT_SIM_MAX_FRAME, &ch_len, NULL, watch), out);
    ch_body = malloc(ch_len ? ch_len : 1);
    GT_ENSURE_GOTO(err, ch_body != NULL, out, GT_E_NOMEM, "sim server: out of memory");
    memcpy(ch_body, rx, ch_len);
    gt_span ch_span = {ch_body, ch_len};
    GT_TRY_GOTO(err, gt_sim_client_hello_parse(ch_span, &ch), refuse);
    GT_ENSURE_GOTO(err, gt_ct_equal(ch.server_nonce, challenge, sizeof challenge), refuse,
                   GT_E_AUTH, "client hello answers another challenge than this connection's "
                   "(a replayed hello)");
    memcpy(agreement, ch.agreement, GT_SHA256_BYTES);
    // client evidence: bound to its nonce, its X25519 key and the agreement
    GT_TRY_GOTO(err, gt_sim_client_report_data(rd, &ch), refuse);
    GT_TRY_GOTO(err, p->appraise(p->appraise_ctx, ch.evidence, rd), refuse);
    // this side: ephemeral key, evidence bound to the client's nonce and hello and to the
    // device's parameters (memory limit, bounce layout)
    gt_sim_server_hello sh;
    memset(&sh, 0, sizeof sh);
    sh.version = GT_SIM_VERSION;
    sh.slot_count = p->slot_count;
    sh.slot_bytes = p->slot_bytes;
    sh.mem_limit = p->mem_limit;
    GT_TRY_GOTO(err, gt_x25519_keypair(sh.pub, sec), out);
    GT_TRY_GOTO(err, gt_sim_device_report_data(rd, ch.nonce, &sh, ch_span), out);
    GT_TRY_GOTO(err, p->produce(p->produce_ctx, rd, &ev), out);
    GT_TRY_GOTO(err, p->bounce(p->bounce_ctx, &bounce_fd), out);
    sh.evidence = gt_buf_span(&ev);
    GT_TRY_GOTO(err, gt_sim_server_hello_write(&w, &sh), out);
    GT_TRY_GOTO(err, gt_x25519_shared(shared, ch.pub, sec), out);
    GT_TRY_GOTO(err, gt_sim_keys_derive(keys, false, shared, ch_span, (gt_span){w.data, w.len}),
                out);
    // kept for the session (wiped with its keys): chunk keys wrapped to this session open with it
    memcpy(keys->server_pub, sh.pub, sizeof sh.pub);
    memcpy(keys->server_sec, sec, sizeof sec);
    GT_TRY_GOTO(err, gt_sim_frame_send(fd, w.data, w.len, bounce_fd), out);
    if (p->client_hello != NULL) {
        p->client_hello->len = 0;
        GT_TRY_GOTO(err, gt_buf_append(p->client_hello, ch_body, ch_len), out);
    }
    goto out;
refuse: {
    uint8_t body[256];
    gt_writer rw = gt_writer_init_fixed(body, sizeof body);
    if (gt_is_ok(gt_sim_refuse_write(&rw, err))) {
        gt_err e = gt_sim_frame_send(fd, body, rw.len, -1);
        (void)e;
    }
}
out:
    gt_secure_zero(sec, sizeof sec);
    gt_secure_zero(shared, sizeof shared);
    free(ch_body);
    gt_buf_free_nowipe(&ev);
    gt_writer_free(&w);
    return err;
}
