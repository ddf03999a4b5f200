// The host <-> enclave process messages: the start and hello messages that set the session up,
// the session's messages, and the AES-256-GCM channel they travel in. Every byte that arrives
// is parsed with gt_reader (tests/fuzz/fuzz_enclave_msg.c).
#include "run.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#define START_MAGIC "GTENCST1"
#define HELLO_MAGIC "GTENCHL1"
#define SESSION_LABEL "gputravel enclave session v1"

gt_err gt_enclave_msg_parse(const uint8_t *data, size_t len, gt_enclave_msg *m)
{
    memset(m, 0, sizeof *m);
    gt_reader r = gt_reader_init(data, len);
    uint32_t n = 0;
    GT_TRY(gt_reader_u8(&r, &m->type));
    GT_TRY(gt_reader_u64le(&r, &m->code));
    GT_TRY(gt_reader_u32le(&r, &n));
    GT_ENSURE(m->type >= GT_ENCLAVE_MSG_ECALL && m->type <= GT_ENCLAVE_MSG_RING, GT_E_FORMAT,
              "enclave message: unknown type %u", m->type);
    GT_ENSURE(n <= GT_ENCLAVE_MSG_MAX_PAYLOAD, GT_E_FORMAT,
              "enclave message: %u payload bytes (at most %d)", n, GT_ENCLAVE_MSG_MAX_PAYLOAD);
    GT_ENSURE(n == gt_reader_left(&r), GT_E_FORMAT,
              "enclave message: says %u payload bytes, %zu follow", n, gt_reader_left(&r));
    return gt_reader_span(&r, n, &m->payload);
}

gt_err gt_enclave_msg_encode(gt_writer *w, const gt_enclave_msg *m)
{
    GT_ENSURE(m->payload.len <= GT_ENCLAVE_MSG_MAX_PAYLOAD, GT_E_LIMIT,
              "enclave message: %zu payload bytes (at most %d)", m->payload.len,
              GT_ENCLAVE_MSG_MAX_PAYLOAD);
    GT_TRY(gt_writer_u8(w, m->type));
    GT_TRY(gt_writer_u64le(w, m->code));
    GT_TRY(gt_writer_u32le(w, (uint32_t)m->payload.len));
    return gt_writer_bytes(w, m->payload.data, m->payload.len);
}

gt_err gt_enclave_start_parse(const uint8_t *data, size_t len, gt_enclave_start_msg *m)
{
    memset(m, 0, sizeof *m);
    gt_reader r = gt_reader_init(data, len);
    uint8_t magic[8], debug = 0;
    uint32_t image_len = 0;
    GT_TRY(gt_reader_bytes(&r, magic, sizeof magic));
    GT_ENSURE(memcmp(magic, START_MAGIC, 8) == 0, GT_E_FORMAT, "enclave start: bad magic");
    GT_TRY(gt_reader_u8(&r, &debug));
    GT_ENSURE(debug <= 1, GT_E_FORMAT, "enclave start: allow_debug %u", debug);
    m->allow_debug = debug;
    GT_TRY(gt_reader_u16le(&r, &m->min_isvsvn));
    GT_TRY(gt_reader_bytes(&r, m->platform.root, sizeof m->platform.root));
    GT_TRY(gt_reader_bytes(&r, m->platform.cpusvn, sizeof m->platform.cpusvn));
    GT_TRY(gt_reader_bytes(&r, m->platform.ownerepoch, sizeof m->platform.ownerepoch));
    GT_TRY(gt_reader_bytes(&r, m->platform.seal_key_fuses, sizeof m->platform.seal_key_fuses));
    GT_TRY(gt_reader_bytes(&r, m->host_pub, sizeof m->host_pub));
    GT_TRY(gt_reader_bytes(&r, m->host_nonce, sizeof m->host_nonce));
    GT_TRY(gt_reader_bytes(&r, m->sigstruct, sizeof m->sigstruct));
    GT_TRY(gt_reader_u32le(&r, &image_len));
    GT_ENSURE(image_len <= GT_ENCLAVE_IMAGE_MAX_BYTES, GT_E_LIMIT,
              "enclave start: a %u-byte image (at most %zu)", image_len,
              GT_ENCLAVE_IMAGE_MAX_BYTES);
    GT_TRY(gt_reader_span(&r, image_len, &m->image));
    return gt_reader_expect_end(&r, "enclave start");
}

