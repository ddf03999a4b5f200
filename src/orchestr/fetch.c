// The trainer's side of conventional transmission: fetch a holder's chunk over the attested
// channel and place it in device memory.
#include <gputravel/orchestr.h>

#include "orchestr_internal.h"

#include <stdlib.h>
#include <string.h>

#define STAGING_PIECE (4u << 20)

struct gt_holder_conn {
    gt_channel *ch;
    gt_manifest manifest;
    gt_hp_head head;  // the holder's signed ledger head for this session
    char name[GT_AGREEMENT_NAME_BYTES];
    // A holder the agreement names by enclave (holders[i].enclave): its ENCLAVE_QUOTE as
    // received and this channel's binding, until gt_holder_conn_enclave_verify accepts it; no
    // chunk is asked of it before.
    const gt_agreement *agreement;
    uint32_t index;
    bool enclave_required, enclave_verified;
    gt_buf enclave_quote;
    uint8_t binding[GT_NET_BINDING_BYTES];
    gt_holder_enclave_seen enclave;
};

// What the trainer needs before it asks a holder named by enclave for anything.
gt_err gt_holder_conn_enclave_gate(const gt_holder_conn *c)
{
    GT_ENSURE(!c->enclave_required || c->enclave_verified, GT_E_STATE,
              "holder %s: named by enclave, and its enclave quote was not verified yet "
              "(gt_holder_conn_enclave_verify): nothing is asked of it", c->name);
    return GT_OK;
}

const gt_holder_enclave_seen *gt_holder_conn_enclave(const gt_holder_conn *c)
{
    return c->enclave_verified ? &c->enclave : NULL;
}

gt_err gt_holder_conn_enclave_verify(gt_holder_conn *c, const gt_attest_file *roots,
                                     size_t root_count)
{
    if (!c->enclave_required) {
        return GT_OK;
    }
    GT_ENSURE(c->enclave_quote.len > 0, GT_E_POLICY, "holder %s: no enclave quote", c->name);
    GT_TRY(gt_holder_quote_appraise(c->agreement, c->index, c->binding,
                                    gt_buf_span(&c->enclave_quote), roots, root_count,
                                    &c->enclave));
    c->enclave_verified = true;
    return GT_OK;
}

// After HEAD: the ENCLAVE_QUOTE its flags announce (kept for the verify), and a holder the
// agreement names by enclave that announces none is refused here.
static gt_err enclave_quote_recv(gt_holder_conn *c, const gt_agreement_holder *h, gt_buf *body)
{
    c->enclave_required = h->enclave.present;
    if ((c->head.flags & GT_HP_HEAD_ENCLAVE_QUOTE) == 0) {
        GT_ENSURE(!c->enclave_required, GT_E_POLICY,
                  "holder %s: the agreement names it by enclave identity (holders[%u].enclave) "
                  "but it sent no enclave quote: it does not run in enclave mode", h->name,
                  c->index);
        return GT_OK;
    }
    uint32_t type = 0;
    GT_TRY(gt_channel_recv(c->ch, &type, body, GT_HP_ENCLAVE_QUOTE_MAX + 5));
    if (type == GT_HP_REFUSE) {
        return gt_hp_refuse_error(gt_buf_span(body), h->name);
    }
    GT_ENSURE(type == GT_HP_ENCLAVE_QUOTE, GT_E_FORMAT,
              "holder %s: expected its ENCLAVE_QUOTE, got %#x", h->name, type);
    gt_span ev = {0};
    GT_TRY(gt_hp_enclave_quote_parse(gt_buf_span(body), &ev));
    if (!c->enclave_required) {
        return GT_OK;  // not asked for: nothing to check it against
    }
    GT_TRY(gt_channel_binding(c->ch, GT_NET_ROLE_SERVER, c->binding));
    return gt_buf_append(&c->enclave_quote, ev.data, ev.len);
}

const gt_manifest *gt_holder_conn_manifest(const gt_holder_conn *c) { return &c->manifest; }
const gt_hp_head *gt_holder_conn_head(const gt_holder_conn *c) { return &c->head; }

