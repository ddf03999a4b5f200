// The virtual quoting enclave: gputravel's stand-in for Intel's QE on a host without SGX. Real
// DCAP: a PCK certificate (Intel's chain) signs the QE report, whose REPORTDATA binds the
// attestation key. Here the host TEE's evidence takes the PCK chain's place: its report_data
// binds the platform id, the attestation key and the whole QE report, so its hardware root
// (AMD, Intel, or the sim root) vouches for all three; the QE report's signature field holds the
// attestation key's own signature over the QE report (possession of the key).
#include <gputravel/enclave.h>

#include <stdlib.h>
#include <string.h>

#define QE_AUTH_BYTES 32

struct gt_vqe {
    gt_pkey *key;
    uint8_t key_xy[GT_VSGX_KEY_BYTES];
    uint8_t platform_id[GT_SGX_PLATFORM_ID_BYTES];
    uint8_t cpusvn[GT_SGX_CPUSVN_BYTES];
    uint8_t qe_report[GT_VSGX_REPORT_BODY_BYTES];
    uint8_t qe_report_signature[GT_VSGX_SIG_BYTES];
    uint8_t qe_auth[QE_AUTH_BYTES];
    gt_buf host_evidence;  // GTEV envelope
    // To check the REPORTs enclaves make for it: its own identity and the platform (root
    // included: as real SGX's QE, it derives its report key on the platform it runs on).
    gt_sgx_secs_identity secs;
    gt_sgx_platform platform;
};

// The SGX REPORT body (SDM "REPORT"): 384 bytes; fields not in id stay zero.
static gt_err report_body(uint8_t out[GT_VSGX_REPORT_BODY_BYTES], const gt_sgx_identity *id,
                          const uint8_t cpusvn[GT_SGX_CPUSVN_BYTES],
                          const uint8_t reportdata[GT_REPORT_DATA_BYTES])
{
    static const uint8_t zero[96];  // the longest run of zeros below (reserved + CONFIGID)
    gt_writer w = gt_writer_init_fixed(out, GT_VSGX_REPORT_BODY_BYTES);
    GT_TRY(gt_writer_bytes(&w, cpusvn, GT_SGX_CPUSVN_BYTES));
    GT_TRY(gt_writer_u32le(&w, id->miscselect));
    GT_TRY(gt_writer_bytes(&w, zero, 12 + 16));          // reserved, ISVEXTPRODID
    GT_TRY(gt_writer_u64le(&w, id->attributes.flags));
    GT_TRY(gt_writer_u64le(&w, id->attributes.xfrm));
    GT_TRY(gt_writer_bytes(&w, id->mrenclave, GT_SGX_HASH_BYTES));
    GT_TRY(gt_writer_bytes(&w, zero, 32));
    GT_TRY(gt_writer_bytes(&w, id->mrsigner, GT_SGX_HASH_BYTES));
    GT_TRY(gt_writer_bytes(&w, zero, 32 + 64));          // reserved, CONFIGID
    GT_TRY(gt_writer_u16le(&w, id->isvprodid));
    GT_TRY(gt_writer_u16le(&w, id->isvsvn));
    GT_TRY(gt_writer_u16le(&w, 0));                      // CONFIGSVN
    GT_TRY(gt_writer_bytes(&w, zero, 42 + 16));          // reserved, ISVFAMILYID
    GT_TRY(gt_writer_bytes(&w, reportdata, GT_REPORT_DATA_BYTES));
    GT_ENSURE(w.len == GT_VSGX_REPORT_BODY_BYTES, GT_E_STATE, "vqe: %zu-byte report", w.len);
    return GT_OK;
}

static void qe_identity(gt_sgx_identity *id, gt_sgx_secs_identity *secs)
{
    memset(id, 0, sizeof *id);
    id->isvprodid = GT_VSGX_QE_ISVPRODID;
    id->isvsvn = GT_VSGX_QE_ISVSVN;
    id->attributes.flags = GT_SGX_ATTR_INIT | GT_SGX_ATTR_MODE64BIT;
    id->attributes.xfrm = 0x3;
    memset(secs, 0, sizeof *secs);
    secs->isvprodid = id->isvprodid;
    secs->isvsvn = id->isvsvn;
    secs->attributes = id->attributes;
}

