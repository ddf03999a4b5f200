// vsgx quotes: the SGX ECDSA quote v3 layout (Intel "SGX ECDSA Quote Library API"), signed by
// gputravel's virtual quoting enclave, with certification data that carries the host TEE's
// evidence instead of a PCK chain (attest.h). Parsed only through gt_reader; every length field
// is checked against what is there and against what the next field needs.
#include <gputravel/attest.h>

#include "intel_quote.h"

#include <string.h>

static gt_err label_hash(uint8_t out[32], const char *label)
{
    return gt_hash(GT_HASH_SHA256, out, label, strlen(label));
}

gt_err gt_vsgx_qe_identity(uint8_t mrenclave[32], uint8_t mrsigner[32])
{
    GT_TRY(label_hash(mrenclave, "gputravel/vsgx-qe/mrenclave/v1"));
    return label_hash(mrsigner, "gputravel/vsgx-qe/mrsigner/v1");
}

gt_err gt_vsgx_host_report_data(uint8_t out[GT_REPORT_DATA_BYTES],
                                const uint8_t platform_id[GT_VSGX_PLATFORM_ID_BYTES],
                                const uint8_t attestation_key[GT_VSGX_KEY_BYTES],
                                const uint8_t qe_report[GT_VSGX_REPORT_BODY_BYTES])
{
    return gt_attest_report_data_build(out, GT_VSGX_HOST_DOMAIN, platform_id,
                                       GT_VSGX_PLATFORM_ID_BYTES, attestation_key,
                                       GT_VSGX_KEY_BYTES, qe_report, GT_VSGX_REPORT_BODY_BYTES);
}

void gt_vsgx_quote_header(uint8_t out[GT_VSGX_HEADER_BYTES], const gt_vsgx_quote *q)
{
    memset(out, 0, GT_VSGX_HEADER_BYTES);
    out[0] = 3;                              // version
    out[2] = GT_INTEL_ATT_KEY_ECDSA_P256;    // attestation key type; TEE type 0 = SGX
    out[8] = (uint8_t)q->qe_svn;
    out[9] = (uint8_t)(q->qe_svn >> 8);
    out[10] = (uint8_t)q->pce_svn;
    out[11] = (uint8_t)(q->pce_svn >> 8);
    memcpy(out + 12, GT_VSGX_QE_VENDOR_ID, 16);
    memcpy(out + 28, q->user_data, 20);
}

static gt_err header_parse(gt_reader *r, gt_vsgx_quote *q)
{
    uint16_t version = 0, akt = 0;
    uint32_t tee = 0;
    uint8_t vendor[16];
    GT_TRY(gt_reader_u16le(r, &version));
    GT_TRY(gt_reader_u16le(r, &akt));
    GT_TRY(gt_reader_u32le(r, &tee));
    GT_TRY(gt_reader_u16le(r, &q->qe_svn));
    GT_TRY(gt_reader_u16le(r, &q->pce_svn));
    GT_TRY(gt_reader_bytes(r, vendor, sizeof vendor));
    GT_TRY(gt_reader_bytes(r, q->user_data, sizeof q->user_data));
    GT_ENSURE(version == 3, GT_E_UNSUPPORTED, "vsgx quote: version %u (expected 3)", version);
    GT_ENSURE(akt == GT_INTEL_ATT_KEY_ECDSA_P256, GT_E_UNSUPPORTED,
              "vsgx quote: attestation key type %u (expected 2 = ECDSA P-256)", akt);
    GT_ENSURE(tee == GT_INTEL_TEE_SGX, GT_E_UNSUPPORTED, "vsgx quote: TEE type 0x%08x "
              "(expected 0 = SGX)", tee);
    GT_ENSURE(memcmp(vendor, GT_VSGX_QE_VENDOR_ID, 16) == 0, GT_E_FORMAT,
              "vsgx quote: QE vendor id is not gputravel's virtual QE");
    return GT_OK;
}

