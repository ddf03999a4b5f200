// Intel DCAP quote parsing: SGX quote v3, TDX quote v4 (TD 1.0 body) and v5 (typed body).
// Layouts: Intel "SGX ECDSA Quote Library API" (v3) and "TDX DCAP Quoting Library API" (v4/v5).
// All fields little-endian. The signed region is borrowed with gt_reader_span so that the
// signature check covers exactly the bytes parsed.
#include "intel_quote.h"

#include <stdio.h>
#include <string.h>

static gt_err header_parse(gt_reader *r, gt_intel_quote_header *h)  // 48 bytes
{
    GT_TRY(gt_reader_u16le(r, &h->version));
    GT_TRY(gt_reader_u16le(r, &h->att_key_type));
    GT_TRY(gt_reader_u32le(r, &h->tee_type));
    GT_TRY(gt_reader_u16le(r, &h->qe_svn));
    GT_TRY(gt_reader_u16le(r, &h->pce_svn));
    GT_TRY(gt_reader_bytes(r, h->qe_vendor_id, sizeof h->qe_vendor_id));
    GT_TRY(gt_reader_bytes(r, h->user_data, sizeof h->user_data));
    GT_ENSURE(h->version >= 3 && h->version <= 5, GT_E_UNSUPPORTED,
              "intel quote: version %u (expected 3, 4 or 5)", h->version);
    GT_ENSURE(h->att_key_type == GT_INTEL_ATT_KEY_ECDSA_P256, GT_E_UNSUPPORTED,
              "intel quote: attestation key type %u (only 2 = ECDSA P-256)", h->att_key_type);
    GT_ENSURE(h->tee_type == GT_INTEL_TEE_SGX || h->tee_type == GT_INTEL_TEE_TDX,
              GT_E_UNSUPPORTED, "intel quote: TEE type 0x%08x (expected SGX 0 or TDX 0x81)",
              h->tee_type);
    GT_ENSURE(h->version != 3 || h->tee_type == GT_INTEL_TEE_SGX, GT_E_FORMAT,
              "intel quote: version 3 with TEE type 0x%08x (v3 is SGX only)", h->tee_type);
    return GT_OK;
}

gt_err gt_sgx_report_parse(gt_reader *r, gt_sgx_report *rep)  // 384 bytes
{
    GT_TRY(gt_reader_bytes(r, rep->cpu_svn, 16));
    GT_TRY(gt_reader_u32le(r, &rep->misc_select));
    GT_TRY(gt_reader_skip(r, 12));                      // reserved
    GT_TRY(gt_reader_bytes(r, rep->isv_ext_prod_id, 16));
    GT_TRY(gt_reader_bytes(r, rep->attributes, 16));
    GT_TRY(gt_reader_bytes(r, rep->mr_enclave, 32));
    GT_TRY(gt_reader_skip(r, 32));                      // reserved
    GT_TRY(gt_reader_bytes(r, rep->mr_signer, 32));
    GT_TRY(gt_reader_skip(r, 32));                      // reserved
    GT_TRY(gt_reader_bytes(r, rep->config_id, 64));
    GT_TRY(gt_reader_u16le(r, &rep->isv_prod_id));
    GT_TRY(gt_reader_u16le(r, &rep->isv_svn));
    GT_TRY(gt_reader_u16le(r, &rep->config_svn));
    GT_TRY(gt_reader_skip(r, 42));                      // reserved
    GT_TRY(gt_reader_bytes(r, rep->isv_family_id, 16));
    GT_TRY(gt_reader_bytes(r, rep->report_data, 64));
    return GT_OK;
}

static gt_err td_report_parse(gt_reader *r, gt_td_report *td, bool td15)  // 584 or 648 bytes
{
    GT_TRY(gt_reader_bytes(r, td->tee_tcb_svn, 16));
    GT_TRY(gt_reader_bytes(r, td->mr_seam, 48));
    GT_TRY(gt_reader_bytes(r, td->mr_signer_seam, 48));
    GT_TRY(gt_reader_bytes(r, td->seam_attributes, 8));
    GT_TRY(gt_reader_bytes(r, td->td_attributes, 8));
    GT_TRY(gt_reader_bytes(r, td->xfam, 8));
    GT_TRY(gt_reader_bytes(r, td->mr_td, 48));
    GT_TRY(gt_reader_bytes(r, td->mr_config_id, 48));
    GT_TRY(gt_reader_bytes(r, td->mr_owner, 48));
    GT_TRY(gt_reader_bytes(r, td->mr_owner_config, 48));
    for (int i = 0; i < 4; i++) {
        GT_TRY(gt_reader_bytes(r, td->rtmr[i], 48));
    }
    GT_TRY(gt_reader_bytes(r, td->report_data, 64));
    if (td15) {
        GT_TRY(gt_reader_bytes(r, td->tee_tcb_svn2, 16));
        GT_TRY(gt_reader_bytes(r, td->mr_servicetd, 48));
    }
    return GT_OK;
}

