// gputravel's wrap leaf (ENCLU 0x47540003, not SGX's): derives a key from enclave-held key
// material (HKDF-SHA256) and returns it only wrapped to an X25519 recipient, so a key such as a
// holder's chunk key K_i leaves the enclave bound to one device and is never in enclave memory
// or on the host in the clear. The enclave decides *whether*; the runtime does the crypto (the
// SDK has none), as the seal leaves do, and appraises *to whom* from the device's own attested
// hellos and the agreement's bytes, so a host naming a key of its own gets nothing wrapped.
// Input layout in enclave.h (gt_enclave_wrap_input).
#include <gputravel/enclave.h>

#include <string.h>

static gt_enclave_wrap_appraiser g_appraiser;

void gt_enclave_set_wrap_appraiser(gt_enclave_wrap_appraiser fn)
{
    g_appraiser = fn;
}

static gt_err read_span(gt_reader *r, gt_span *out, const char *what)
{
    uint32_t n = 0;
    GT_TRY(gt_reader_u32le(r, &n));
    GT_ENSURE(n <= GT_ENCLAVE_WRAP_APPRAISAL_MAX, GT_E_FORMAT, "wrap leaf: %s of %u bytes", what,
              n);
    return gt_reader_span(r, n, out);
}

gt_err gt_enclave_wrap_input_parse(const uint8_t *data, size_t len, gt_enclave_wrap_input *w)
{
    memset(w, 0, sizeof *w);
    gt_reader r = gt_reader_init(data, len);
    uint16_t n = 0;
    GT_TRY(gt_reader_bytes(&r, w->ikm, sizeof w->ikm));
    GT_TRY(gt_reader_bytes(&r, w->salt, sizeof w->salt));
    GT_TRY(gt_reader_u16le(&r, &n));
    GT_ENSURE(n <= GT_ENCLAVE_WRAP_INFO_MAX, GT_E_FORMAT, "wrap leaf: info of %u bytes (at most %d)",
              n, GT_ENCLAVE_WRAP_INFO_MAX);
    w->info_len = n;
    GT_TRY(gt_reader_bytes(&r, w->info, n));
    GT_TRY(gt_reader_bytes(&r, w->recipient, sizeof w->recipient));
    GT_TRY(gt_reader_u16le(&r, &n));
    GT_ENSURE(n <= GT_ENCLAVE_WRAP_AAD_MAX, GT_E_FORMAT, "wrap leaf: AAD of %u bytes (at most %d)",
              n, GT_ENCLAVE_WRAP_AAD_MAX);
    w->aad_len = n;
    GT_TRY(gt_reader_bytes(&r, w->aad, n));
    GT_TRY(read_span(&r, &w->agreement, "agreement"));
    GT_TRY(read_span(&r, &w->client_hello, "client hello"));
    GT_TRY(read_span(&r, &w->server_hello, "server hello"));
    return gt_reader_expect_end(&r, "wrap leaf input");
}

static gt_err write_span(gt_writer *wr, gt_span s)
{
    GT_ENSURE(s.len <= GT_ENCLAVE_WRAP_APPRAISAL_MAX, GT_E_ARG, "wrap leaf: %zu bytes to appraise",
              s.len);
    GT_TRY(gt_writer_u32le(wr, (uint32_t)s.len));
    return gt_writer_bytes(wr, s.data, s.len);
}

gt_err gt_enclave_wrap_input_encode(gt_writer *wr, const gt_enclave_wrap_input *w)
{
    GT_ENSURE(w->info_len <= GT_ENCLAVE_WRAP_INFO_MAX && w->aad_len <= GT_ENCLAVE_WRAP_AAD_MAX,
              GT_E_ARG, "wrap leaf: info or AAD too long");
    GT_TRY(gt_writer_bytes(wr, w->ikm, sizeof w->ikm));
    GT_TRY(gt_writer_bytes(wr, w->salt, sizeof w->salt));
    GT_TRY(gt_writer_u16le(wr, (uint16_t)w->info_len));
    GT_TRY(gt_writer_bytes(wr, w->info, w->info_len));
    GT_TRY(gt_writer_bytes(wr, w->recipient, sizeof w->recipient));
    GT_TRY(gt_writer_u16le(wr, (uint16_t)w->aad_len));
    GT_TRY(gt_writer_bytes(wr, w->aad, w->aad_len));
    GT_TRY(write_span(wr, w->agreement));
    GT_TRY(write_span(wr, w->client_hello));
    return write_span(wr, w->server_hello);
}

gt_err gt_enclave_wrap_derived(uint8_t out[GT_KEYWRAP_BYTES], const uint8_t *in, size_t in_len)
{
    gt_enclave_wrap_input w;
    uint8_t key[GT_AEAD_KEY_BYTES];
    gt_err err = gt_enclave_wrap_input_parse(in, in_len, &w);
    if (gt_is_ok(err)) {
        err = g_appraiser != NULL
                  ? g_appraiser(w.agreement, w.client_hello, w.server_hello, w.recipient, w.aad,
                                w.aad_len)
                  : gt_errf(GT_E_POLICY, "wrap leaf: no device appraiser in this enclave "
                                         "process: nothing is wrapped");
    }
    if (gt_is_ok(err)) {
        err = gt_hkdf(GT_HASH_SHA256, key, sizeof key, w.ikm, sizeof w.ikm, w.salt, sizeof w.salt,
                      w.info, w.info_len);
    }
    if (gt_is_ok(err)) {
        err = gt_x25519_wrap(out, key, w.recipient, w.aad, w.aad_len);
    }
    gt_secure_zero(key, sizeof key);
    gt_secure_zero(&w, sizeof w);
    return err;
}
