// Sealed checkpoints: an llm.c checkpoint encrypted once under a random content key, that key
// wrapped for each recipient with X25519 + HKDF-SHA256 + AES-256-GCM (data.h; docs/formats.md
// "Sealed checkpoint"). The header is read only through gt_reader; the body streams through
// AES-256-GCM in constant memory and reaches its name only after its tag and the signer's
// Ed25519 signature over SHA-256(header || ciphertext || tag) verified.
#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WRAP_LABEL "gputravel sealed checkpoint wrap v1"
#define WRAP_OKM_BYTES (GT_AEAD_KEY_BYTES + GT_AEAD_IV_BYTES)
#define LLMC_PREFIX_BYTES 32  // the 8 int32 of an llm.c header that name format and shapes
#define IO_BYTES GT_SEAL_IO_BYTES

uint64_t gt_sckpt_file_bytes(const gt_sckpt_header *h)
{
    return (uint64_t)h->header_len + h->plaintext_len + GT_AEAD_TAG_BYTES + GT_SCKPT_SIG_BYTES;
}

// 1..63 characters of [A-Za-z0-9._-], NUL-padded to 64 bytes (the agreement's name rule).
static gt_err name_check(const uint8_t raw[GT_SCKPT_NAME_BYTES], uint32_t index)
{
    size_t n = 0;
    while (n < GT_SCKPT_NAME_BYTES && raw[n] != 0) {
        uint8_t c = raw[n];
        GT_ENSURE((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.',
                  GT_E_FORMAT, "recipient %u: name holds byte 0x%02x", index, c);
        n++;
    }
    GT_ENSURE(n > 0 && n < GT_SCKPT_NAME_BYTES, GT_E_FORMAT,
              "recipient %u: name must have 1..%d characters", index, GT_SCKPT_NAME_BYTES - 1);
    for (size_t i = n; i < GT_SCKPT_NAME_BYTES; i++) {
        GT_ENSURE(raw[i] == 0, GT_E_FORMAT, "recipient %u: name padding is not zero", index);
    }
    return GT_OK;
}

// Names and keys are unique: one wrap per recipient, one recipient per key.
static gt_err recipients_check(const gt_sckpt_recipient *r, uint32_t n)
{
    GT_ENSURE(n >= 1 && n <= GT_SCKPT_MAX_RECIPIENTS, GT_E_FORMAT,
              "%u recipients (expected 1..%d)", n, GT_SCKPT_MAX_RECIPIENTS);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < i; j++) {
            GT_ENSURE(strcmp(r[i].name, r[j].name) != 0, GT_E_FORMAT,
                      "recipient '%s' appears twice", r[i].name);
            GT_ENSURE(memcmp(r[i].pub, r[j].pub, GT_X25519_BYTES) != 0, GT_E_FORMAT,
                      "recipients '%s' and '%s' have the same key", r[j].name, r[i].name);
        }
    }
    return GT_OK;
}

void gt_sckpt_llmc_header(uint8_t out[GT_SCKPT_LLMC_HEADER_BYTES], const gt_sckpt_model *m)
{
    memset(out, 0, GT_SCKPT_LLMC_HEADER_BYTES);
    const uint32_t h[8] = {GT_SCKPT_LLMC_MAGIC, GT_SCKPT_LLMC_VERSION, m->max_seq_len,
                           m->vocab_size, m->num_layers, m->num_heads, m->channels,
                           m->padded_vocab_size};
    for (int i = 0; i < 8; i++) {
        gt_store_u32le(out + 4 * i, h[i]);
    }
}

gt_err gt_sckpt_model_check(const gt_sckpt_model *m)
{
    GT_ENSURE(m->max_seq_len > 0 && m->vocab_size > 0 && m->num_layers > 0 && m->num_heads > 0 &&
                  m->channels > 0 && m->padded_vocab_size >= m->vocab_size &&
                  m->max_seq_len <= INT32_MAX && m->padded_vocab_size <= INT32_MAX &&
                  m->num_layers <= INT32_MAX && m->channels <= INT32_MAX,
              GT_E_FORMAT, "model config: shapes must be positive and Vp >= V");
    return GT_OK;
}