gt_err gt_enclave_start_encode(gt_writer *w, const gt_enclave_start_msg *m)
{
    GT_ENSURE(m->image.len <= GT_ENCLAVE_IMAGE_MAX_BYTES, GT_E_LIMIT,
              "enclave start: a %zu-byte image (at most %zu)", m->image.len,
              GT_ENCLAVE_IMAGE_MAX_BYTES);
    GT_TRY(gt_writer_bytes(w, START_MAGIC, 8));
    GT_TRY(gt_writer_u8(w, m->allow_debug ? 1 : 0));
    GT_TRY(gt_writer_u16le(w, m->min_isvsvn));
    GT_TRY(gt_writer_bytes(w, m->platform.root, sizeof m->platform.root));
    GT_TRY(gt_writer_bytes(w, m->platform.cpusvn, sizeof m->platform.cpusvn));
    GT_TRY(gt_writer_bytes(w, m->platform.ownerepoch, sizeof m->platform.ownerepoch));
    GT_TRY(gt_writer_bytes(w, m->platform.seal_key_fuses, sizeof m->platform.seal_key_fuses));
    GT_TRY(gt_writer_bytes(w, m->host_pub, sizeof m->host_pub));
    GT_TRY(gt_writer_bytes(w, m->host_nonce, sizeof m->host_nonce));
    GT_TRY(gt_writer_bytes(w, m->sigstruct, sizeof m->sigstruct));
    GT_TRY(gt_writer_u32le(w, (uint32_t)m->image.len));
    return gt_writer_bytes(w, m->image.data, m->image.len);
}

static gt_err hello_identity(gt_reader *r, gt_sgx_identity *id)
{
    uint8_t debug = 0;
    GT_TRY(gt_reader_bytes(r, id->mrenclave, sizeof id->mrenclave));
    GT_TRY(gt_reader_bytes(r, id->mrsigner, sizeof id->mrsigner));
    GT_TRY(gt_reader_u16le(r, &id->isvprodid));
    GT_TRY(gt_reader_u16le(r, &id->isvsvn));
    GT_TRY(gt_reader_u64le(r, &id->attributes.flags));
    GT_TRY(gt_reader_u64le(r, &id->attributes.xfrm));
    GT_TRY(gt_reader_u32le(r, &id->miscselect));
    GT_TRY(gt_reader_u8(r, &debug));
    GT_ENSURE(debug <= 1, GT_E_FORMAT, "enclave hello: debug %u", debug);
    id->debug = debug;
    return GT_OK;
}

gt_err gt_enclave_hello_parse(const uint8_t *data, size_t len, gt_enclave_hello_msg *m)
{
    memset(m, 0, sizeof *m);
    gt_reader r = gt_reader_init(data, len);
    uint8_t magic[8], ok = 0;
    GT_TRY(gt_reader_bytes(&r, magic, sizeof magic));
    GT_ENSURE(memcmp(magic, HELLO_MAGIC, 8) == 0, GT_E_FORMAT, "enclave hello: bad magic");
    GT_TRY(gt_reader_u8(&r, &ok));
    GT_ENSURE(ok <= 1, GT_E_FORMAT, "enclave hello: status %u", ok);
    m->ok = ok;
    if (!m->ok) {
        uint16_t n = 0;
        GT_TRY(gt_reader_u16le(&r, &n));
        GT_ENSURE(n < sizeof m->refusal, GT_E_FORMAT, "enclave hello: a %u-byte refusal", n);
        GT_TRY(gt_reader_bytes(&r, m->refusal, n));
        for (uint16_t i = 0; i < n; i++) {  // printed to an operator: printable ASCII only
            if (m->refusal[i] < 0x20 || m->refusal[i] > 0x7e) {
                m->refusal[i] = '?';
            }
        }
        return gt_reader_expect_end(&r, "enclave hello");
    }
    GT_TRY(hello_identity(&r, &m->identity));
    GT_TRY(gt_reader_bytes(&r, m->enclave_pub, sizeof m->enclave_pub));
    GT_TRY(gt_reader_bytes(&r, m->report, sizeof m->report));
    return gt_reader_expect_end(&r, "enclave hello");
}

gt_err gt_enclave_hello_encode(gt_writer *w, const gt_enclave_hello_msg *m)
{
    GT_TRY(gt_writer_bytes(w, HELLO_MAGIC, 8));
    GT_TRY(gt_writer_u8(w, m->ok ? 1 : 0));
    if (!m->ok) {
        size_t n = strnlen(m->refusal, sizeof m->refusal - 1);
        GT_TRY(gt_writer_u16le(w, (uint16_t)n));
        return gt_writer_bytes(w, m->refusal, n);
    }
    const gt_sgx_identity *id = &m->identity;
    GT_TRY(gt_writer_bytes(w, id->mrenclave, sizeof id->mrenclave));
    GT_TRY(gt_writer_bytes(w, id->mrsigner, sizeof id->mrsigner));
    GT_TRY(gt_writer_u16le(w, id->isvprodid));
    GT_TRY(gt_writer_u16le(w, id->isvsvn));
    GT_TRY(gt_writer_u64le(w, id->attributes.flags));
    GT_TRY(gt_writer_u64le(w, id->attributes.xfrm));
    GT_TRY(gt_writer_u32le(w, id->miscselect));
    GT_TRY(gt_writer_u8(w, id->debug ? 1 : 0));
    GT_TRY(gt_writer_bytes(w, m->enclave_pub, sizeof m->enclave_pub));
    return gt_writer_bytes(w, m->report, sizeof m->report);
}

