// The trainer's side of a trip it serves itself (cpu or cuda device): lend, TRAVEL, the
// holder's handoff, TRAVELLED; later check and release (orchestr.h gt_holder_trip).
#include <gputravel/orchestr.h>

#include "orchestr_internal.h"

// The sealed chunk's AAD (seal.h) goes to the device as the wire's (devproto.h): devproto cannot
// see seal, so each names it, and here, where both are visible, they must agree.
_Static_assert(GT_CHUNK_AAD_BYTES == GT_SIM_LOAD_AAD_BYTES, "chunk AAD: seal and devproto");

#include <string.h>

gt_err gt_holder_trip(gt_holder_conn *c, uint32_t chunk, gt_device *dev, const char *socket_path,
                      const uint8_t agreement_hash[GT_SHA256_BYTES], uint32_t lease_ms,
                      gt_device_trip **trip, gt_dbuf *out, uint64_t *tokens)
{
    *trip = NULL;
    *out = 0;
    *tokens = 0;
    const gt_manifest *m = gt_holder_conn_manifest(c);
    const char *name = gt_holder_conn_name(c);
    gt_channel *ch = gt_holder_conn_channel(c);
    GT_TRY(gt_holder_conn_enclave_gate(c));
    GT_ENSURE(chunk < m->chunk_count, GT_E_ARG, "holder %s has no chunk %u", name, chunk);
    const uint64_t pt_len = m->chunks[chunk].plaintext_len;
    uint8_t aad[GT_CHUNK_AAD_BYTES];
    GT_TRY(gt_chunk_aad_build(aad, m, chunk));
    char address[GT_DEVICE_TRIP_ADDRESS_MAX];
    uint8_t msg[GT_HP_TRAVEL_MAX_BYTES];
    gt_writer w = gt_writer_init_fixed(msg, sizeof msg);
    gt_hp_travel req = {.chunk = chunk};
    gt_device_trip *t = NULL;
    gt_buf body = {0};
    gt_dbuf buf = 0;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_device_trip_lend(&t, dev, socket_path, lease_ms, gt_channel_fd(ch),
                                         agreement_hash, req.ticket, address, sizeof address),
                out);
    memcpy(req.device, address, sizeof req.device);
    GT_TRY_GOTO(err, gt_hp_travel_write(&w, &req), out);
    GT_TRY_GOTO(err, gt_channel_send(ch, GT_HP_TRAVEL, w.data, w.len), out);
    gt_secure_zero(msg, sizeof msg);
    gt_secure_zero(req.ticket, sizeof req.ticket);
    // The holder answers TRAVELLED only after its handoff was answered: wait for it first.
    gt_err trip_err = gt_device_trip_wait(t, aad, pt_len, &buf);
    uint32_t type = 0;
    uint64_t loaded = 0;
    err = gt_channel_recv(ch, &type, &body, GT_HP_MAX_CONTROL);
    if (gt_is_ok(err) && type == GT_HP_TRAVELLED &&
        !gt_is_ok(gt_hp_travelled_parse(gt_buf_span(&body), &loaded))) {
        loaded = UINT64_MAX;
    }
    if (gt_is_ok(err) && type == GT_HP_REFUSE) {
        err = gt_hp_refuse_error(gt_buf_span(&body), name);  // the holder's reason says the most
    } else if (gt_is_ok(err) && !gt_is_ok(trip_err)) {
        err = trip_err;
    } else if (gt_is_ok(err) && (type != GT_HP_TRAVELLED || loaded != pt_len)) {
        err = gt_errf(GT_E_FORMAT, "holder %s: expected TRAVELLED with %llu bytes, got %#x",
                      name, (unsigned long long)pt_len, type);
    } else if (!gt_is_ok(err) && !gt_is_ok(trip_err)) {
        err = gt_err_wrap(trip_err, "holder %s (its channel: %s)", name, err.msg);
    }
    GT_TRY_GOTO(err, err, out);
    *trip = t;
    *out = buf;
    *tokens = pt_len / 2;
    t = NULL;
out:
    gt_device_trip_close(t);  // a failed trip: releases an import, if any
    gt_secure_zero(msg, sizeof msg);
    gt_secure_zero(req.ticket, sizeof req.ticket);
    gt_buf_free_nowipe(&body);
    return gt_err_wrap(err, "trip for chunk %u", chunk);
}

gt_err gt_holder_trip_end(gt_device_trip *trip)
{
    if (trip == NULL) {
        return GT_OK;
    }
    gt_err err = gt_device_trip_release(trip);
    gt_device_trip_close(trip);
    if (err.code == GT_E_PEER) {
        return gt_errf(GT_E_PEER, "the holder went away while its chunk was in use: the steps "
                       "trained on it are discarded and no use is counted (--resume continues "
                       "from the last checkpoint)");
    }
    return err;
}