gt_err gt_sckpt_header_parse(gt_sckpt_header *h, const uint8_t *data, size_t len)
{
    memset(h, 0, sizeof *h);
    gt_reader r = gt_reader_init(data, len);
    uint8_t magic[8] = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_reader_bytes(&r, magic, sizeof magic), fail);
    GT_ENSURE_GOTO(err, memcmp(magic, GT_SCKPT_MAGIC, 8) == 0, fail, GT_E_FORMAT,
                   "not a sealed checkpoint (magic is not %s)", GT_SCKPT_MAGIC);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->version), fail);
    GT_ENSURE_GOTO(err, h->version != 1, fail, GT_E_UNSUPPORTED,
                   "sealed checkpoint version 1 is unsigned: it does not say who sealed it "
                   "(expected version %d)", GT_SCKPT_VERSION);
    GT_ENSURE_GOTO(err, h->version == GT_SCKPT_VERSION, fail, GT_E_UNSUPPORTED,
                   "sealed checkpoint version %u (expected %d)", h->version, GT_SCKPT_VERSION);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->suite), fail);
    GT_ENSURE_GOTO(err, h->suite == GT_SCKPT_SUITE_X25519_HKDF_SHA256_AES256GCM, fail,
                   GT_E_UNSUPPORTED, "cipher suite %u (expected %d)", h->suite,
                   GT_SCKPT_SUITE_X25519_HKDF_SHA256_AES256GCM);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->content), fail);
    GT_ENSURE_GOTO(err, h->content == GT_SCKPT_CONTENT_LLMC_FP32, fail, GT_E_UNSUPPORTED,
                   "content type %u (expected %d: llm.c fp32 checkpoint)", h->content,
                   GT_SCKPT_CONTENT_LLMC_FP32);
    GT_TRY_GOTO(err, gt_reader_bytes(&r, h->agreement_hash, sizeof h->agreement_hash), fail);
    GT_TRY_GOTO(err, gt_reader_u64le(&r, &h->step), fail);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->model.max_seq_len), fail);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->model.vocab_size), fail);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->model.num_layers), fail);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->model.num_heads), fail);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->model.channels), fail);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->model.padded_vocab_size), fail);
    GT_TRY_GOTO(err, gt_sckpt_model_check(&h->model), fail);
    GT_TRY_GOTO(err, gt_reader_u64le(&r, &h->plaintext_len), fail);
    GT_ENSURE_GOTO(err, h->plaintext_len >= LLMC_PREFIX_BYTES &&
                            h->plaintext_len <= GT_SCKPT_MAX_PLAINTEXT,
                   fail, GT_E_FORMAT, "plaintext length %llu (expected %d..%llu)",
                   (unsigned long long)h->plaintext_len, LLMC_PREFIX_BYTES,
                   (unsigned long long)GT_SCKPT_MAX_PLAINTEXT);
    GT_TRY_GOTO(err, gt_reader_bytes(&r, h->body_iv, sizeof h->body_iv), fail);
    GT_TRY_GOTO(err, gt_reader_bytes(&r, h->ephemeral_pub, sizeof h->ephemeral_pub), fail);
    GT_TRY_GOTO(err, gt_reader_bytes(&r, h->signer_pub, sizeof h->signer_pub), fail);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &h->recipient_count), fail);
    GT_ENSURE_GOTO(err, h->recipient_count >= 1 &&
                            h->recipient_count <= GT_SCKPT_MAX_RECIPIENTS,
                   fail, GT_E_FORMAT, "%u recipients (expected 1..%d)", h->recipient_count,
                   GT_SCKPT_MAX_RECIPIENTS);
    for (uint32_t i = 0; i < h->recipient_count; i++) {
        uint8_t raw[GT_SCKPT_NAME_BYTES] = {0};
        GT_TRY_GOTO(err, gt_reader_bytes(&r, raw, sizeof raw), fail);
        GT_TRY_GOTO(err, name_check(raw, i), fail);
        memcpy(h->recipients[i].name, raw, sizeof raw);
        GT_TRY_GOTO(err, gt_reader_bytes(&r, h->recipients[i].pub, GT_X25519_BYTES), fail);
    }
    GT_TRY_GOTO(err, recipients_check(h->recipients, h->recipient_count), fail);
    h->bound_len = r.pos;
    for (uint32_t i = 0; i < h->recipient_count; i++) {
        GT_TRY_GOTO(err, gt_reader_bytes(&r, h->wraps[i], GT_SCKPT_WRAP_BYTES), fail);
    }
    h->header_len = r.pos;
    return GT_OK;
fail:
    memset(h, 0, sizeof *h);
    return gt_err_wrap(err, "sealed checkpoint");
}

