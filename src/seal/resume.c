// Device-sealed resume state (seal.h; docs/formats.md "Resume state"): params | m | v under
// AES-256-GCM with a key only the sealing device can derive (its resume secret, bound to the
// agreement hash and its device id), the whole header as AAD. Read only through gt_reader; the
// device id and agreement are checked before any decryption, the body is released only after
// its tag verified.
#include <gputravel/seal.h>

#include <stdlib.h>
#include <string.h>

#define RESUME_LABEL "gputravel resume v1"
#define IO_BYTES GT_SEAL_IO_BYTES

uint64_t gt_resume_file_bytes(const gt_resume_header *h)
{
    return (uint64_t)h->header_len + h->params_bytes + h->m_bytes + h->v_bytes +
           GT_AEAD_TAG_BYTES;
}

static gt_err sizes_check(const gt_resume_header *h)
{
    GT_ENSURE(h->params_bytes > 0 && h->params_bytes % 4 == 0 &&
                  h->params_bytes <= GT_RESUME_MAX_PARAM_BYTES,
              GT_E_FORMAT, "parameters of %llu bytes (expected a positive multiple of 4 up to "
              "%llu)", (unsigned long long)h->params_bytes,
              (unsigned long long)GT_RESUME_MAX_PARAM_BYTES);
    GT_ENSURE(h->m_bytes == h->v_bytes && (h->m_bytes == 0 || h->m_bytes == h->params_bytes),
              GT_E_FORMAT, "moments of %llu and %llu bytes for %llu bytes of parameters "
              "(expected none, or both the parameters' size)", (unsigned long long)h->m_bytes,
              (unsigned long long)h->v_bytes, (unsigned long long)h->params_bytes);
    GT_ENSURE(h->m_bytes != 0 || h->step == 0, GT_E_FORMAT,
              "step %llu without optimizer moments", (unsigned long long)h->step);
    GT_ENSURE(h->loader.shuffle <= 1, GT_E_FORMAT, "loader shuffle %u (expected 0 or 1)",
              h->loader.shuffle);
    GT_ENSURE(h->label_count <= GT_RESUME_MAX_LABELS, GT_E_FORMAT,
              "%u labels (at most %d)", h->label_count, GT_RESUME_MAX_LABELS);
    for (uint32_t i = 0; i < h->label_count; i++) {
        for (uint32_t j = 0; j < i; j++) {
            GT_ENSURE(memcmp(h->labels[i], h->labels[j], GT_RESUME_LABEL_BYTES) != 0,
                      GT_E_FORMAT, "label %u repeats label %u", i, j);
        }
    }
    return gt_sckpt_model_check(&h->model);
}

static gt_err fields_read(gt_reader *r, gt_resume_header *h)
{
    GT_TRY(gt_reader_bytes(r, h->device_id, sizeof h->device_id));
    GT_TRY(gt_reader_bytes(r, h->agreement_hash, sizeof h->agreement_hash));
    GT_TRY(gt_reader_u64le(r, &h->step));
    GT_TRY(gt_reader_u64le(r, &h->loader.epoch));
    GT_TRY(gt_reader_u64le(r, &h->loader.shard));
    GT_TRY(gt_reader_u64le(r, &h->loader.sample));
    GT_TRY(gt_reader_u64le(r, &h->loader.sample_tokens));
    GT_TRY(gt_reader_u64le(r, &h->loader.seed));
    GT_TRY(gt_reader_u32le(r, &h->loader.shuffle));
    uint32_t *cf[6] = {&h->model.max_seq_len, &h->model.vocab_size, &h->model.num_layers,
                       &h->model.num_heads, &h->model.channels, &h->model.padded_vocab_size};
    for (int i = 0; i < 6; i++) {
        GT_TRY(gt_reader_u32le(r, cf[i]));
    }
    GT_TRY(gt_reader_u64le(r, &h->params_bytes));
    GT_TRY(gt_reader_u64le(r, &h->m_bytes));
    GT_TRY(gt_reader_u64le(r, &h->v_bytes));
    GT_TRY(gt_reader_u32le(r, &h->label_count));
    GT_ENSURE(h->label_count <= GT_RESUME_MAX_LABELS, GT_E_FORMAT,
              "%u labels (at most %d)", h->label_count, GT_RESUME_MAX_LABELS);
    for (uint32_t i = 0; i < h->label_count; i++) {
        GT_TRY(gt_reader_bytes(r, h->labels[i], GT_RESUME_LABEL_BYTES));
    }
    return gt_reader_bytes(r, h->iv, sizeof h->iv);
}