// The attestation key: unsealed from DIR, or made and sealed there (MRSIGNER policy: a later
// QE release by the same signer keeps it).
static gt_err load_key(gt_vqe *q, const char *dir, const gt_sgx_platform *pf,
                       const gt_sgx_secs_identity *secs)
{
    char path[4096];
    gt_buf blob = {0}, der = {0};
    gt_err err;
    GT_TRY_GOTO(err, gt_path_join(path, sizeof path, dir, GT_VQE_KEY_FILE), out);
    gt_err rerr = gt_file_read_all(path, 1u << 16, &blob);
    // Only a key that does not exist yet is made: an unreadable one is an error, never replaced.
    GT_ENSURE_GOTO(err, gt_is_ok(rerr) || rerr.code == GT_E_NOTFOUND, out, rerr.code, "vqe: %s",
                   rerr.msg);
    if (gt_is_ok(rerr)) {
        GT_TRY_GOTO(err, gt_err_wrap(gt_sgx_unseal(&der, NULL, pf, secs, blob.data, blob.len),
                                     "vqe: %s", path), out);
        GT_TRY_GOTO(err, gt_pkey_parse_private_der(&q->key, der.data, der.len), out);
    } else {
        gt_sgx_seal_params sp = {.keypolicy = GT_SGX_KEYPOLICY_MRSIGNER};
        GT_TRY_GOTO(err, gt_pkey_generate_ec(&q->key, GT_EC_P256), out);
        GT_TRY_GOTO(err, gt_pkey_private_der(q->key, &der), out);
        GT_TRY_GOTO(err, gt_sgx_seal(&blob, pf, secs, &sp, der.data, der.len, NULL, 0), out);
        GT_TRY_GOTO(err, gt_file_write_atomic(path, blob.data, blob.len, 0600), out);
    }
    size_t n = 0;
    GT_TRY_GOTO(err, gt_pkey_ec_public_xy(q->key, q->key_xy, sizeof q->key_xy, &n), out);
    GT_ENSURE_GOTO(err, n == GT_VSGX_KEY_BYTES, out, GT_E_FORMAT, "vqe: not a P-256 key");
out:
    gt_buf_free_nowipe(&blob);
    gt_buf_free(&der);
    return err;
}

// The QE report (REPORTDATA = SHA-256(key || auth data) || zeros) and the host evidence.
static gt_err build_chain(gt_vqe *q, const gt_sgx_identity *qe, const gt_collect_params *host)
{
    uint8_t rd[GT_REPORT_DATA_BYTES] = {0}, host_rd[GT_REPORT_DATA_BYTES];
    gt_hash_ctx *h = NULL;
    gt_evidence ev = {0};
    gt_err err;
    GT_TRY_GOTO(err, gt_random_bytes(q->qe_auth, sizeof q->qe_auth), out);
    GT_TRY_GOTO(err, gt_hash_new(&h, GT_HASH_SHA256), out);
    GT_TRY_GOTO(err, gt_hash_update(h, q->key_xy, sizeof q->key_xy), out);
    GT_TRY_GOTO(err, gt_hash_update(h, q->qe_auth, sizeof q->qe_auth), out);
    GT_TRY_GOTO(err, gt_hash_final(h, rd), out);
    GT_TRY_GOTO(err, report_body(q->qe_report, qe, q->cpusvn, rd), out);
    GT_TRY_GOTO(err, gt_ecdsa_sign_raw(q->key, GT_HASH_SHA256, q->qe_report_signature, 32,
                                       q->qe_report, sizeof q->qe_report), out);
    GT_TRY_GOTO(err, gt_vsgx_host_report_data(host_rd, q->platform_id, q->key_xy, q->qe_report),
                out);
    GT_TRY_GOTO(err, gt_err_wrap(gt_attest_collect(&ev, host, host_rd),
                                 "vqe: collecting the host TEE's evidence"), out);
    GT_TRY_GOTO(err, gt_evidence_encode(&ev, &q->host_evidence), out);
out:
    gt_hash_free(h);
    gt_evidence_free(&ev);
    return err;
}