// The bound part, as gt_sckpt_header_parse reads it.
static gt_err bound_encode(gt_writer *w, const gt_sckpt_header *h)
{
    GT_TRY(gt_writer_bytes(w, GT_SCKPT_MAGIC, 8));
    GT_TRY(gt_writer_u32le(w, h->version));
    GT_TRY(gt_writer_u32le(w, h->suite));
    GT_TRY(gt_writer_u32le(w, h->content));
    GT_TRY(gt_writer_bytes(w, h->agreement_hash, sizeof h->agreement_hash));
    GT_TRY(gt_writer_u64le(w, h->step));
    GT_TRY(gt_writer_u32le(w, h->model.max_seq_len));
    GT_TRY(gt_writer_u32le(w, h->model.vocab_size));
    GT_TRY(gt_writer_u32le(w, h->model.num_layers));
    GT_TRY(gt_writer_u32le(w, h->model.num_heads));
    GT_TRY(gt_writer_u32le(w, h->model.channels));
    GT_TRY(gt_writer_u32le(w, h->model.padded_vocab_size));
    GT_TRY(gt_writer_u64le(w, h->plaintext_len));
    GT_TRY(gt_writer_bytes(w, h->body_iv, sizeof h->body_iv));
    GT_TRY(gt_writer_bytes(w, h->ephemeral_pub, sizeof h->ephemeral_pub));
    GT_TRY(gt_writer_bytes(w, h->signer_pub, sizeof h->signer_pub));
    GT_TRY(gt_writer_u32le(w, h->recipient_count));
    for (uint32_t i = 0; i < h->recipient_count; i++) {
        uint8_t raw[GT_SCKPT_NAME_BYTES] = {0};
        memcpy(raw, h->recipients[i].name, strnlen(h->recipients[i].name, sizeof raw - 1));
        GT_TRY(gt_writer_bytes(w, raw, sizeof raw));
        GT_TRY(gt_writer_bytes(w, h->recipients[i].pub, GT_X25519_BYTES));
    }
    return GT_OK;
}

// Wrapping key and IV for recipient i: HKDF-SHA256(ikm = X25519 shared secret, no salt,
// info = label || ephemeral public || recipient public || u32le i).
static gt_err wrap_okm(uint8_t okm[WRAP_OKM_BYTES], const uint8_t shared[GT_X25519_BYTES],
                       const gt_sckpt_header *h, uint32_t i)
{
    uint8_t info[sizeof WRAP_LABEL - 1 + 2 * GT_X25519_BYTES + 4];
    size_t n = sizeof WRAP_LABEL - 1;
    memcpy(info, WRAP_LABEL, n);
    memcpy(info + n, h->ephemeral_pub, GT_X25519_BYTES);
    n += GT_X25519_BYTES;
    memcpy(info + n, h->recipients[i].pub, GT_X25519_BYTES);
    n += GT_X25519_BYTES;
    gt_store_u32le(info + n, i);
    n += 4;
    return gt_hkdf(GT_HASH_SHA256, okm, WRAP_OKM_BYTES, shared, GT_X25519_BYTES, NULL, 0, info,
                   n);
}

// The first 32 bytes of an llm.c fp32 checkpoint: magic, version, maxT, V, L, NH, C, Vp.
static gt_err llmc_prefix_check(const uint8_t *p, size_t len, const gt_sckpt_model *m,
                                const char *what)
{
    gt_reader r = gt_reader_init(p, len);
    uint32_t v[8] = {0};
    for (int i = 0; i < 8; i++) {
        GT_TRY(gt_err_wrap(gt_reader_u32le(&r, &v[i]), "%s", what));
    }
    GT_ENSURE(v[0] == GT_SCKPT_LLMC_MAGIC && v[1] == GT_SCKPT_LLMC_VERSION, GT_E_FORMAT,
              "%s: not an llm.c fp32 checkpoint (magic %u, version %u)", what, v[0], v[1]);
    GT_ENSURE(v[2] == m->max_seq_len && v[3] == m->vocab_size && v[4] == m->num_layers &&
                  v[5] == m->num_heads && v[6] == m->channels && v[7] == m->padded_vocab_size,
              GT_E_FORMAT,
              "%s: model shapes (maxT %u V %u L %u NH %u C %u Vp %u) differ from the sealed "
              "config (maxT %u V %u L %u NH %u C %u Vp %u)",
              what, v[2], v[3], v[4], v[5], v[6], v[7], m->max_seq_len, m->vocab_size,
              m->num_layers, m->num_heads, m->channels, m->padded_vocab_size);
    return GT_OK;
}

static gt_err read_exact(FILE *fp, void *out, size_t n, const char *path)
{
    size_t got = fread(out, 1, n, fp);
    GT_ENSURE(got == n, GT_E_TRUNCATED, "%s: ends early (%s)", path,
              ferror(fp) ? strerror(errno) : "short read");
    return GT_OK;
}

// The signed message: SHA-256 of everything before the signature (the magic opens it, so the
// digest names its format).
static gt_err sig_digest_new(gt_hash_ctx **ctx, const uint8_t *header, size_t header_len)
{
    GT_TRY(gt_hash_new(ctx, GT_HASH_SHA256));
    return gt_hash_update(*ctx, header, header_len);
}