gt_err gt_resume_header_parse(gt_resume_header *h, const uint8_t *data, size_t len)
{
    memset(h, 0, sizeof *h);
    gt_reader r = gt_reader_init(data, len);
    uint8_t magic[8] = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_reader_bytes(&r, magic, sizeof magic), fail);
    GT_ENSURE_GOTO(err, memcmp(magic, GT_RESUME_MAGIC, 8) == 0, fail, GT_E_FORMAT,
                   "not a resume state (magic is not %s)", GT_RESUME_MAGIC);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->version), fail);
    GT_ENSURE_GOTO(err, h->version == GT_RESUME_VERSION, fail, GT_E_UNSUPPORTED,
                   "resume state version %u (expected %d)", h->version, GT_RESUME_VERSION);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->suite), fail);
    GT_ENSURE_GOTO(err, h->suite == GT_RESUME_SUITE_HKDF_SHA256_AES256GCM, fail,
                   GT_E_UNSUPPORTED, "cipher suite %u (expected %d)", h->suite,
                   GT_RESUME_SUITE_HKDF_SHA256_AES256GCM);
    GT_TRY_GOTO(err, fields_read(&r, h), fail);
    GT_TRY_GOTO(err, sizes_check(h), fail);
    h->header_len = r.pos;
    return GT_OK;
fail:
    memset(h, 0, sizeof *h);
    return gt_err_wrap(err, "resume state");
}

static gt_err header_encode(gt_writer *w, const gt_resume_header *h)
{
    GT_TRY(gt_writer_bytes(w, GT_RESUME_MAGIC, 8));
    GT_TRY(gt_writer_u32le(w, h->version));
    GT_TRY(gt_writer_u32le(w, h->suite));
    GT_TRY(gt_writer_bytes(w, h->device_id, sizeof h->device_id));
    GT_TRY(gt_writer_bytes(w, h->agreement_hash, sizeof h->agreement_hash));
    GT_TRY(gt_writer_u64le(w, h->step));
    const uint64_t pos[5] = {h->loader.epoch, h->loader.shard, h->loader.sample,
                             h->loader.sample_tokens, h->loader.seed};
    for (int i = 0; i < 5; i++) {
        GT_TRY(gt_writer_u64le(w, pos[i]));
    }
    GT_TRY(gt_writer_u32le(w, h->loader.shuffle));
    const uint32_t cf[6] = {h->model.max_seq_len, h->model.vocab_size, h->model.num_layers,
                            h->model.num_heads, h->model.channels, h->model.padded_vocab_size};
    for (int i = 0; i < 6; i++) {
        GT_TRY(gt_writer_u32le(w, cf[i]));
    }
    GT_TRY(gt_writer_u64le(w, h->params_bytes));
    GT_TRY(gt_writer_u64le(w, h->m_bytes));
    GT_TRY(gt_writer_u64le(w, h->v_bytes));
    GT_TRY(gt_writer_u32le(w, h->label_count));
    for (uint32_t i = 0; i < h->label_count; i++) {
        GT_TRY(gt_writer_bytes(w, h->labels[i], GT_RESUME_LABEL_BYTES));
    }
    return gt_writer_bytes(w, h->iv, sizeof h->iv);
}

// K = HKDF-SHA256(ikm = secret, no salt, info = label | agreement hash | device id).
static gt_err resume_key(uint8_t key[GT_AEAD_KEY_BYTES],
                         const uint8_t secret[GT_RESUME_SECRET_BYTES], const gt_resume_header *h)
{
    uint8_t info[sizeof RESUME_LABEL - 1 + GT_SHA256_BYTES + GT_RESUME_DEVICE_ID_BYTES];
    size_t n = sizeof RESUME_LABEL - 1;
    memcpy(info, RESUME_LABEL, n);
    memcpy(info + n, h->agreement_hash, GT_SHA256_BYTES);
    n += GT_SHA256_BYTES;
    memcpy(info + n, h->device_id, GT_RESUME_DEVICE_ID_BYTES);
    n += GT_RESUME_DEVICE_ID_BYTES;
    return gt_hkdf(GT_HASH_SHA256, key, GT_AEAD_KEY_BYTES, secret, GT_RESUME_SECRET_BYTES, NULL,
                   0, info, n);
}

// Streams src through s into out (which has room: reserved by the caller).
static gt_err body_stream(const gt_seal_source *src, gt_aead_stream *s, gt_buf *out)
{
    for (uint64_t at = 0; at < src->len;) {
        size_t k = (size_t)(src->len - at < IO_BYTES ? src->len - at : IO_BYTES);
        uint8_t *dst = out->data + out->len;
        GT_TRY(src->read(src->ctx, dst, k));
        GT_TRY(gt_aead_stream_update(s, dst, dst, k));  // in place: plaintext never stays
        out->len += k;
        at += k;
    }
    return GT_OK;
}

