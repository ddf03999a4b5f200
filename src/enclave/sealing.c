// Sealing on EGETKEY's SEAL key (layout in enclave.h). The blob names the KEYREQUEST, so the
// same enclave (per KEYPOLICY) on the same platform derives the same key again; the AEAD binds
// every header field, so a changed KEYPOLICY or SVN is not "another key" but a refused blob.
#include <gputravel/enclave.h>

#include <string.h>

#define SEALED_MAGIC "GTSD"
#define SEALED_VERSION 1
#define SDK_ATTRIBUTE_MASK 0xff0000000000000bull  // INIT | DEBUG | MODE64BIT | reserved high
#define SDK_MISCMASK 0xf0000000u

static gt_err header_encode(uint8_t out[GT_SGX_SEALED_HEADER_BYTES], const gt_sgx_keyrequest *k,
                            const uint8_t iv[GT_AEAD_IV_BYTES], uint32_t aad_len, uint32_t ct_len)
{
    gt_writer w = gt_writer_init_fixed(out, GT_SGX_SEALED_HEADER_BYTES);
    GT_TRY(gt_writer_bytes(&w, SEALED_MAGIC, 4));
    GT_TRY(gt_writer_u16le(&w, SEALED_VERSION));
    GT_TRY(gt_writer_u16le(&w, k->keyname));
    GT_TRY(gt_writer_u16le(&w, k->keypolicy));
    GT_TRY(gt_writer_u16le(&w, k->isvsvn));
    GT_TRY(gt_writer_u16le(&w, k->configsvn));
    GT_TRY(gt_writer_bytes(&w, k->cpusvn, GT_SGX_CPUSVN_BYTES));
    GT_TRY(gt_writer_u64le(&w, k->attributemask.flags));
    GT_TRY(gt_writer_u64le(&w, k->attributemask.xfrm));
    GT_TRY(gt_writer_u32le(&w, k->miscmask));
    GT_TRY(gt_writer_bytes(&w, k->keyid, sizeof k->keyid));
    GT_TRY(gt_writer_bytes(&w, iv, GT_AEAD_IV_BYTES));
    GT_TRY(gt_writer_u32le(&w, aad_len));
    return gt_writer_u32le(&w, ct_len);
}

gt_err gt_sgx_sealed_parse(gt_sgx_sealed *s, const uint8_t *data, size_t len)
{
    memset(s, 0, sizeof *s);
    gt_reader r = gt_reader_init(data, len);
    uint8_t magic[4];
    uint16_t version = 0;
    uint32_t aad_len = 0, ct_len = 0;
    gt_sgx_keyrequest *k = &s->req;
    GT_TRY(gt_reader_bytes(&r, magic, 4));
    GT_ENSURE(memcmp(magic, SEALED_MAGIC, 4) == 0, GT_E_FORMAT, "sealed: not a sealed blob");
    GT_TRY(gt_reader_u16le(&r, &version));
    GT_ENSURE(version == SEALED_VERSION, GT_E_UNSUPPORTED, "sealed: version %u (expected %u)",
              version, SEALED_VERSION);
    GT_TRY(gt_reader_u16le(&r, &k->keyname));
    GT_ENSURE(k->keyname == GT_SGX_KEYNAME_SEAL, GT_E_FORMAT, "sealed: KEYNAME %u (expected "
              "SEAL)", k->keyname);
    GT_TRY(gt_reader_u16le(&r, &k->keypolicy));
    GT_TRY(gt_reader_u16le(&r, &k->isvsvn));
    GT_TRY(gt_reader_u16le(&r, &k->configsvn));
    GT_TRY(gt_reader_bytes(&r, k->cpusvn, GT_SGX_CPUSVN_BYTES));
    GT_TRY(gt_reader_u64le(&r, &k->attributemask.flags));
    GT_TRY(gt_reader_u64le(&r, &k->attributemask.xfrm));
    GT_TRY(gt_reader_u32le(&r, &k->miscmask));
    GT_TRY(gt_reader_bytes(&r, k->keyid, sizeof k->keyid));
    GT_TRY(gt_reader_bytes(&r, s->iv, sizeof s->iv));
    GT_TRY(gt_reader_u32le(&r, &aad_len));
    GT_TRY(gt_reader_u32le(&r, &ct_len));
    s->header = (gt_span){data, r.pos};
    GT_ENSURE(ct_len >= GT_AEAD_TAG_BYTES && ct_len - GT_AEAD_TAG_BYTES <= GT_SGX_SEAL_MAX_BYTES,
              GT_E_FORMAT, "sealed: ciphertext of %u bytes", ct_len);
    GT_TRY(gt_err_wrap(gt_reader_span(&r, aad_len, &s->aad), "sealed: AAD"));
    GT_TRY(gt_err_wrap(gt_reader_span(&r, ct_len, &s->ciphertext), "sealed: ciphertext"));
    return gt_reader_expect_end(&r, "sealed blob");
}

// The AES-256-GCM key: HKDF-SHA256 of EGETKEY's 128-bit seal key, salted with the KEYID.
static gt_err blob_key(uint8_t key[GT_AEAD_KEY_BYTES], const gt_sgx_platform *pf,
                       const gt_sgx_secs_identity *secs, const gt_sgx_keyrequest *req)
{
    static const char info[] = "gputravel/sgx-seal/aes-256-gcm/v1";
    uint8_t seal[GT_SGX_KEY_BYTES_128];
    gt_err err = gt_sgx_egetkey(seal, pf, secs, req);
    if (gt_is_ok(err)) {
        err = gt_hkdf(GT_HASH_SHA256, key, GT_AEAD_KEY_BYTES, seal, sizeof seal, req->keyid,
                      sizeof req->keyid, (const uint8_t *)info, sizeof info - 1);
    }
    gt_secure_zero(seal, sizeof seal);
    return err;
}