static gt_err seal_params_check(const gt_sckpt_seal_params *p)
{
    GT_TRY(recipients_check(p->recipients, p->recipient_count));
    for (uint32_t i = 0; i < p->recipient_count; i++) {
        uint8_t raw[GT_SCKPT_NAME_BYTES] = {0};
        size_t n = strnlen(p->recipients[i].name, GT_SCKPT_NAME_BYTES);
        GT_ENSURE(n < GT_SCKPT_NAME_BYTES, GT_E_FORMAT, "recipient %u: name too long", i);
        memcpy(raw, p->recipients[i].name, n);
        GT_TRY(name_check(raw, i));
    }
    return gt_sckpt_model_check(&p->model);
}

// The header's fields from the parameters, all but the random and derived ones.
static void header_fill(gt_sckpt_header *h, const gt_sckpt_seal_params *p, uint64_t size)
{
    h->version = GT_SCKPT_VERSION;
    h->suite = GT_SCKPT_SUITE_X25519_HKDF_SHA256_AES256GCM;
    h->content = GT_SCKPT_CONTENT_LLMC_FP32;
    memcpy(h->agreement_hash, p->agreement_hash, sizeof h->agreement_hash);
    h->step = p->step;
    h->model = p->model;
    h->plaintext_len = size;
    h->recipient_count = p->recipient_count;
    for (uint32_t i = 0; i < p->recipient_count; i++) {
        h->recipients[i] = p->recipients[i];
        h->recipients[i].name[GT_SCKPT_NAME_BYTES - 1] = '\0';
    }
}

// Wraps the content key for every recipient and appends the wraps to the header being written
// in w; header[0, bound_len) is their AAD. es: one ephemeral key for the file, one shared secret
// per recipient, wiped here on every path.
static gt_err wraps_seal(gt_sckpt_header *h, gt_writer *w, const uint8_t *header,
                         const uint8_t content_key[GT_AEAD_KEY_BYTES],
                         const uint8_t eph_sec[GT_X25519_BYTES])
{
    uint8_t shared[GT_X25519_BYTES] = {0}, okm[WRAP_OKM_BYTES] = {0};
    gt_err err = GT_OK;
    for (uint32_t i = 0; i < h->recipient_count; i++) {
        size_t n = 0;
        GT_TRY_GOTO(err, gt_err_wrap(gt_x25519_shared(shared, h->recipients[i].pub, eph_sec),
                                     "recipient '%s'", h->recipients[i].name), out);
        GT_TRY_GOTO(err, wrap_okm(okm, shared, h, i), out);
        GT_TRY_GOTO(err, gt_aead_seal(h->wraps[i], GT_SCKPT_WRAP_BYTES, &n, content_key,
                                      GT_AEAD_KEY_BYTES, header, h->bound_len,
                                      okm + GT_AEAD_KEY_BYTES, okm), out);
        GT_TRY_GOTO(err, gt_writer_bytes(w, h->wraps[i], GT_SCKPT_WRAP_BYTES), out);
        gt_secure_zero(shared, sizeof shared);
        gt_secure_zero(okm, sizeof okm);
    }
out:
    gt_secure_zero(shared, sizeof shared);
    gt_secure_zero(okm, sizeof okm);
    return err;
}

// Encrypts, hashes and hands on the body; io already holds its first LLMC_PREFIX_BYTES.
static gt_err body_seal(const gt_seal_source *src, uint8_t *io, gt_aead_stream *s,
                        gt_hash_ctx *hc, const gt_seal_sink *sink)
{
    size_t have = LLMC_PREFIX_BYTES;  // bytes of io already read
    for (uint64_t at = 0; at < src->len;) {
        size_t k = (size_t)(src->len - at < IO_BYTES ? src->len - at : IO_BYTES);
        if (have < k) {
            GT_TRY(src->read(src->ctx, io + have, k - have));
        }
        have = 0;
        GT_TRY(gt_aead_stream_update(s, io, io, k));
        GT_TRY(gt_hash_update(hc, io, k));  // ciphertext, as written
        GT_TRY(sink->write(sink->ctx, io, k));
        at += k;
    }
    return GT_OK;
}

// The random and derived header fields, then the bound part and the wraps into header.
static gt_err header_seal(gt_sckpt_header *h, const gt_sckpt_seal_params *p,
                          uint8_t header[GT_SCKPT_MAX_HEADER_BYTES],
                          uint8_t content_key[GT_AEAD_KEY_BYTES])
{
    uint8_t eph_sec[GT_X25519_BYTES] = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_random_bytes(h->body_iv, sizeof h->body_iv), out);
    GT_TRY_GOTO(err, gt_random_bytes(content_key, GT_AEAD_KEY_BYTES), out);
    GT_TRY_GOTO(err, gt_x25519_keypair(h->ephemeral_pub, eph_sec), out);
    GT_TRY_GOTO(err, gt_ed25519_public(h->signer_pub, p->signing_secret), out);
    gt_writer w = gt_writer_init_fixed(header, GT_SCKPT_MAX_HEADER_BYTES);
    GT_TRY_GOTO(err, bound_encode(&w, h), out);
    h->bound_len = w.len;
    GT_TRY_GOTO(err, wraps_seal(h, &w, header, content_key, eph_sec), out);
    h->header_len = w.len;