gt_err gt_resume_seal(gt_resume_header *h, const uint8_t secret[GT_RESUME_SECRET_BYTES],
                      const gt_seal_source *src, gt_buf *out)
{
    out->len = 0;
    h->version = GT_RESUME_VERSION;
    h->suite = GT_RESUME_SUITE_HKDF_SHA256_AES256GCM;
    GT_TRY(gt_err_wrap(sizes_check(h), "resume state"));
    GT_ENSURE(src->len == h->params_bytes + h->m_bytes + h->v_bytes, GT_E_ARG,
              "resume state: %llu bytes to seal, the header announces %llu",
              (unsigned long long)src->len,
              (unsigned long long)(h->params_bytes + h->m_bytes + h->v_bytes));
    uint8_t key[GT_AEAD_KEY_BYTES] = {0};
    gt_aead_stream *s = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_random_bytes(h->iv, sizeof h->iv), out);
    h->header_len = GT_RESUME_FIXED_BYTES + (size_t)h->label_count * GT_RESUME_LABEL_BYTES +
                    GT_AEAD_IV_BYTES;
    GT_TRY_GOTO(err, gt_buf_reserve(out, (size_t)gt_resume_file_bytes(h)), out);
    gt_writer w = gt_writer_init_fixed(out->data, out->cap);
    GT_TRY_GOTO(err, header_encode(&w, h), out);
    out->len = w.len;
    GT_TRY_GOTO(err, resume_key(key, secret, h), out);
    GT_TRY_GOTO(err, gt_aead_stream_new(&s, true, out->data, h->header_len, h->iv, key), out);
    GT_TRY_GOTO(err, body_stream(src, s, out), out);
    GT_TRY_GOTO(err, gt_aead_stream_final(s, out->data + out->len), out);
    out->len += GT_AEAD_TAG_BYTES;
out:
    gt_aead_stream_free(s);
    gt_secure_zero(key, sizeof key);
    if (!gt_is_ok(err)) {
        if (out->data != NULL) {
            gt_secure_zero(out->data, out->cap);  // a part may be plaintext not yet encrypted
        }
        out->len = 0;
    }
    return err;
}

// What the header binds, against what this device and session are (public values).
static gt_err binding_check(const gt_resume_header *h,
                            const uint8_t device_id[GT_RESUME_DEVICE_ID_BYTES],
                            const uint8_t agreement_hash[GT_SHA256_BYTES])
{
    char got[2 * GT_SHA256_BYTES + 1], want[2 * GT_SHA256_BYTES + 1];
    if (memcmp(h->device_id, device_id, GT_RESUME_DEVICE_ID_BYTES) != 0) {
        gt_hex_encode(got, sizeof got, h->device_id, GT_RESUME_DEVICE_ID_BYTES);
        gt_hex_encode(want, sizeof want, device_id, GT_RESUME_DEVICE_ID_BYTES);
        return gt_errf(GT_E_AUTH, "resume state was sealed by another device (%.16s...), not "
                                  "this one (%.16s...)", got, want);
    }
    if (memcmp(h->agreement_hash, agreement_hash, GT_SHA256_BYTES) != 0) {
        gt_hex_encode(got, sizeof got, h->agreement_hash, GT_SHA256_BYTES);
        gt_hex_encode(want, sizeof want, agreement_hash, GT_SHA256_BYTES);
        return gt_errf(GT_E_AUTH, "resume state belongs to another agreement (%.16s...), not "
                                  "this session's (%.16s...)", got, want);
    }
    return GT_OK;
}

// The tag after the n body bytes of a checked file (size_check / gt_resume_file_bytes proved it is
// in bounds), against the stream that decrypted them.
static gt_err body_tag_check(gt_aead_stream *s, gt_span file, const gt_resume_header *h,
                             uint64_t n)
{
    uint8_t tag[GT_AEAD_TAG_BYTES];
    memcpy(tag, file.data + h->header_len + n, sizeof tag);
    gt_err e = gt_aead_stream_final(s, tag);
    GT_ENSURE(e.code == GT_E_NONE, GT_E_AUTH,
              "resume state does not authenticate: it was tampered with, or sealed under another "
              "device secret");
    return GT_OK;
}

static gt_err size_check(const gt_resume_header *h, size_t len)
{
    uint64_t want = gt_resume_file_bytes(h);
    GT_ENSURE(len >= want, GT_E_TRUNCATED, "resume state ends early: %zu bytes, the header "
              "announces %llu", len, (unsigned long long)want);
    GT_ENSURE(len == want, GT_E_FORMAT, "resume state has %llu bytes after its end",
              (unsigned long long)(len - want));
    return GT_OK;
}