gt_err gt_holder_connect(gt_holder_conn **out, const gt_agreement *a, uint32_t holder_index,
                         const gt_net_attestor *att, const char *trainer_name,
                         const uint8_t signing_key[GT_ED25519_PUBLIC_BYTES])
{
    *out = NULL;
    GT_ENSURE(holder_index < a->holder_count, GT_E_ARG, "holder %u out of range", holder_index);
    const gt_agreement_holder *h = &a->holders[holder_index];
    size_t name_len = strlen(trainer_name);
    GT_ENSURE(name_len > 0 && name_len < 64, GT_E_ARG, "trainer name must be 1..63 bytes");
    gt_holder_conn *c = calloc(1, sizeof *c);
    GT_ENSURE(c != NULL, GT_E_NOMEM, "out of memory");
    snprintf(c->name, sizeof c->name, "%s", h->name);
    gt_err err = GT_OK;
    gt_buf body = {0};
    uint8_t hello[GT_HP_HELLO_MAX_BYTES];
    gt_writer w = gt_writer_init_fixed(hello, sizeof hello);
    // Inside the attested channel: the holder learns the signing key from the TEE it appraised.
    gt_hp_hello m = {0};
    memcpy(m.agreement, a->hash, sizeof m.agreement);
    memcpy(m.signing_key, signing_key, sizeof m.signing_key);
    memcpy(m.trainer, trainer_name, name_len);
    GT_TRY_GOTO(err, gt_channel_connect(&c->ch, h->endpoint, att), fail);
    GT_TRY_GOTO(err, gt_hp_hello_write(&w, &m), fail);
    GT_TRY_GOTO(err, gt_channel_send(c->ch, GT_HP_HELLO, w.data, w.len), fail);
    uint32_t type = 0;
    GT_TRY_GOTO(err, gt_channel_recv(c->ch, &type, &body, GT_HP_MAX_MANIFEST), fail);
    if (type == GT_HP_REFUSE) {
        err = gt_hp_refuse_error(gt_buf_span(&body), h->name);
        goto fail;
    }
    GT_ENSURE_GOTO(err, type == GT_HP_WELCOME, fail, GT_E_FORMAT,
                   "holder %s: expected WELCOME, got %#x", h->name, type);
    GT_TRY_GOTO(err, gt_manifest_parse(&c->manifest, body.data, body.len), fail);
    GT_ENSURE_GOTO(err, gt_ct_equal(c->manifest.holder_pub, h->identity_key,
                                    GT_ED25519_PUBLIC_BYTES),
                   fail, GT_E_POLICY,
                   "holder %s: its manifest is signed by another key than the agreement names",
                   h->name);
    GT_ENSURE_GOTO(err, gt_ct_equal(c->manifest.dataset_id, h->dataset_id, GT_DATASET_ID_BYTES),
                   fail, GT_E_POLICY, "holder %s: offers another dataset than the agreement names",
                   h->name);
    GT_ENSURE_GOTO(err, c->manifest.vocab_size <= a->vocab, fail, GT_E_POLICY,
                   "holder %s: dataset vocabulary %u exceeds the model's %u", h->name,
                   c->manifest.vocab_size, a->vocab);
    // Its ledger head, for the co-holder witnesses (travel.h): signed by the agreement's key.
    GT_TRY_GOTO(err, gt_channel_recv(c->ch, &type, &body, GT_HP_MAX_CONTROL), fail);
    GT_ENSURE_GOTO(err, type == GT_HP_HEAD, fail, GT_E_FORMAT,
                   "holder %s: expected its ledger HEAD, got %#x", h->name, type);
    GT_TRY_GOTO(err, gt_hp_head_parse(gt_buf_span(&body), &c->head), fail);
    GT_ENSURE_GOTO(err, gt_ct_equal(c->head.holder_key, h->identity_key, GT_ED25519_PUBLIC_BYTES),
                   fail, GT_E_POLICY, "holder %s: its ledger head names another key", h->name);
    GT_TRY_GOTO(err, gt_hp_head_verify(&c->head, false), fail);
    c->agreement = a;
    c->index = holder_index;
    GT_TRY_GOTO(err, enclave_quote_recv(c, h, &body), fail);
    gt_buf_free_nowipe(&body);
    *out = c;
    return GT_OK;
fail:
    gt_buf_free_nowipe(&body);
    gt_holder_disconnect(c);
    // One prefix: a holder's refusal already reads "holder NAME refused: ...".
    char prefix[GT_AGREEMENT_NAME_BYTES + 8];
    snprintf(prefix, sizeof prefix, "holder %s", h->name);
    return strncmp(err.msg, prefix, strlen(prefix)) == 0 ? err
                                                         : gt_err_wrap(err, "%s", prefix);
}