out:
    gt_secure_zero(eph_sec, sizeof eph_sec);
    return err;
}

// The one sealing path (file and memory alike): header, body streamed from src through
// AES-256-GCM and SHA-256, tag, signature, each handed to sink in file order.
static gt_err seal_stream(const gt_sckpt_seal_params *p, const gt_seal_source *src,
                          const gt_seal_sink *sink, gt_sckpt_header *h, uint8_t *io)
{
    uint8_t header[GT_SCKPT_MAX_HEADER_BYTES];
    uint8_t content_key[GT_AEAD_KEY_BYTES] = {0}, tag[GT_AEAD_TAG_BYTES] = {0};
    uint8_t digest[GT_SHA256_BYTES] = {0}, sig[GT_SCKPT_SIG_BYTES] = {0};
    gt_hash_ctx *hc = NULL;
    gt_aead_stream *s = NULL;
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, src->len >= LLMC_PREFIX_BYTES && src->len <= GT_SCKPT_MAX_PLAINTEXT,
                   done, GT_E_FORMAT, "plaintext of %llu bytes (expected %d..%llu)",
                   (unsigned long long)src->len, LLMC_PREFIX_BYTES,
                   (unsigned long long)GT_SCKPT_MAX_PLAINTEXT);
    GT_TRY_GOTO(err, src->read(src->ctx, io, LLMC_PREFIX_BYTES), done);
    GT_TRY_GOTO(err, llmc_prefix_check(io, LLMC_PREFIX_BYTES, &p->model, "plaintext"), done);
    header_fill(h, p, src->len);
    GT_TRY_GOTO(err, header_seal(h, p, header, content_key), done);
    // The body: the llm.c file under the content key; AAD = the whole header (wraps included).
    GT_TRY_GOTO(err, sink->write(sink->ctx, header, h->header_len), done);
    GT_TRY_GOTO(err, sig_digest_new(&hc, header, h->header_len), done);
    GT_TRY_GOTO(err, gt_aead_stream_new(&s, true, header, h->header_len, h->body_iv,
                                        content_key), done);
    GT_TRY_GOTO(err, body_seal(src, io, s, hc, sink), done);
    GT_TRY_GOTO(err, gt_aead_stream_final(s, tag), done);
    GT_TRY_GOTO(err, sink->write(sink->ctx, tag, sizeof tag), done);
    GT_TRY_GOTO(err, gt_hash_update(hc, tag, sizeof tag), done);
    GT_TRY_GOTO(err, gt_hash_final(hc, digest), done);
    GT_TRY_GOTO(err, gt_ed25519_sign(sig, digest, sizeof digest, p->signing_secret), done);
    GT_TRY_GOTO(err, sink->write(sink->ctx, sig, sizeof sig), done);
done:
    gt_aead_stream_free(s);
    gt_hash_free(hc);
    gt_secure_zero(content_key, sizeof content_key);
    return err;
}

gt_err gt_sckpt_seal_to(const gt_sckpt_seal_params *p, const gt_seal_source *src,
                        const gt_seal_sink *sink, gt_sckpt_header *hdr_out)
{
    GT_ENSURE(p->signing_secret != NULL, GT_E_ARG, "sealing needs the signer's secret key");
    GT_ENSURE(src != NULL && src->read != NULL && sink != NULL && sink->write != NULL, GT_E_ARG,
              "sealing needs a plaintext source and a sink");
    GT_TRY(seal_params_check(p));
    gt_sckpt_header *h = calloc(1, sizeof *h);
    uint8_t *io = malloc(IO_BYTES);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, h != NULL && io != NULL, done, GT_E_NOMEM, "out of memory");
    GT_TRY_GOTO(err, seal_stream(p, src, sink, h, io), done);
    if (hdr_out != NULL) {
        *hdr_out = *h;
    }
done:
    if (io != NULL) {
        gt_secure_zero(io, IO_BYTES);  // plaintext staging
        free(io);
    }
    free(h);
    return err;
}

static gt_err span_read(void *ctx, uint8_t *out, size_t n)
{
    gt_reader *r = ctx;
    return gt_reader_bytes(r, out, n);
}

static gt_err buf_write(void *ctx, const uint8_t *data, size_t n)
{
    return gt_buf_append(ctx, data, n);
}

gt_seal_sink gt_seal_buf_sink(gt_buf *b) { return (gt_seal_sink){.write = buf_write, .ctx = b}; }