gt_err gt_resume_open(gt_span file, const uint8_t secret[GT_RESUME_SECRET_BYTES],
                      const uint8_t device_id[GT_RESUME_DEVICE_ID_BYTES],
                      const uint8_t agreement_hash[GT_SHA256_BYTES], gt_resume_header *h,
                      gt_buf *body)
{
    body->len = 0;
    uint8_t key[GT_AEAD_KEY_BYTES] = {0};
    gt_aead_stream *s = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_resume_header_parse(h, file.data, file.len), out);
    GT_TRY_GOTO(err, size_check(h, file.len), out);
    GT_TRY_GOTO(err, binding_check(h, device_id, agreement_hash), out);
    uint64_t n = h->params_bytes + h->m_bytes + h->v_bytes;
    GT_TRY_GOTO(err, gt_buf_reserve(body, (size_t)n), out);
    GT_TRY_GOTO(err, resume_key(key, secret, h), out);
    GT_TRY_GOTO(err, gt_aead_stream_new(&s, false, file.data, h->header_len, h->iv, key), out);
    // size_check proved header_len + n + tag == file.len: the body and tag are in bounds.
    GT_TRY_GOTO(err, gt_aead_stream_update(s, body->data, file.data + h->header_len, (size_t)n),
                out);
    body->len = (size_t)n;
    GT_TRY_GOTO(err, body_tag_check(s, file, h, n), out);
out:
    gt_aead_stream_free(s);
    gt_secure_zero(key, sizeof key);
    if (!gt_is_ok(err)) {
        if (body->data != NULL) {
            gt_secure_zero(body->data, body->cap);  // decrypted before the tag failed
        }
        body->len = 0;
        memset(h, 0, sizeof *h);
    }
    return err;
}

// One pass over the body of a checked file: decrypted IO_BYTES at a time into a scratch buffer,
// each piece handed to put (none: verification only), then the tag.
static gt_err body_pass(gt_span file, const gt_resume_header *h,
                        const uint8_t key[GT_AEAD_KEY_BYTES], gt_resume_put_fn put, void *ctx)
{
    uint64_t n = h->params_bytes + h->m_bytes + h->v_bytes;
    GT_ENSURE(gt_resume_file_bytes(h) == file.len, GT_E_FORMAT, "resume state: another file");
    uint8_t *io = malloc(IO_BYTES);
    GT_ENSURE(io != NULL, GT_E_NOMEM, "resume state: out of memory");
    gt_aead_stream *s = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_aead_stream_new(&s, false, file.data, h->header_len, h->iv, key), out);
    for (uint64_t at = 0; at < n;) {
        size_t k = (size_t)(n - at < IO_BYTES ? n - at : IO_BYTES);
        GT_TRY_GOTO(err, gt_aead_stream_update(s, io, file.data + h->header_len + at, k), out);
        if (put != NULL) {
            GT_TRY_GOTO(err, put(ctx, at, io, k), out);
        }
        at += k;
    }
    GT_TRY_GOTO(err, body_tag_check(s, file, h, n), out);
out:
    gt_aead_stream_free(s);
    gt_secure_zero(io, IO_BYTES);
    free(io);
    return err;
}

gt_err gt_resume_verify(gt_span file, const uint8_t secret[GT_RESUME_SECRET_BYTES],
                        const uint8_t device_id[GT_RESUME_DEVICE_ID_BYTES],
                        const uint8_t agreement_hash[GT_SHA256_BYTES], gt_resume_header *h)
{
    uint8_t key[GT_AEAD_KEY_BYTES] = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_resume_header_parse(h, file.data, file.len), out);
    GT_TRY_GOTO(err, size_check(h, file.len), out);
    GT_TRY_GOTO(err, binding_check(h, device_id, agreement_hash), out);
    GT_TRY_GOTO(err, resume_key(key, secret, h), out);
    GT_TRY_GOTO(err, body_pass(file, h, key, NULL, NULL), out);
out:
    gt_secure_zero(key, sizeof key);
    if (!gt_is_ok(err)) {
        memset(h, 0, sizeof *h);
    }
    return err;
}

gt_err gt_resume_decrypt_to(gt_span file, const uint8_t secret[GT_RESUME_SECRET_BYTES],
                            const gt_resume_header *h, gt_resume_put_fn put, void *ctx)
{
    uint8_t key[GT_AEAD_KEY_BYTES] = {0};
    gt_err err = resume_key(key, secret, h);
    if (gt_is_ok(err)) {
        err = body_pass(file, h, key, put, ctx);
    }
    gt_secure_zero(key, sizeof key);
    return err;
}