gt_err gt_holder_travel(gt_holder_conn *c, uint32_t chunk, gt_device *dev,
                        const char *device_address, uint32_t lease_ms, gt_dbuf *out,
                        uint64_t *tokens)
{
    *out = 0;
    *tokens = 0;
    GT_TRY(gt_holder_conn_enclave_gate(c));
    GT_ENSURE(chunk < c->manifest.chunk_count, GT_E_ARG, "holder %s has no chunk %u", c->name,
              chunk);
    size_t alen = strlen(device_address);
    GT_ENSURE(alen > 0 && alen < 256, GT_E_ARG, "device address of %zu bytes", alen);
    uint8_t msg[GT_HP_TRAVEL_MAX_BYTES];
    gt_writer w = gt_writer_init_fixed(msg, sizeof msg);
    gt_err err = GT_OK;
    gt_buf body = {0};
    gt_hp_travel m = {.chunk = chunk};
    _Static_assert(sizeof m.ticket == GT_SIM_TICKET_BYTES, "TRAVEL carries a device ticket");
    _Static_assert(sizeof m.device == GT_DEVICE_TRIP_ADDRESS_MAX, "TRAVEL carries a trip address");
    memcpy(m.device, device_address, alen);
    // From here the device is away: only wait_return works on it until the trip ends.
    GT_TRY_GOTO(err, gt_device_sim_lend(dev, lease_ms, m.ticket), out);
    err = gt_hp_travel_write(&w, &m);  // cannot fail: the address was checked above
    gt_secure_zero(m.ticket, sizeof m.ticket);
    if (gt_is_ok(err)) {
        err = gt_channel_send(c->ch, GT_HP_TRAVEL, w.data, w.len);
    }
    uint32_t type = 0;
    if (gt_is_ok(err)) {
        err = gt_channel_recv(c->ch, &type, &body, GT_HP_MAX_CONTROL);
    }
    const bool lost = !gt_is_ok(err);  // the holder's connection broke mid-trip
    if (gt_is_ok(err) && type == GT_HP_REFUSE) {
        err = gt_hp_refuse_error(gt_buf_span(&body), c->name);
    } else if (gt_is_ok(err) && (type != GT_HP_TRAVELLED ||
                                 !gt_is_ok(gt_hp_travelled_parse(gt_buf_span(&body), &(uint64_t){0})))) {
        err = gt_errf(GT_E_FORMAT, "holder %s: expected TRAVELLED, got %#x", c->name, type);
    }
    // Whatever the holder said, the device comes back (a refused or failed trip within the
    // lease; the holder's session end returns it at once). A holder that refused or went away
    // before attaching never will: recall the device (refused, and ignored, if one attached).
    if (!gt_is_ok(err)) {
        gt_err ignored = gt_device_sim_recall(dev);
        (void)ignored;
    }
    gt_device_sim_loaded loaded[1];
    size_t count = 0;
    gt_err back = gt_device_sim_wait_return(dev, (int)lease_ms + 5000, loaded, 1, &count);
    if (lost) {
        err = gt_errf(err.code, "holder %s went away during the trip; the device came back%s "
                                "(%s)", c->name, gt_is_ok(back) ? "" : ", the trip's buffers wiped",
                      err.msg);
    } else if (gt_is_ok(err) && !gt_is_ok(back)) {
        err = gt_err_wrap(back, "the device's trip to %s failed", c->name);
    }
    GT_TRY_GOTO(err, err, out);
    GT_ENSURE_GOTO(err, count == 1, out, GT_E_STATE,
                   "holder %s: the device came back with %zu buffers (expected 1)", c->name,
                   count);
    *out = loaded[0].buf;
    *tokens = loaded[0].bytes / 2;
out:
    gt_secure_zero(msg, sizeof msg);
    gt_buf_free_nowipe(&body);
    return gt_err_wrap(err, "travel for chunk %u", chunk);
}

gt_err gt_holder_confirm_use(gt_holder_conn *c, uint32_t chunk, uint64_t tokens)
{
    uint8_t msg[GT_HP_USED_BYTES];
    gt_writer w = gt_writer_init_fixed(msg, sizeof msg);
    GT_TRY(gt_hp_used_write(&w, &(gt_hp_used){.chunk = chunk, .tokens = tokens}));
    return gt_channel_send(c->ch, GT_HP_USED, w.data, w.len);
}

// One request and its answer: `want`, or the holder's REFUSE as its error.
static gt_err exchange(gt_holder_conn *c, uint32_t type, const void *msg, size_t len, uint32_t want,
                       gt_buf *answer)
{
    GT_TRY(gt_channel_send(c->ch, type, msg, len));
    uint32_t got = 0;
    GT_TRY(gt_channel_recv(c->ch, &got, answer, GT_HP_MAX_CONTROL));
    if (got == GT_HP_REFUSE) {
        return gt_hp_refuse_error(gt_buf_span(answer), c->name);
    }
    GT_ENSURE(got == want, GT_E_FORMAT, "holder %s: expected %#x, got %#x", c->name, want, got);
    return GT_OK;
}