// GCM's AAD: the header, then the caller's AAD.
static gt_err gcm_aad(gt_buf *aad, gt_span header, const uint8_t *user, size_t user_len)
{
    GT_TRY(gt_buf_append(aad, header.data, header.len));
    return user_len ? gt_buf_append(aad, user, user_len) : GT_OK;
}

static void request_for(gt_sgx_keyrequest *req, const gt_sgx_platform *pf,
                        const gt_sgx_secs_identity *secs, const gt_sgx_seal_params *p)
{
    memset(req, 0, sizeof *req);
    req->keyname = GT_SGX_KEYNAME_SEAL;
    req->keypolicy = p->keypolicy;
    req->isvsvn = secs->isvsvn;
    req->configsvn = (p->keypolicy & GT_SGX_KEYPOLICY_CONFIGID) ? secs->configsvn : 0;
    memcpy(req->cpusvn, pf->cpusvn, GT_SGX_CPUSVN_BYTES);
    bool mask_given = p->attributemask.flags != 0 || p->attributemask.xfrm != 0;
    req->attributemask.flags = mask_given ? p->attributemask.flags : SDK_ATTRIBUTE_MASK;
    req->attributemask.xfrm = mask_given ? p->attributemask.xfrm : 0;
    req->miscmask = p->miscmask != 0 ? p->miscmask : SDK_MISCMASK;
}

gt_err gt_sgx_seal(gt_buf *out, const gt_sgx_platform *pf, const gt_sgx_secs_identity *secs,
                   const gt_sgx_seal_params *p, const uint8_t *pt, size_t pt_len,
                   const uint8_t *aad, size_t aad_len)
{
    GT_ENSURE(pt_len <= GT_SGX_SEAL_MAX_BYTES && aad_len <= GT_SGX_SEAL_MAX_BYTES, GT_E_LIMIT,
              "seal: more than %zu bytes", GT_SGX_SEAL_MAX_BYTES);
    GT_ENSURE(p->keypolicy & (GT_SGX_KEYPOLICY_MRENCLAVE | GT_SGX_KEYPOLICY_MRSIGNER), GT_E_ARG,
              "seal: KEYPOLICY names neither MRENCLAVE nor MRSIGNER (any enclave could unseal)");
    gt_sgx_keyrequest req;
    uint8_t iv[GT_AEAD_IV_BYTES], header[GT_SGX_SEALED_HEADER_BYTES], key[GT_AEAD_KEY_BYTES];
    gt_buf gaad = {0};
    size_t ct_cap = pt_len + GT_AEAD_TAG_BYTES, ct_len = 0, start = out->len;
    request_for(&req, pf, secs, p);
    gt_err err;
    GT_TRY_GOTO(err, gt_random_bytes(req.keyid, sizeof req.keyid), out);
    GT_TRY_GOTO(err, gt_random_bytes(iv, sizeof iv), out);
    GT_TRY_GOTO(err, blob_key(key, pf, secs, &req), out);
    GT_TRY_GOTO(err, header_encode(header, &req, iv, (uint32_t)aad_len, (uint32_t)ct_cap), out);
    GT_TRY_GOTO(err, gcm_aad(&gaad, (gt_span){header, sizeof header}, aad, aad_len), out);
    // Encrypted straight into the blob: no staging copy of the ciphertext.
    GT_TRY_GOTO(err, gt_buf_reserve(out, start + sizeof header + aad_len + ct_cap), out);
    GT_TRY_GOTO(err, gt_buf_append(out, header, sizeof header), out);
    GT_TRY_GOTO(err, aad_len ? gt_buf_append(out, aad, aad_len) : GT_OK, out);
    GT_TRY_GOTO(err, gt_aead_seal(out->data + out->len, ct_cap, &ct_len, pt, pt_len, gaad.data,
                                  gaad.len, iv, key),
                out);
    out->len += ct_len;
out:
    if (!gt_is_ok(err)) {
        out->len = start;  // nothing of a half-made blob
    }
    gt_secure_zero(key, sizeof key);
    gt_buf_free_nowipe(&gaad);
    return err;
}

gt_err gt_sgx_unseal(gt_buf *pt, gt_span *aad, const gt_sgx_platform *pf,
                     const gt_sgx_secs_identity *secs, const uint8_t *blob, size_t len)
{
    gt_sgx_sealed s;
    uint8_t key[GT_AEAD_KEY_BYTES];
    gt_buf gaad = {0};
    size_t n = 0;
    pt->len = 0;
    GT_TRY(gt_sgx_sealed_parse(&s, blob, len));
    gt_err err;
    GT_TRY_GOTO(err, blob_key(key, pf, secs, &s.req), out);
    GT_TRY_GOTO(err, gcm_aad(&gaad, s.header, s.aad.data, s.aad.len), out);
    size_t want = s.ciphertext.len - GT_AEAD_TAG_BYTES;
    GT_TRY_GOTO(err, gt_buf_reserve(pt, want ? want : 1), out);
    err = gt_aead_open(pt->data, pt->cap, &n, s.ciphertext.data, s.ciphertext.len, gaad.data,
                       gaad.len, s.iv, key);
    if (!gt_is_ok(err)) {
        err = gt_errf(GT_E_AUTH, "unseal: the key does not open this blob (another enclave, "
                                 "signer or platform, or a changed byte)");
        goto out;
    }
    pt->len = n;
    if (aad != NULL) {
        *aad = s.aad;
    }
out:
    gt_secure_zero(key, sizeof key);
    gt_buf_free_nowipe(&gaad);
    return err;
}
