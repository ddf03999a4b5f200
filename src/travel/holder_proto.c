// The holder protocol (layout in travel.h): every message's writer and parser, for both ends.
// Parsers read untrusted bytes field by field through gt_reader.
#include <gputravel/travel.h>

#include <string.h>

static gt_err hello_parse(gt_span body, gt_hp_hello *out)
{
    gt_reader r = gt_reader_init(body.data, body.len);
    uint16_t n = 0;
    GT_TRY(gt_reader_bytes(&r, out->agreement, sizeof out->agreement));
    GT_TRY(gt_reader_bytes(&r, out->signing_key, sizeof out->signing_key));
    GT_TRY(gt_reader_u16le(&r, &n));
    GT_ENSURE(n > 0 && n < sizeof out->trainer, GT_E_FORMAT, "hello: trainer name of %u bytes",
              n);
    GT_TRY(gt_reader_bytes(&r, out->trainer, n));
    GT_TRY(gt_reader_expect_end(&r, "hello"));
    for (uint16_t i = 0; i < n; i++) {
        GT_ENSURE(out->trainer[i] > 0x20 && out->trainer[i] < 0x7f, GT_E_FORMAT,
                  "hello: unprintable trainer name");
    }
    return GT_OK;
}

gt_err gt_hp_hello_parse(gt_span body, gt_hp_hello *out)
{
    memset(out, 0, sizeof *out);
    gt_err err = hello_parse(body, out);
    if (!gt_is_ok(err)) {
        memset(out, 0, sizeof *out);  // nothing half-parsed (a key without its trainer) survives
    }
    return err;
}

gt_err gt_hp_fetch_parse(gt_span body, gt_hp_fetch *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(body.data, body.len);
    GT_TRY(gt_reader_u8(&r, &out->mode));
    GT_TRY(gt_reader_u32le(&r, &out->chunk));
    GT_TRY(gt_reader_expect_end(&r, "fetch"));
    GT_ENSURE(out->mode == GT_FETCH_PLAIN || out->mode == GT_FETCH_KEYRELEASE, GT_E_FORMAT,
              "fetch: unknown mode %u", out->mode);
    return GT_OK;
}

gt_err gt_hp_travel_parse(gt_span body, gt_hp_travel *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(body.data, body.len);
    uint16_t n = 0;
    GT_TRY(gt_reader_u32le(&r, &out->chunk));
    GT_TRY(gt_reader_bytes(&r, out->ticket, sizeof out->ticket));
    GT_TRY(gt_reader_u16le(&r, &n));
    GT_ENSURE(n > 0 && n < sizeof out->device, GT_E_FORMAT, "travel: device address of %u bytes",
              n);
    GT_TRY(gt_reader_bytes(&r, out->device, n));
    GT_TRY(gt_reader_expect_end(&r, "travel"));
    GT_ENSURE(strlen(out->device) == n, GT_E_FORMAT, "travel: device address holds a NUL byte");
    return GT_OK;
}

gt_err gt_hp_used_parse(gt_span body, gt_hp_used *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(body.data, body.len);
    GT_TRY(gt_reader_u32le(&r, &out->chunk));
    GT_TRY(gt_reader_u64le(&r, &out->tokens));
    return gt_reader_expect_end(&r, "used");
}

const char *gt_fetch_mode_name(gt_fetch_mode mode)
{
    switch (mode) {
    case GT_FETCH_PLAIN: return "plain";
    case GT_FETCH_KEYRELEASE: return "key-release";
    case GT_FETCH_TRAVEL: return "travel";
    default: return "unknown";
    }
}

gt_err gt_hp_hello_write(gt_writer *w, const gt_hp_hello *m)
{
    size_t n = strnlen(m->trainer, sizeof m->trainer);
    GT_ENSURE(n > 0 && n < sizeof m->trainer, GT_E_ARG, "hello: trainer name must be 1..63 bytes");
    GT_TRY(gt_writer_bytes(w, m->agreement, sizeof m->agreement));
    GT_TRY(gt_writer_bytes(w, m->signing_key, sizeof m->signing_key));
    GT_TRY(gt_writer_u16le(w, (uint16_t)n));
    return gt_writer_bytes(w, m->trainer, n);
}