gt_err gt_holders_witness(gt_holder_conn *const *conns, uint32_t n)
{
    bool wanted = false;
    for (uint32_t i = 0; i < n; i++) {
        wanted |= (conns[i]->head.flags & GT_HP_HEAD_WITNESSES_REQUIRED) != 0;
    }
    if (!wanted || n < 2) {
        return GT_OK;
    }
    gt_hp_witness *w = calloc((size_t)n * n, sizeof *w);  // w[x * n + y]: y's witness of x
    GT_ENSURE(w != NULL, GT_E_NOMEM, "out of memory");
    gt_buf answer = {0};
    uint8_t *list = malloc(1 + (size_t)n * GT_HP_WITNESS_BYTES);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, list != NULL, out, GT_E_NOMEM, "out of memory");
    for (uint32_t x = 0; x < n; x++) {
        uint8_t head[GT_HP_HEAD_BYTES];
        gt_writer hw = gt_writer_init_fixed(head, sizeof head);
        GT_TRY_GOTO(err, gt_hp_head_write(&hw, &conns[x]->head), out);
        for (uint32_t y = 0; y < n; y++) {
            if (y == x) {
                continue;
            }
            GT_TRY_GOTO(err, exchange(conns[y], GT_HP_WITNESS_REQ, hw.data, hw.len,
                                      GT_HP_WITNESS, &answer), out);
            GT_TRY_GOTO(err, gt_hp_witness_parse(gt_buf_span(&answer), &w[x * n + y]), out);
        }
    }
    for (uint32_t x = 0; x < n; x++) {
        gt_writer lw = gt_writer_init_fixed(list, 1 + (size_t)n * GT_HP_WITNESS_BYTES);
        GT_TRY_GOTO(err, gt_writer_u8(&lw, (uint8_t)(n - 1)), out);
        for (uint32_t y = 0; y < n; y++) {
            if (y != x) {
                GT_TRY_GOTO(err, gt_hp_witness_write(&lw, &w[x * n + y]), out);
            }
        }
        GT_TRY_GOTO(err, exchange(conns[x], GT_HP_WITNESSES, lw.data, lw.len, GT_HP_WITNESS_OK,
                                  &answer), out);
        // x's confirmed head goes to every co-holder, which records it only now.
        gt_hp_head confirmed;
        GT_TRY_GOTO(err, gt_hp_head_parse(gt_buf_span(&answer), &confirmed), out);
        for (uint32_t y = 0; y < n; y++) {
            if (y != x) {
                GT_TRY_GOTO(err, gt_channel_send(conns[y]->ch, GT_HP_WITNESS_CONFIRM,
                                                 answer.data, answer.len), out);
            }
        }
    }
out:
    free(w);
    free(list);
    gt_buf_free_nowipe(&answer);
    return gt_err_wrap(err, "co-holder witnesses");
}

void gt_holder_disconnect(gt_holder_conn *c)
{
    if (c == NULL) {
        return;
    }
    if (c->ch != NULL) {
        gt_err ignored = gt_channel_send(c->ch, GT_HP_BYE, NULL, 0);
        (void)ignored;
        gt_channel_close(c->ch);
    }
    gt_manifest_free(&c->manifest);
    gt_buf_free_nowipe(&c->enclave_quote);
    free(c);
}

// Streams len plaintext bytes from the channel into dst through a wiped staging piece.
static gt_err stream_plain(gt_holder_conn *c, gt_device *dev, gt_dbuf dst, uint64_t len)
{
    uint8_t *piece = malloc(STAGING_PIECE);
    GT_ENSURE(piece != NULL, GT_E_NOMEM, "out of memory");
    gt_err err = GT_OK;
    for (uint64_t done = 0; done < len;) {
        size_t n = len - done < STAGING_PIECE ? (size_t)(len - done) : STAGING_PIECE;
        GT_TRY_GOTO(err, gt_channel_read(c->ch, piece, n), out);
        GT_TRY_GOTO(err, gt_device_copy_in(dev, dst, done, piece, n), out);
        done += n;
    }
out:
    gt_secure_zero(piece, STAGING_PIECE);
    free(piece);
    return err;
}