gt_err gt_sckpt_seal_mem(const gt_sckpt_seal_params *p, gt_span plaintext, gt_buf *out,
                         gt_sckpt_header *hdr_out)
{
    out->len = 0;
    gt_reader r = gt_reader_init(plaintext.data, plaintext.len);
    gt_seal_source src = {.len = plaintext.len, .read = span_read, .ctx = &r};
    gt_seal_sink sink = gt_seal_buf_sink(out);
    // Reserved up front: growing by copies would leave stale ciphertext copies for nothing.
    uint64_t want = (uint64_t)GT_SCKPT_MAX_HEADER_BYTES + plaintext.len + GT_AEAD_TAG_BYTES +
                    GT_SCKPT_SIG_BYTES;
    gt_err err = plaintext.len <= GT_SCKPT_MAX_PLAINTEXT && want <= SIZE_MAX
                     ? gt_buf_reserve(out, (size_t)want)
                     : gt_errf(GT_E_FORMAT, "plaintext of %zu bytes is over the limit",
                               plaintext.len);
    if (gt_is_ok(err)) {
        err = gt_sckpt_seal_to(p, &src, &sink, hdr_out);
    }
    if (!gt_is_ok(err)) {
        out->len = 0;  // nothing half-sealed is handed back
    }
    return err;
}

static gt_err spans_read(void *ctx, uint8_t *out, size_t n)
{
    gt_seal_spans *s = ctx;
    for (size_t done = 0; done < n;) {
        GT_ENSURE(s->at_span < s->count, GT_E_TRUNCATED, "the pieces end %zu bytes early",
                  n - done);
        const gt_span *sp = &s->spans[s->at_span];
        size_t k = sp->len - s->at_off < n - done ? sp->len - s->at_off : n - done;
        memcpy(out + done, sp->data + s->at_off, k);
        done += k;
        s->at_off += k;
        if (s->at_off == sp->len) {
            s->at_span++;
            s->at_off = 0;
        }
    }
    return GT_OK;
}

gt_seal_source gt_seal_spans_source(gt_seal_spans *s)
{
    uint64_t len = 0;
    for (size_t i = 0; i < s->count; i++) {
        len += s->spans[i].len;
    }
    s->at_span = 0;
    s->at_off = 0;
    return (gt_seal_source){.len = len, .read = spans_read, .ctx = s};
}

typedef struct {
    FILE *in;
    const char *path;
} file_source_ctx;

static gt_err file_read(void *ctx, uint8_t *out, size_t n)
{
    file_source_ctx *f = ctx;
    return read_exact(f->in, out, n, f->path);
}

static gt_err atomic_write(void *ctx, const uint8_t *data, size_t n)
{
    return gt_atomic_file_write(ctx, data, n);
}

gt_err gt_sckpt_seal(const gt_sckpt_seal_params *p, gt_sckpt_header *hdr_out)
{
    FILE *in = NULL;
    uint64_t size = 0;
    gt_atomic_file out = {0};
    GT_TRY(gt_file_open_regular(p->model_path, &in, &size));
    file_source_ctx fc = {.in = in, .path = p->model_path};
    gt_seal_source src = {.len = size, .read = file_read, .ctx = &fc};
    gt_seal_sink sink = {.write = atomic_write, .ctx = &out};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_atomic_file_open(&out, p->out_path, 0644), done);
    GT_TRY_GOTO(err, gt_err_wrap(gt_sckpt_seal_to(p, &src, &sink, hdr_out), "%s", p->model_path),
                done);
    GT_ENSURE_GOTO(err, fgetc(in) == EOF, done, GT_E_STATE, "%s changed while it was sealed",
                   p->model_path);
    GT_TRY_GOTO(err, gt_atomic_file_commit(&out), done);
done:
    gt_atomic_file_abort(&out);
    fclose(in);
    return err;
}

// Reads the header of an open file into buf (the first min(size, GT_SCKPT_MAX_HEADER_BYTES)
// bytes), parses it from there and checks the file size.
static gt_err header_from_file(FILE *fp, uint64_t size, const char *path, gt_sckpt_header *h,
                               uint8_t buf[GT_SCKPT_MAX_HEADER_BYTES])
{
    size_t want = size < GT_SCKPT_MAX_HEADER_BYTES ? (size_t)size : GT_SCKPT_MAX_HEADER_BYTES;
    GT_TRY(read_exact(fp, buf, want, path));
    GT_TRY(gt_err_wrap(gt_sckpt_header_parse(h, buf, want), "%s", path));
    uint64_t expect = gt_sckpt_file_bytes(h);
    gt_err err = GT_OK;
    if (size < expect) {
        err = gt_errf(GT_E_TRUNCATED, "%s: sealed checkpoint ends early: %llu bytes, the header "
                                      "announces %llu", path, (unsigned long long)size,
                      (unsigned long long)expect);
    } else if (size > expect) {
        err = gt_errf(GT_E_FORMAT, "%s: sealed checkpoint has %llu bytes after its end", path,
                      (unsigned long long)(size - expect));
    }
    if (!gt_is_ok(err)) {
        memset(h, 0, sizeof *h);
    }
    return err;
}