// The body after the header: fixed by version and TEE type for v3/v4, typed and sized for v5.
static gt_err body_parse(gt_reader *r, gt_intel_quote *q)
{
    if (q->header.version == 5) {
        uint16_t type = 0;
        uint32_t size = 0;
        GT_TRY(gt_reader_u16le(r, &type));
        GT_TRY(gt_reader_u32le(r, &size));
        uint32_t want = 0;
        switch (type) {
        case GT_INTEL_BODY_SGX: want = GT_SGX_REPORT_BYTES; break;
        case GT_INTEL_BODY_TD10: want = GT_TD10_REPORT_BYTES; break;
        case GT_INTEL_BODY_TD15: want = GT_TD15_REPORT_BYTES; break;
        default:
            return gt_errf(GT_E_UNSUPPORTED, "intel quote v5: body type %u (expected 1, 2 or 3)",
                           type);
        }
        GT_ENSURE(size == want, GT_E_FORMAT, "intel quote v5: body type %u with size %u "
                  "(expected %u)", type, size, want);
        GT_ENSURE((type == GT_INTEL_BODY_SGX) == (q->header.tee_type == GT_INTEL_TEE_SGX),
                  GT_E_FORMAT, "intel quote v5: body type %u does not fit TEE type 0x%08x", type,
                  q->header.tee_type);
        q->body_type = (gt_intel_body_type)type;
        q->body_size = size;
    } else if (q->header.tee_type == GT_INTEL_TEE_TDX) {
        q->body_type = GT_INTEL_BODY_TD10;
        q->body_size = GT_TD10_REPORT_BYTES;
    } else {
        q->body_type = GT_INTEL_BODY_SGX;
        q->body_size = GT_SGX_REPORT_BYTES;
    }
    gt_reader body = {0};
    GT_TRY(gt_reader_sub(r, q->body_size, &body));
    if (q->body_type == GT_INTEL_BODY_SGX) {
        GT_TRY(gt_sgx_report_parse(&body, &q->sgx));
    } else {
        GT_TRY(td_report_parse(&body, &q->td, q->body_type == GT_INTEL_BODY_TD15));
    }
    return gt_reader_expect_end(&body, "intel quote: report body");
}

// Certification data type 5: the PEM chain. Anything else is unsupported here.
static gt_err pck_chain_parse(gt_reader *r, gt_intel_quote *q, const char *where)
{
    uint16_t type = 0;
    uint32_t size = 0;
    GT_TRY(gt_reader_u16le(r, &type));
    GT_TRY(gt_reader_u32le(r, &size));
    GT_ENSURE(type == GT_INTEL_CERT_PCK_CHAIN_PEM, GT_E_UNSUPPORTED,
              "intel quote: %s certification data type %u (expected 5 = PCK chain PEM)", where,
              type);
    GT_ENSURE(size > 0, GT_E_FORMAT, "intel quote: %s: empty PCK certificate chain", where);
    q->pck_cert_data_type = type;
    GT_TRY(gt_reader_span(r, size, &q->pck_chain_pem));
    return GT_OK;
}

// QE report, its signature, QE auth data (v3 layout and the inside of type 6 alike).
static gt_err qe_part_parse(gt_reader *r, gt_intel_quote *q)
{
    gt_reader rep = {0};
    GT_TRY(gt_reader_span(r, GT_SGX_REPORT_BYTES, &q->qe_report_raw));
    rep = gt_reader_init(q->qe_report_raw.data, q->qe_report_raw.len);
    GT_TRY(gt_sgx_report_parse(&rep, &q->qe_report));
    GT_TRY(gt_reader_bytes(r, q->qe_report_signature, GT_INTEL_SIG_BYTES));
    uint16_t auth_len = 0;
    GT_TRY(gt_reader_u16le(r, &auth_len));
    GT_TRY(gt_reader_span(r, auth_len, &q->qe_auth_data));
    return GT_OK;
}