gt_err gt_holder_fetch(gt_holder_conn *c, uint32_t chunk, gt_fetch_mode mode, gt_device *dev,
                       uint32_t flags, gt_dbuf *out, uint64_t *tokens)
{
    *out = 0;
    *tokens = 0;
    GT_TRY(gt_holder_conn_enclave_gate(c));
    GT_ENSURE(chunk < c->manifest.chunk_count, GT_E_ARG, "holder %s has no chunk %u", c->name,
              chunk);
    uint8_t req[GT_HP_FETCH_BYTES];
    gt_writer w = gt_writer_init_fixed(req, sizeof req);
    GT_TRY(gt_hp_fetch_write(&w, &(gt_hp_fetch){.mode = (uint8_t)mode, .chunk = chunk}));
    GT_TRY(gt_channel_send(c->ch, GT_HP_FETCH, w.data, w.len));

    const uint64_t pt_len = c->manifest.chunks[chunk].plaintext_len;
    const uint64_t file_len = gt_manifest_chunk_file_bytes(&c->manifest, chunk);
    gt_err err = GT_OK;
    gt_dbuf buf = 0;
    gt_buf sealed = {0}, plain = {0}, body = {0};
    uint32_t type = 0;
    uint64_t len = 0;
    GT_TRY_GOTO(err, gt_channel_recv_begin(c->ch, &type, &len), fail);
    if (type == GT_HP_REFUSE) {
        GT_ENSURE_GOTO(err, len <= GT_HP_MAX_CONTROL, fail, GT_E_LIMIT, "refusal too long");
        GT_TRY_GOTO(err, gt_buf_reserve(&body, (size_t)len + 1), fail);
        GT_TRY_GOTO(err, gt_channel_read(c->ch, body.data, (size_t)len), fail);
        body.len = (size_t)len;
        err = gt_hp_refuse_error(gt_buf_span(&body), c->name);
        goto fail;
    }
    GT_TRY_GOTO(err, gt_device_alloc(dev, pt_len ? pt_len : 2, flags, &buf), fail);
    if (mode == GT_FETCH_PLAIN) {
        GT_ENSURE_GOTO(err, type == GT_HP_CHUNK_PLAIN && len == pt_len, fail, GT_E_FORMAT,
                       "holder %s: chunk %u arrived as type %#x with %llu bytes (expected %llu)",
                       c->name, chunk, type, (unsigned long long)len,
                       (unsigned long long)pt_len);
        GT_TRY_GOTO(err, stream_plain(c, dev, buf, len), fail);
    } else {
        GT_ENSURE_GOTO(err, type == GT_HP_CHUNK_SEALED && len == file_len, fail, GT_E_FORMAT,
                       "holder %s: sealed chunk %u arrived as type %#x with %llu bytes "
                       "(expected %llu)", c->name, chunk, type, (unsigned long long)len,
                       (unsigned long long)file_len);
        GT_TRY_GOTO(err, gt_buf_reserve(&sealed, (size_t)len), fail);
        GT_TRY_GOTO(err, gt_channel_read(c->ch, sealed.data, (size_t)len), fail);
        sealed.len = (size_t)len;
        GT_TRY_GOTO(err, gt_channel_recv(c->ch, &type, &body, GT_AEAD_KEY_BYTES), fail);
        GT_ENSURE_GOTO(err, type == GT_HP_CHUNK_KEY && body.len == GT_AEAD_KEY_BYTES, fail,
                       GT_E_FORMAT, "holder %s: expected the chunk key", c->name);
        // One decryption pass, tag checked before the plaintext goes anywhere.
        GT_TRY_GOTO(err, gt_buf_reserve(&plain, (size_t)(pt_len ? pt_len : 1)), fail);
        GT_TRY_GOTO(err, gt_chunk_open(plain.data, plain.cap, &plain.len, sealed.data, sealed.len,
                                       &c->manifest, chunk, body.data),
                    fail);
        GT_TRY_GOTO(err, gt_device_copy_in(dev, buf, 0, plain.data, plain.len), fail);
    }
    gt_buf_free(&body);
    gt_buf_free(&plain);
    gt_buf_free_nowipe(&sealed);
    *out = buf;
    *tokens = pt_len / 2;
    return GT_OK;
fail:
    if (buf != 0) {
        gt_err ignored = gt_device_free(dev, buf);
        (void)ignored;
    }
    gt_buf_free(&body);
    gt_buf_free(&plain);
    gt_buf_free_nowipe(&sealed);
    return gt_err_wrap(err, "fetch chunk %u", chunk);
}

// ---- for trip.c (orchestr_internal.h) ----------------------------------------------------------

gt_channel *gt_holder_conn_channel(gt_holder_conn *c) { return c->ch; }
const char *gt_holder_conn_name(const gt_holder_conn *c) { return c->name; }