gt_err gt_sckpt_read_header(const char *path, gt_sckpt_header *h)
{
    memset(h, 0, sizeof *h);
    FILE *fp = NULL;
    uint64_t size = 0;
    GT_TRY(gt_file_open_regular(path, &fp, &size));
    uint8_t *buf = malloc(GT_SCKPT_MAX_HEADER_BYTES);
    gt_err err = buf != NULL ? header_from_file(fp, size, path, h, buf)
                             : gt_errf(GT_E_NOMEM, "out of memory");
    free(buf);  // public bytes
    fclose(fp);
    return err;
}

// The caller may name the signer it expects (NULL: any).
static gt_err signer_check(const gt_sckpt_header *h, const uint8_t *expect_signer,
                           const char *path)
{
    if (expect_signer != NULL &&
        memcmp(h->signer_pub, expect_signer, GT_ED25519_PUBLIC_BYTES) != 0) {  // public keys
        char got[2 * GT_ED25519_PUBLIC_BYTES + 1], want[2 * GT_ED25519_PUBLIC_BYTES + 1];
        gt_hex_encode(got, sizeof got, h->signer_pub, GT_ED25519_PUBLIC_BYTES);
        gt_hex_encode(want, sizeof want, expect_signer, GT_ED25519_PUBLIC_BYTES);
        return gt_errf(GT_E_POLICY, "%s: sealed by signing key %.16s..., not the expected %.16s...",
                       path, got, want);
    }
    return GT_OK;
}

// *me: the index of the recipient whose public key is k's (the last such).
static gt_err recipient_find(const gt_sckpt_header *h, const gt_recipient_keys *k, uint32_t *me)
{
    *me = h->recipient_count;
    for (uint32_t i = 0; i < h->recipient_count; i++) {
        if (memcmp(h->recipients[i].pub, k->pub, GT_X25519_BYTES) == 0) {  // public keys
            *me = i;
        }
    }
    if (*me == h->recipient_count) {
        char names[512] = "", key[2 * GT_X25519_BYTES + 1];
        for (uint32_t i = 0; i < h->recipient_count; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                     h->recipients[i].name);
        }
        gt_hex_encode(key, sizeof key, k->pub, GT_X25519_BYTES);
        return gt_errf(GT_E_NOTFOUND, "not a recipient: the checkpoint is sealed for %s; this "
                                      "recipient key (%.16s...) is none of theirs", names, key);
    }
    return GT_OK;
}

// Unwraps the content key wrapped for recipient me; header[0, bound_len) is the wrap's AAD.
// The shared secret and the wrapping key are wiped here on every path.
static gt_err content_key_unwrap(const gt_sckpt_header *h, const gt_recipient_keys *k,
                                 uint32_t me, const uint8_t *header,
                                 uint8_t content_key[GT_AEAD_KEY_BYTES], const char *path)
{
    uint8_t shared[GT_X25519_BYTES] = {0}, okm[WRAP_OKM_BYTES] = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_x25519_shared(shared, h->ephemeral_pub, k->sec), out);
    GT_TRY_GOTO(err, wrap_okm(okm, shared, h, me), out);
    size_t n = 0;
    gt_err e = gt_aead_open(content_key, GT_AEAD_KEY_BYTES, &n, h->wraps[me],
                            GT_SCKPT_WRAP_BYTES, header, h->bound_len, okm + GT_AEAD_KEY_BYTES,
                            okm);
    GT_ENSURE_GOTO(err, e.code == GT_E_NONE && n == GT_AEAD_KEY_BYTES, out, GT_E_AUTH,
                   "%s: the content key wrapped for '%s' does not authenticate: the file was "
                   "tampered with, or this is not the key it was sealed to", path,
                   h->recipients[me].name);
out:
    gt_secure_zero(shared, sizeof shared);
    gt_secure_zero(okm, sizeof okm);
    return err;
}

// Hashes, decrypts and stages the body, keeping its first LLMC_PREFIX_BYTES in prefix.
static gt_err body_open(FILE *in, uint8_t *io, const gt_sckpt_header *h, gt_aead_stream *s,
                        gt_hash_ctx *hc, gt_atomic_file *out, uint8_t prefix[LLMC_PREFIX_BYTES],
                        const char *path)
{
    for (uint64_t at = 0; at < h->plaintext_len;) {
        uint64_t left = h->plaintext_len - at;
        size_t k2 = (size_t)(left < IO_BYTES ? left : IO_BYTES);
        GT_TRY(read_exact(in, io, k2, path));
        GT_TRY(gt_hash_update(hc, io, k2));  // ciphertext, before decrypting
        GT_TRY(gt_aead_stream_update(s, io, io, k2));
        if (at < LLMC_PREFIX_BYTES) {
            size_t c = LLMC_PREFIX_BYTES - (size_t)at < k2 ? LLMC_PREFIX_BYTES - (size_t)at : k2;
            memcpy(prefix + at, io, c);
        }
        GT_TRY(gt_atomic_file_write(out, io, k2));
        at += k2;
    }
    return GT_OK;
}