static gt_err signature_data_parse(gt_reader *r, gt_intel_quote *q)
{
    GT_TRY(gt_reader_bytes(r, q->signature, GT_INTEL_SIG_BYTES));
    GT_TRY(gt_reader_bytes(r, q->attestation_key, GT_INTEL_PUBKEY_BYTES));
    if (q->header.version == 3) {
        GT_TRY(qe_part_parse(r, q));
        GT_TRY(pck_chain_parse(r, q, "v3"));
        q->cert_data_type = GT_INTEL_CERT_PCK_CHAIN_PEM;
        return gt_reader_expect_end(r, "intel quote: signature data");
    }
    uint16_t type = 0;
    uint32_t size = 0;
    GT_TRY(gt_reader_u16le(r, &type));
    GT_TRY(gt_reader_u32le(r, &size));
    GT_ENSURE(type == GT_INTEL_CERT_QE_REPORT, GT_E_UNSUPPORTED,
              "intel quote v%u: certification data type %u (expected 6 = QE report)",
              q->header.version, type);
    q->cert_data_type = type;
    gt_reader inner = {0};
    GT_TRY(gt_reader_sub(r, size, &inner));
    GT_TRY(qe_part_parse(&inner, q));
    GT_TRY(pck_chain_parse(&inner, q, "QE report"));
    GT_TRY(gt_reader_expect_end(&inner, "intel quote: QE report certification data"));
    return gt_reader_expect_end(r, "intel quote: signature data");
}

static gt_err quote_parse(gt_intel_quote *q, const uint8_t *data, size_t len)
{
    GT_ENSURE(len <= GT_INTEL_MAX_QUOTE_BYTES, GT_E_LIMIT, "intel quote: %zu bytes (limit %u)",
              len, GT_INTEL_MAX_QUOTE_BYTES);
    gt_reader r = gt_reader_init(data, len);
    GT_TRY(header_parse(&r, &q->header));
    GT_TRY(body_parse(&r, q));
    // The attestation key signed everything read so far.
    q->signed_region = (gt_span){data, r.pos};
    GT_TRY(gt_reader_u32le(&r, &q->signature_data_len));
    gt_reader sig = {0};
    GT_TRY(gt_reader_sub(&r, q->signature_data_len, &sig));
    GT_TRY(signature_data_parse(&sig, q));
    q->size = r.pos;  // trailing bytes after the quote are not part of it
    return GT_OK;
}

gt_err gt_intel_quote_parse(gt_intel_quote *q, const uint8_t *data, size_t len)
{
    memset(q, 0, sizeof *q);
    gt_err err = quote_parse(q, data, len);
    if (!gt_is_ok(err)) {
        memset(q, 0, sizeof *q);
    }
    return err;
}

bool gt_intel_quote_is_tdx(const gt_intel_quote *q)
{
    return q->body_type == GT_INTEL_BODY_TD10 || q->body_type == GT_INTEL_BODY_TD15;
}

bool gt_intel_quote_debug(const gt_intel_quote *q)
{
    if (gt_intel_quote_is_tdx(q)) {
        return (q->td.td_attributes[0] & 0x01) != 0;   // TDATTRIBUTES.DEBUG, bit 0
    }
    return (q->sgx.attributes[0] & 0x02) != 0;         // SGX ATTRIBUTES.DEBUG, bit 1
}

const uint8_t *gt_intel_quote_report_data(const gt_intel_quote *q)
{
    return gt_intel_quote_is_tdx(q) ? q->td.report_data : q->sgx.report_data;
}

// ---- claims ---------------------------------------------------------------------------------

static void claim_bytes(gt_intel_claim *out, size_t cap, size_t *n, const char *name,
                        const uint8_t *b, size_t len)
{
    if (*n < cap) {
        out[*n] = (gt_intel_claim){.name = name, .kind = GT_INTEL_CLAIM_BYTES, .bytes = b,
                                   .len = len};
    }
    (*n)++;
}

static void claim_value(gt_intel_claim *out, size_t cap, size_t *n, const char *name,
                        gt_intel_claim_kind kind, uint64_t v)
{
    if (*n < cap) {
        out[*n] = (gt_intel_claim){.name = name, .kind = kind, .value = v};
    }
    (*n)++;
}