gt_err gt_vqe_open(gt_vqe **out, const char *dir, const gt_sgx_platform *pf,
                   const gt_collect_params *host)
{
    *out = NULL;
    gt_vqe *q = calloc(1, sizeof *q);
    GT_ENSURE(q != NULL, GT_E_NOMEM, "vqe: out of memory");
    gt_sgx_identity qe;
    gt_sgx_secs_identity secs;
    qe_identity(&qe, &secs);
    memcpy(q->cpusvn, pf->cpusvn, sizeof q->cpusvn);
    gt_err err;
    GT_TRY_GOTO(err, gt_vsgx_qe_identity(qe.mrenclave, qe.mrsigner), out);
    memcpy(secs.mrenclave, qe.mrenclave, 32);
    memcpy(secs.mrsigner, qe.mrsigner, 32);
    GT_TRY_GOTO(err, gt_sgx_platform_id(pf, q->platform_id), out);
    GT_TRY_GOTO(err, load_key(q, dir, pf, &secs), out);
    GT_TRY_GOTO(err, build_chain(q, &qe, host), out);
    q->secs = secs;
    q->platform = *pf;
    *out = q;
out:
    if (!gt_is_ok(err)) {
        gt_vqe_free(q);
    }
    return err;
}

// The quote over a 384-byte report body: header || body signed by the attestation key.
static gt_err quote_body(const gt_vqe *q, const uint8_t report[GT_VSGX_REPORT_BODY_BYTES],
                         gt_evidence *out)
{
    memset(out, 0, sizeof *out);
    uint8_t signed_region[GT_VSGX_HEADER_BYTES + GT_VSGX_REPORT_BODY_BYTES];
    uint8_t *body = signed_region + GT_VSGX_HEADER_BYTES;
    gt_vsgx_quote vq = {
        .qe_svn = GT_VSGX_QE_ISVSVN,
        .body = {body, GT_VSGX_REPORT_BODY_BYTES},
        .qe_report = {q->qe_report, sizeof q->qe_report},
        .qe_auth_data = {q->qe_auth, sizeof q->qe_auth},
        .host_evidence = gt_buf_span(&q->host_evidence),
    };
    memcpy(vq.user_data, q->platform_id, sizeof vq.user_data);
    memcpy(vq.attestation_key, q->key_xy, sizeof vq.attestation_key);
    memcpy(vq.qe_report_signature, q->qe_report_signature, sizeof vq.qe_report_signature);
    memcpy(vq.platform_id, q->platform_id, sizeof vq.platform_id);
    gt_vsgx_quote_header(signed_region, &vq);
    memcpy(body, report, GT_VSGX_REPORT_BODY_BYTES);
    GT_TRY(gt_ecdsa_sign_raw(q->key, GT_HASH_SHA256, vq.signature, 32, signed_region,
                             sizeof signed_region));
    gt_evidence ev = {.type = GT_TEE_VSGX, .version = 3, .enveloped = true};
    gt_err err = gt_vsgx_quote_encode(&vq, &ev.body);
    if (!gt_is_ok(err)) {
        gt_evidence_free(&ev);
        return err;
    }
    *out = ev;
    return GT_OK;
}

gt_err gt_vqe_quote(const gt_vqe *q, const gt_sgx_identity *id,
                    const uint8_t reportdata[GT_REPORT_DATA_BYTES], gt_evidence *out)
{
    uint8_t body[GT_VSGX_REPORT_BODY_BYTES];
    memset(out, 0, sizeof *out);
    GT_TRY(report_body(body, id, q->cpusvn, reportdata));
    return quote_body(q, body, out);
}

void gt_vqe_targetinfo(const gt_vqe *q, gt_sgx_targetinfo *ti)
{
    gt_sgx_targetinfo_of(ti, &q->secs);
}

gt_err gt_vqe_quote_report(const gt_vqe *q, const uint8_t *report, size_t len, gt_evidence *out)
{
    gt_sgx_report r;
    memset(out, 0, sizeof *out);
    GT_TRY(gt_err_wrap(gt_sgx_report_decode(report, len, &r), "vqe: the enclave's REPORT"));
    GT_TRY(gt_err_wrap(gt_sgx_report_verify(&r, &q->platform, &q->secs),
                       "vqe: refusing to quote the REPORT"));
    // The body exactly as EREPORT wrote it (the SGX REPORT body and the quote's report body
    // are one layout), so nothing of the enclave's identity passes through the caller.
    return quote_body(q, report, out);
}

void gt_vqe_free(gt_vqe *q)
{
    if (q == NULL) {
        return;
    }
    gt_pkey_free(q->key);
    gt_buf_free_nowipe(&q->host_evidence);
    gt_secure_zero(q, sizeof *q);
    free(q);
}