gt_err gt_hp_fetch_write(gt_writer *w, const gt_hp_fetch *m)
{
    GT_TRY(gt_writer_u8(w, m->mode));
    return gt_writer_u32le(w, m->chunk);
}

gt_err gt_hp_travel_write(gt_writer *w, const gt_hp_travel *m)
{
    size_t n = strnlen(m->device, sizeof m->device);
    GT_ENSURE(n > 0 && n < sizeof m->device, GT_E_ARG, "travel: device address of %zu bytes", n);
    GT_TRY(gt_writer_u32le(w, m->chunk));
    GT_TRY(gt_writer_bytes(w, m->ticket, sizeof m->ticket));
    GT_TRY(gt_writer_u16le(w, (uint16_t)n));
    return gt_writer_bytes(w, m->device, n);
}

gt_err gt_hp_used_write(gt_writer *w, const gt_hp_used *m)
{
    GT_TRY(gt_writer_u32le(w, m->chunk));
    return gt_writer_u64le(w, m->tokens);
}

gt_err gt_hp_refuse_write(gt_writer *w, gt_err why)
{
    size_t n = strnlen(why.msg, sizeof why.msg);
    if (n > GT_HP_MAX_CONTROL - 4) {
        n = GT_HP_MAX_CONTROL - 4;
    }
    GT_TRY(gt_writer_u32le(w, (uint32_t)why.code));
    return gt_writer_bytes(w, why.msg, n);
}

gt_err gt_hp_refuse_error(gt_span body, const char *holder)
{
    gt_reader r = gt_reader_init(body.data, body.len);
    uint32_t code = 0;
    GT_TRY(gt_reader_u32le(&r, &code));
    size_t n = gt_reader_left(&r);
    gt_code kind = code == (uint32_t)GT_E_RETRY ? GT_E_RETRY : GT_E_POLICY;
    return gt_errf(kind, "holder %s refused: %.*s", holder, (int)(n > 180 ? 180 : n),
                   (const char *)body.data + r.pos);
}

gt_err gt_hp_travelled_write(gt_writer *w, uint64_t bytes_loaded)
{
    return gt_writer_u64le(w, bytes_loaded);
}

gt_err gt_hp_travelled_parse(gt_span body, uint64_t *bytes_loaded)
{
    *bytes_loaded = 0;
    gt_reader r = gt_reader_init(body.data, body.len);
    GT_TRY(gt_reader_u64le(&r, bytes_loaded));
    return gt_reader_expect_end(&r, "travelled");
}

// ---- co-holder witnesses ------------------------------------------------------------------------

#define HEAD_TAG "gputravel/ledger-head/v1"
#define HEAD_CONFIRMED_TAG "gputravel/ledger-head-confirmed/v1"
#define WITNESS_TAG "gputravel/ledger-witness/v1"
#define HEAD_SIGNED (GT_HP_HEAD_BYTES - GT_ED25519_SIG_BYTES)
#define WITNESS_SIGNED (GT_HP_WITNESS_BYTES - GT_ED25519_SIG_BYTES)