static gt_err signature_data_parse(gt_reader *sd, gt_vsgx_quote *q)
{
    uint16_t auth_len = 0, cert_type = 0;
    uint32_t cert_len = 0;
    GT_TRY(gt_reader_bytes(sd, q->signature, GT_VSGX_SIG_BYTES));
    GT_TRY(gt_reader_bytes(sd, q->attestation_key, GT_VSGX_KEY_BYTES));
    GT_TRY(gt_reader_span(sd, GT_VSGX_REPORT_BODY_BYTES, &q->qe_report));
    GT_TRY(gt_reader_bytes(sd, q->qe_report_signature, GT_VSGX_SIG_BYTES));
    GT_TRY(gt_reader_u16le(sd, &auth_len));
    GT_TRY(gt_err_wrap(gt_reader_span(sd, auth_len, &q->qe_auth_data), "vsgx quote: QE auth"));
    GT_TRY(gt_reader_u16le(sd, &cert_type));
    GT_ENSURE(cert_type == GT_VSGX_CERT_HOST_EVIDENCE, GT_E_UNSUPPORTED,
              "vsgx quote: certification data type %u (expected %u, host evidence)", cert_type,
              GT_VSGX_CERT_HOST_EVIDENCE);
    GT_TRY(gt_reader_u32le(sd, &cert_len));
    gt_reader cert;
    GT_TRY(gt_err_wrap(gt_reader_sub(sd, cert_len, &cert), "vsgx quote: certification data"));
    GT_TRY(gt_reader_bytes(&cert, q->platform_id, GT_VSGX_PLATFORM_ID_BYTES));
    GT_TRY(gt_reader_span(&cert, gt_reader_left(&cert), &q->host_evidence));
    GT_ENSURE(q->host_evidence.len > 0, GT_E_FORMAT, "vsgx quote: no host evidence");
    return gt_reader_expect_end(sd, "vsgx quote: signature data");
}

gt_err gt_vsgx_quote_parse(gt_vsgx_quote *q, const uint8_t *data, size_t len)
{
    memset(q, 0, sizeof *q);
    GT_ENSURE(len <= GT_EVIDENCE_MAX_BYTES, GT_E_LIMIT, "vsgx quote: %zu bytes", len);
    gt_reader r = gt_reader_init(data, len);
    gt_vsgx_quote tmp = {0};
    uint32_t sd_len = 0;
    gt_reader sd;
    gt_err err;
    GT_TRY_GOTO(err, header_parse(&r, &tmp), out);
    GT_TRY_GOTO(err, gt_reader_span(&r, GT_VSGX_REPORT_BODY_BYTES, &tmp.body), out);
    tmp.signed_region = (gt_span){data, r.pos};
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &sd_len), out);
    GT_TRY_GOTO(err, gt_err_wrap(gt_reader_sub(&r, sd_len, &sd), "vsgx quote: signature data"),
                out);
    GT_TRY_GOTO(err, signature_data_parse(&sd, &tmp), out);
    GT_TRY_GOTO(err, gt_reader_expect_end(&r, "vsgx quote"), out);
    *q = tmp;
out:
    return gt_is_ok(err) ? err : gt_err_wrap(err, "vsgx quote");
}

static gt_err encode_signature_data(gt_writer *w, const gt_vsgx_quote *q)
{
    GT_TRY(gt_writer_bytes(w, q->signature, GT_VSGX_SIG_BYTES));
    GT_TRY(gt_writer_bytes(w, q->attestation_key, GT_VSGX_KEY_BYTES));
    GT_TRY(gt_writer_bytes(w, q->qe_report.data, q->qe_report.len));
    GT_TRY(gt_writer_bytes(w, q->qe_report_signature, GT_VSGX_SIG_BYTES));
    GT_TRY(gt_writer_u16le(w, (uint16_t)q->qe_auth_data.len));
    GT_TRY(gt_writer_bytes(w, q->qe_auth_data.data, q->qe_auth_data.len));
    GT_TRY(gt_writer_u16le(w, GT_VSGX_CERT_HOST_EVIDENCE));
    GT_TRY(gt_writer_u32le(w, (uint32_t)(GT_VSGX_PLATFORM_ID_BYTES + q->host_evidence.len)));
    GT_TRY(gt_writer_bytes(w, q->platform_id, GT_VSGX_PLATFORM_ID_BYTES));
    return gt_writer_bytes(w, q->host_evidence.data, q->host_evidence.len);
}

gt_err gt_vsgx_quote_encode(const gt_vsgx_quote *q, gt_buf *out)
{
    GT_ENSURE(q->body.len == GT_VSGX_REPORT_BODY_BYTES &&
                  q->qe_report.len == GT_VSGX_REPORT_BODY_BYTES,
              GT_E_ARG, "vsgx quote: report bodies must be %u bytes", GT_VSGX_REPORT_BODY_BYTES);
    GT_ENSURE(q->qe_auth_data.len <= UINT16_MAX && q->host_evidence.len > 0 &&
                  q->host_evidence.len <= GT_EVIDENCE_MAX_BYTES,
              GT_E_ARG, "vsgx quote: QE auth data or host evidence size");
    uint8_t header[GT_VSGX_HEADER_BYTES];
    gt_vsgx_quote_header(header, q);
    gt_writer sd = gt_writer_init_dynamic(), w = gt_writer_init_dynamic();
    gt_err err;
    GT_TRY_GOTO(err, encode_signature_data(&sd, q), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, header, sizeof header), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, q->body.data, q->body.len), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, (uint32_t)sd.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, sd.data, sd.len), out);
    GT_TRY_GOTO(err, gt_buf_append(out, w.data, w.len), out);
out:
    gt_writer_free(&sd);
    gt_writer_free(&w);
    return err;
}