size_t gt_intel_quote_claims(const gt_intel_quote *q, gt_intel_claim *out, size_t cap)
{
    size_t n = 0;
    if (gt_intel_quote_is_tdx(q)) {
        const gt_td_report *t = &q->td;
        static const char *const rtmr_names[4] = {"rtmr0", "rtmr1", "rtmr2", "rtmr3"};
        claim_bytes(out, cap, &n, "tee_tcb_svn", t->tee_tcb_svn, sizeof t->tee_tcb_svn);
        claim_bytes(out, cap, &n, "mr_seam", t->mr_seam, sizeof t->mr_seam);
        claim_bytes(out, cap, &n, "mr_signer_seam", t->mr_signer_seam, sizeof t->mr_signer_seam);
        claim_bytes(out, cap, &n, "seam_attributes", t->seam_attributes,
                    sizeof t->seam_attributes);
        claim_bytes(out, cap, &n, "td_attributes", t->td_attributes, sizeof t->td_attributes);
        claim_bytes(out, cap, &n, "xfam", t->xfam, sizeof t->xfam);
        claim_bytes(out, cap, &n, "mr_td", t->mr_td, sizeof t->mr_td);
        claim_bytes(out, cap, &n, "mr_config_id", t->mr_config_id, sizeof t->mr_config_id);
        claim_bytes(out, cap, &n, "mr_owner", t->mr_owner, sizeof t->mr_owner);
        claim_bytes(out, cap, &n, "mr_owner_config", t->mr_owner_config,
                    sizeof t->mr_owner_config);
        for (int i = 0; i < 4; i++) {
            claim_bytes(out, cap, &n, rtmr_names[i], t->rtmr[i], sizeof t->rtmr[i]);
        }
        claim_bytes(out, cap, &n, "report_data", t->report_data, sizeof t->report_data);
        if (q->body_type == GT_INTEL_BODY_TD15) {
            claim_bytes(out, cap, &n, "tee_tcb_svn2", t->tee_tcb_svn2, sizeof t->tee_tcb_svn2);
            claim_bytes(out, cap, &n, "mr_servicetd", t->mr_servicetd, sizeof t->mr_servicetd);
        }
    } else {
        const gt_sgx_report *s = &q->sgx;
        claim_bytes(out, cap, &n, "cpu_svn", s->cpu_svn, sizeof s->cpu_svn);
        claim_bytes(out, cap, &n, "isv_ext_prod_id", s->isv_ext_prod_id,
                    sizeof s->isv_ext_prod_id);
        claim_bytes(out, cap, &n, "attributes", s->attributes, sizeof s->attributes);
        claim_bytes(out, cap, &n, "mr_enclave", s->mr_enclave, sizeof s->mr_enclave);
        claim_bytes(out, cap, &n, "mr_signer", s->mr_signer, sizeof s->mr_signer);
        claim_bytes(out, cap, &n, "config_id", s->config_id, sizeof s->config_id);
        claim_value(out, cap, &n, "isv_prod_id", GT_INTEL_CLAIM_UINT, s->isv_prod_id);
        claim_value(out, cap, &n, "isv_svn", GT_INTEL_CLAIM_UINT, s->isv_svn);
        claim_value(out, cap, &n, "config_svn", GT_INTEL_CLAIM_UINT, s->config_svn);
        claim_bytes(out, cap, &n, "isv_family_id", s->isv_family_id, sizeof s->isv_family_id);
        claim_bytes(out, cap, &n, "report_data", s->report_data, sizeof s->report_data);
    }
    claim_value(out, cap, &n, "debug", GT_INTEL_CLAIM_BOOL, gt_intel_quote_debug(q) ? 1 : 0);
    return n;
}

gt_err gt_intel_quote_claims_json(const gt_intel_quote *q, cJSON *obj)
{
    gt_intel_claim claims[GT_INTEL_MAX_CLAIMS];
    size_t n = gt_intel_quote_claims(q, claims, GT_INTEL_MAX_CLAIMS);
    GT_ENSURE(n <= GT_INTEL_MAX_CLAIMS, GT_E_LIMIT, "intel quote: %zu claims", n);
    for (size_t i = 0; i < n; i++) {
        const gt_intel_claim *c = &claims[i];
        cJSON *item = NULL;
        if (c->kind == GT_INTEL_CLAIM_BYTES) {
            char hex[2 * 64 + 1];
            gt_hex_encode(hex, sizeof hex, c->bytes, c->len);
            item = cJSON_CreateString(hex);
        } else if (c->kind == GT_INTEL_CLAIM_UINT) {
            item = cJSON_CreateNumber((double)c->value);
        } else {
            item = cJSON_CreateBool(c->value != 0);
        }
        GT_ENSURE(item != NULL, GT_E_NOMEM, "intel quote: claims: out of memory");
        if (!cJSON_AddItemToObject(obj, c->name, item)) {
            cJSON_Delete(item);
            return gt_errf(GT_E_NOMEM, "intel quote: claims: out of memory");
        }
    }
    return GT_OK;
}