// The signed bytes: the tag, its NUL, then the message without its signature.
static gt_err head_signed_bytes(const gt_hp_head *h, bool confirmed, uint8_t *out, size_t cap,
                                size_t *len)
{
    gt_writer w = gt_writer_init_fixed(out, cap);
    if (confirmed) {
        GT_TRY(gt_writer_bytes(&w, HEAD_CONFIRMED_TAG, sizeof HEAD_CONFIRMED_TAG));
    } else {
        GT_TRY(gt_writer_bytes(&w, HEAD_TAG, sizeof HEAD_TAG));
    }
    GT_TRY(gt_writer_u8(&w, 1));
    GT_TRY(gt_writer_u8(&w, h->flags));
    GT_TRY(gt_writer_bytes(&w, h->holder_key, sizeof h->holder_key));
    GT_TRY(gt_writer_bytes(&w, h->agreement, sizeof h->agreement));
    GT_TRY(gt_writer_bytes(&w, h->nonce, sizeof h->nonce));
    GT_TRY(gt_writer_u64le(&w, h->entries));
    GT_TRY(gt_writer_bytes(&w, h->head, sizeof h->head));
    *len = w.len;
    return GT_OK;
}

static gt_err witness_signed_bytes(const gt_hp_witness *h, uint8_t *out, size_t cap, size_t *len)
{
    gt_writer w = gt_writer_init_fixed(out, cap);
    GT_TRY(gt_writer_bytes(&w, WITNESS_TAG, sizeof WITNESS_TAG));
    GT_TRY(gt_writer_u8(&w, 1));
    GT_TRY(gt_writer_bytes(&w, h->witness_key, sizeof h->witness_key));
    GT_TRY(gt_writer_bytes(&w, h->subject_key, sizeof h->subject_key));
    GT_TRY(gt_writer_bytes(&w, h->agreement, sizeof h->agreement));
    GT_TRY(gt_writer_bytes(&w, h->nonce, sizeof h->nonce));
    GT_TRY(gt_writer_u64le(&w, h->entries));
    GT_TRY(gt_writer_bytes(&w, h->head, sizeof h->head));
    *len = w.len;
    return GT_OK;
}

gt_err gt_hp_head_sign(gt_hp_head *h, const uint8_t secret[GT_ED25519_SECRET_BYTES],
                       bool confirmed)
{
    uint8_t msg[sizeof HEAD_CONFIRMED_TAG + HEAD_SIGNED];
    size_t n = 0;
    GT_TRY(head_signed_bytes(h, confirmed, msg, sizeof msg, &n));
    return gt_ed25519_sign(h->sig, msg, n, secret);
}

gt_err gt_hp_head_verify(const gt_hp_head *h, bool confirmed)
{
    uint8_t msg[sizeof HEAD_CONFIRMED_TAG + HEAD_SIGNED];
    size_t n = 0;
    GT_TRY(head_signed_bytes(h, confirmed, msg, sizeof msg, &n));
    GT_ENSURE(gt_is_ok(gt_ed25519_verify(h->sig, msg, n, h->holder_key)), GT_E_AUTH,
              "ledger head: signature does not verify with the holder's key");
    return GT_OK;
}

gt_err gt_hp_head_write(gt_writer *w, const gt_hp_head *h)
{
    GT_TRY(gt_writer_u8(w, 1));
    GT_TRY(gt_writer_u8(w, h->flags));
    GT_TRY(gt_writer_bytes(w, h->holder_key, sizeof h->holder_key));
    GT_TRY(gt_writer_bytes(w, h->agreement, sizeof h->agreement));
    GT_TRY(gt_writer_bytes(w, h->nonce, sizeof h->nonce));
    GT_TRY(gt_writer_u64le(w, h->entries));
    GT_TRY(gt_writer_bytes(w, h->head, sizeof h->head));
    return gt_writer_bytes(w, h->sig, sizeof h->sig);
}

gt_err gt_hp_head_parse(gt_span body, gt_hp_head *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(body.data, body.len);
    uint8_t version = 0;
    GT_TRY(gt_reader_u8(&r, &version));
    GT_ENSURE(version == 1, GT_E_UNSUPPORTED, "ledger head: version %u", version);
    GT_TRY(gt_reader_u8(&r, &out->flags));
    GT_TRY(gt_reader_bytes(&r, out->holder_key, sizeof out->holder_key));
    GT_TRY(gt_reader_bytes(&r, out->agreement, sizeof out->agreement));
    GT_TRY(gt_reader_bytes(&r, out->nonce, sizeof out->nonce));
    GT_TRY(gt_reader_u64le(&r, &out->entries));
    GT_TRY(gt_reader_bytes(&r, out->head, sizeof out->head));
    GT_TRY(gt_reader_bytes(&r, out->sig, sizeof out->sig));
    return gt_reader_expect_end(&r, "ledger head");
}