gt_err gt_enclave_session_reportdata(uint8_t out[GT_SGX_REPORTDATA_BYTES],
                                     const uint8_t host_nonce[32],
                                     const uint8_t host_pub[GT_X25519_BYTES],
                                     const uint8_t enclave_pub[GT_X25519_BYTES])
{
    uint8_t buf[sizeof SESSION_LABEL + 32 + 2 * GT_X25519_BYTES];
    memcpy(buf, SESSION_LABEL, sizeof SESSION_LABEL);  // with its NUL: a fixed-length label
    memcpy(buf + sizeof SESSION_LABEL, host_nonce, 32);
    memcpy(buf + sizeof SESSION_LABEL + 32, host_pub, GT_X25519_BYTES);
    memcpy(buf + sizeof SESSION_LABEL + 32 + GT_X25519_BYTES, enclave_pub, GT_X25519_BYTES);
    memset(out, 0, GT_SGX_REPORTDATA_BYTES);
    return gt_hash(GT_HASH_SHA256, out, buf, sizeof buf);
}

gt_err gt_enclave_host_target(gt_sgx_secs_identity *host)
{
    memset(host, 0, sizeof *host);
    return gt_hash(GT_HASH_SHA256, host->mrenclave, GT_ENCLAVE_HOST_TARGET,
                   strlen(GT_ENCLAVE_HOST_TARGET));
}

// ---- frames and the channel -----------------------------------------------------------------

static gt_err send_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        GT_ENSURE(k > 0, GT_E_PEER, "enclave channel: send: %s", strerror(errno));
        p += k;
        n -= (size_t)k;
    }
    return GT_OK;
}

static gt_err recv_all(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        GT_ENSURE(k != 0, GT_E_PEER, "enclave channel: the other side closed it");
        GT_ENSURE(k > 0, GT_E_PEER, "enclave channel: recv: %s", strerror(errno));
        p += k;
        n -= (size_t)k;
    }
    return GT_OK;
}

gt_err gt_enclave_frame_send(int fd, const uint8_t *data, size_t len)
{
    GT_ENSURE(len <= GT_ENCLAVE_FRAME_MAX, GT_E_LIMIT, "enclave channel: a %zu-byte frame", len);
    uint8_t head[4];
    gt_store_u32le(head, (uint32_t)len);
    GT_TRY(send_all(fd, head, sizeof head));
    return send_all(fd, data, len);
}

gt_err gt_enclave_frame_recv(int fd, size_t max, gt_buf *out)
{
    uint8_t head[4];
    uint32_t n = 0;
    GT_TRY(recv_all(fd, head, sizeof head));
    gt_reader r = gt_reader_init(head, sizeof head);
    GT_TRY(gt_reader_u32le(&r, &n));
    GT_ENSURE(n <= max, GT_E_LIMIT, "enclave channel: a %u-byte frame (at most %zu)", n, max);
    out->len = 0;
    GT_TRY(gt_buf_reserve(out, n > 0 ? n : 1));
    GT_TRY(recv_all(fd, out->data, n));
    out->len = n;
    return GT_OK;
}

gt_err gt_enclave_channel_init(gt_enclave_channel *ch, int fd, bool host_side,
                               const uint8_t shared[GT_X25519_BYTES],
                               const uint8_t host_nonce[32],
                               const uint8_t host_pub[GT_X25519_BYTES],
                               const uint8_t enclave_pub[GT_X25519_BYTES],
                               const uint8_t report[GT_SGX_REPORT_BYTES])
{
    memset(ch, 0, sizeof *ch);
    ch->fd = fd;
    uint8_t transcript[32 + 2 * GT_X25519_BYTES + GT_SGX_REPORT_BYTES], salt[GT_SHA256_BYTES];
    memcpy(transcript, host_nonce, 32);
    memcpy(transcript + 32, host_pub, GT_X25519_BYTES);
    memcpy(transcript + 32 + GT_X25519_BYTES, enclave_pub, GT_X25519_BYTES);
    memcpy(transcript + 32 + 2 * GT_X25519_BYTES, report, GT_SGX_REPORT_BYTES);
    GT_TRY(gt_hash(GT_HASH_SHA256, salt, transcript, sizeof transcript));
    static const char to_enclave[] = SESSION_LABEL " host->enclave";
    static const char to_host[] = SESSION_LABEL " enclave->host";
    uint8_t h2e[GT_AEAD_KEY_BYTES], e2h[GT_AEAD_KEY_BYTES];
    gt_err err;
    GT_TRY_GOTO(err, gt_hkdf(GT_HASH_SHA256, h2e, GT_AEAD_KEY_BYTES, shared, GT_X25519_BYTES,
                             salt, sizeof salt, (const uint8_t *)to_enclave,
                             sizeof to_enclave - 1), out);
    GT_TRY_GOTO(err, gt_hkdf(GT_HASH_SHA256, e2h, GT_AEAD_KEY_BYTES, shared, GT_X25519_BYTES,
                             salt, sizeof salt, (const uint8_t *)to_host, sizeof to_host - 1),
                out);
    GT_TRY_GOTO(err, gt_aead_keyed_new(&ch->seal, true, host_side ? h2e : e2h), out);
    GT_TRY_GOTO(err, gt_aead_keyed_new(&ch->open, false, host_side ? e2h : h2e), out);
    ch->send_dir = host_side ? 1 : 2;
    ch->recv_dir = host_side ? 2 : 1;
out:
    gt_secure_zero(h2e, sizeof h2e);
    gt_secure_zero(e2h, sizeof e2h);
    if (!gt_is_ok(err)) {
        gt_enclave_channel_wipe(ch);
        ch->fd = fd;  // still the caller's to close
    }
    return err;
}