gt_err gt_sckpt_open(const char *path, const gt_recipient_keys *k, const uint8_t *expect_signer,
                     const char *out_path, gt_sckpt_header *hdr_out, uint32_t *recipient_index)
{
    gt_sckpt_header *h = calloc(1, sizeof *h);
    GT_ENSURE(h != NULL, GT_E_NOMEM, "out of memory");
    uint8_t *io = malloc(IO_BYTES);
    uint8_t header[GT_SCKPT_MAX_HEADER_BYTES];
    uint8_t content_key[GT_AEAD_KEY_BYTES] = {0}, prefix[LLMC_PREFIX_BYTES] = {0};
    uint8_t tag[GT_AEAD_TAG_BYTES] = {0};
    uint8_t digest[GT_SHA256_BYTES] = {0}, sig[GT_SCKPT_SIG_BYTES] = {0};
    gt_hash_ctx *hc = NULL;
    gt_aead_stream *s = NULL;
    gt_atomic_file out = {0};
    FILE *in = NULL;
    uint64_t size = 0;
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, io != NULL, done, GT_E_NOMEM, "out of memory");
    GT_TRY_GOTO(err, gt_file_open_regular(path, &in, &size), done);
    GT_TRY_GOTO(err, header_from_file(in, size, path, h, header), done);
    GT_TRY_GOTO(err, signer_check(h, expect_signer, path), done);
    uint32_t me = 0;
    GT_TRY_GOTO(err, recipient_find(h, k, &me), done);
    // header[0, header_len) holds the exact bytes the fields were parsed from: the AADs.
    GT_ENSURE_GOTO(err, fseek(in, (long)h->header_len, SEEK_SET) == 0, done, GT_E_IO,
                   "%s: seek: %s", path, strerror(errno));
    GT_TRY_GOTO(err, content_key_unwrap(h, k, me, header, content_key, path), done);

    // Body: staged in the temporary file, renamed only after the signature, the tag and the
    // llm.c header check. One pass: the signature covers exactly the bytes decrypted.
    GT_TRY_GOTO(err, gt_atomic_file_open(&out, out_path, 0600), done);
    GT_TRY_GOTO(err, sig_digest_new(&hc, header, h->header_len), done);
    GT_TRY_GOTO(err, gt_aead_stream_new(&s, false, header, h->header_len, h->body_iv,
                                        content_key), done);
    GT_TRY_GOTO(err, body_open(in, io, h, s, hc, &out, prefix, path), done);
    GT_TRY_GOTO(err, read_exact(in, tag, sizeof tag, path), done);
    GT_TRY_GOTO(err, read_exact(in, sig, sizeof sig, path), done);
    GT_TRY_GOTO(err, gt_hash_update(hc, tag, sizeof tag), done);
    GT_TRY_GOTO(err, gt_hash_final(hc, digest), done);
    gt_err e = gt_ed25519_verify(sig, digest, sizeof digest, h->signer_pub);
    GT_ENSURE_GOTO(err, e.code == GT_E_NONE, done, GT_E_AUTH,
                   "%s: the signature does not verify under the signer key the header names: "
                   "the file was tampered with", path);
    e = gt_aead_stream_final(s, tag);
    GT_ENSURE_GOTO(err, e.code == GT_E_NONE, done, GT_E_AUTH,
                   "%s: the checkpoint does not authenticate: the file was tampered with", path);
    GT_TRY_GOTO(err, llmc_prefix_check(prefix, sizeof prefix, &h->model, "opened checkpoint"),
                done);
    GT_TRY_GOTO(err, gt_atomic_file_commit(&out), done);
    if (hdr_out != NULL) {
        *hdr_out = *h;
    }
    if (recipient_index != NULL) {
        *recipient_index = me;
    }
done:
    gt_atomic_file_abort(&out);  // removes the staged plaintext on failure
    gt_aead_stream_free(s);
    gt_hash_free(hc);
    if (in != NULL) {
        fclose(in);
    }
    if (io != NULL) {
        gt_secure_zero(io, IO_BYTES);
        free(io);
    }
    free(h);
    gt_secure_zero(content_key, sizeof content_key);
    gt_secure_zero(prefix, sizeof prefix);
    return err;
}