gt_err gt_hp_witness_sign(gt_hp_witness *h, const uint8_t secret[GT_ED25519_SECRET_BYTES])
{
    uint8_t msg[sizeof WITNESS_TAG + WITNESS_SIGNED];
    size_t n = 0;
    GT_TRY(witness_signed_bytes(h, msg, sizeof msg, &n));
    return gt_ed25519_sign(h->sig, msg, n, secret);
}

gt_err gt_hp_witness_verify(const gt_hp_witness *h)
{
    uint8_t msg[sizeof WITNESS_TAG + WITNESS_SIGNED];
    size_t n = 0;
    GT_TRY(witness_signed_bytes(h, msg, sizeof msg, &n));
    GT_ENSURE(gt_is_ok(gt_ed25519_verify(h->sig, msg, n, h->witness_key)), GT_E_AUTH,
              "ledger witness: signature does not verify with the witness's key");
    return GT_OK;
}

gt_err gt_hp_witness_write(gt_writer *w, const gt_hp_witness *h)
{
    GT_TRY(gt_writer_u8(w, 1));
    GT_TRY(gt_writer_bytes(w, h->witness_key, sizeof h->witness_key));
    GT_TRY(gt_writer_bytes(w, h->subject_key, sizeof h->subject_key));
    GT_TRY(gt_writer_bytes(w, h->agreement, sizeof h->agreement));
    GT_TRY(gt_writer_bytes(w, h->nonce, sizeof h->nonce));
    GT_TRY(gt_writer_u64le(w, h->entries));
    GT_TRY(gt_writer_bytes(w, h->head, sizeof h->head));
    return gt_writer_bytes(w, h->sig, sizeof h->sig);
}

static gt_err witness_read(gt_reader *r, gt_hp_witness *out)
{
    memset(out, 0, sizeof *out);
    uint8_t version = 0;
    GT_TRY(gt_reader_u8(r, &version));
    GT_ENSURE(version == 1, GT_E_UNSUPPORTED, "ledger witness: version %u", version);
    GT_TRY(gt_reader_bytes(r, out->witness_key, sizeof out->witness_key));
    GT_TRY(gt_reader_bytes(r, out->subject_key, sizeof out->subject_key));
    GT_TRY(gt_reader_bytes(r, out->agreement, sizeof out->agreement));
    GT_TRY(gt_reader_bytes(r, out->nonce, sizeof out->nonce));
    GT_TRY(gt_reader_u64le(r, &out->entries));
    GT_TRY(gt_reader_bytes(r, out->head, sizeof out->head));
    return gt_reader_bytes(r, out->sig, sizeof out->sig);
}

gt_err gt_hp_witness_parse(gt_span body, gt_hp_witness *out)
{
    gt_reader r = gt_reader_init(body.data, body.len);
    GT_TRY(witness_read(&r, out));
    return gt_reader_expect_end(&r, "ledger witness");
}

gt_err gt_hp_witnesses_parse(gt_span body, gt_hp_witness *out, size_t cap, size_t *count)
{
    *count = 0;
    gt_reader r = gt_reader_init(body.data, body.len);
    uint8_t n = 0;
    GT_TRY(gt_reader_u8(&r, &n));
    GT_ENSURE(n <= cap, GT_E_LIMIT, "ledger witnesses: %u (at most %zu)", n, cap);
    for (uint8_t i = 0; i < n; i++) {
        GT_TRY(witness_read(&r, &out[i]));
    }
    GT_TRY(gt_reader_expect_end(&r, "ledger witnesses"));
    *count = n;
    return GT_OK;
}