// IV = direction u32 · counter u64: unique per key, as each key has one direction.
static void make_iv(uint8_t iv[GT_AEAD_IV_BYTES], uint32_t dir, uint64_t counter)
{
    gt_store_u32le(iv, dir);
    gt_store_u64le(iv + 4, counter);
}

gt_err gt_enclave_channel_send(gt_enclave_channel *ch, const gt_enclave_msg *m)
{
    uint8_t plain[13 + GT_ENCLAVE_MSG_MAX_PAYLOAD];
    uint8_t frame[4 + sizeof plain + GT_AEAD_TAG_BYTES], iv[GT_AEAD_IV_BYTES];
    gt_writer w = gt_writer_init_fixed(plain, sizeof plain);
    gt_err err;
    GT_TRY_GOTO(err, gt_enclave_msg_encode(&w, m), out);
    GT_ENSURE_GOTO(err, ch->send_counter < UINT64_MAX, out, GT_E_LIMIT,
                   "enclave channel: counter exhausted");
    size_t ct_len = 0;
    gt_store_u32le(frame, (uint32_t)(w.len + GT_AEAD_TAG_BYTES));
    make_iv(iv, ch->send_dir, ch->send_counter++);
    // The length prefix is the AAD: a frame cut or grown in transit does not open. On the ring
    // the same four bytes are the slot's length word.
    GT_TRY_GOTO(err, gt_aead_keyed_seal(ch->seal, frame + 4, sizeof frame - 4, &ct_len, plain,
                                        w.len, frame, 4, iv), out);
    if (ch->ring_tx != NULL) {
        GT_TRY_GOTO(err, gt_enclave_ring_put(ch, frame + 4, (uint32_t)ct_len), out);
    } else {
        GT_TRY_GOTO(err, send_all(ch->fd, frame, 4 + ct_len), out);
    }
out:
    gt_secure_zero(plain, w.len);  // only what was written: wiping 32 KiB per message costs µs
    return err;
}

gt_err gt_enclave_channel_recv(gt_enclave_channel *ch, gt_buf *frame, gt_buf *plain,
                               gt_enclave_msg *m)
{
    memset(m, 0, sizeof *m);
    if (ch->ring_rx != NULL) {
        GT_TRY(gt_enclave_ring_get(ch, frame));  // a private copy: the ring can change under us
    } else {
        GT_TRY(gt_enclave_frame_recv(ch->fd, GT_ENCLAVE_RING_FRAME_MAX, frame));
    }
    GT_ENSURE(frame->len >= GT_AEAD_TAG_BYTES, GT_E_FORMAT, "enclave channel: a short frame");
    uint8_t iv[GT_AEAD_IV_BYTES], aad[4];
    gt_store_u32le(aad, (uint32_t)frame->len);
    make_iv(iv, ch->recv_dir, ch->recv_counter);
    plain->len = 0;
    GT_TRY(gt_buf_reserve(plain, frame->len));
    size_t n = 0;
    GT_TRY(gt_aead_keyed_open(ch->open, plain->data, plain->cap, &n, frame->data, frame->len,
                              aad, sizeof aad, iv));
    ch->recv_counter++;  // only an authentic frame moves it: a replay or reorder fails above
    plain->len = n;
    return gt_enclave_msg_parse(plain->data, plain->len, m);
}

void gt_enclave_channel_wipe(gt_enclave_channel *ch)
{
    gt_aead_keyed_free(ch->seal);
    gt_aead_keyed_free(ch->open);
    gt_secure_zero(ch, sizeof *ch);
    ch->fd = -1;
}
