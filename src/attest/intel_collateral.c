// Intel PCS collateral: TCB info, QE identity, CRLs and the TCB signing chain, from PCS response
// bodies or from dcap-qvl's collateral JSON. The signatures of TCB info and QE identity cover the
// exact bytes of the "tcbInfo" / "enclaveIdentity" value as it appears in the response, so the
// raw value is located in the text (never re-serialised).
#include "intel_quote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COLL_MAX_BYTES (4u << 20)

// ---- a minimal scanner over valid JSON, to find the raw bytes of one top-level member -------

static size_t skip_ws(const char *t, size_t len, size_t i)
{
    while (i < len && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) {
        i++;
    }
    return i;
}

// t[i] == '"': returns the index just past the closing quote (len if unterminated).
static size_t skip_string(const char *t, size_t len, size_t i)
{
    for (i++; i < len; i++) {
        if (t[i] == '\\') {
            i++;
        } else if (t[i] == '"') {
            return i + 1;
        }
    }
    return len;
}

// Returns the index just past the value starting at t[i] (len if it runs off the end).
static size_t skip_value(const char *t, size_t len, size_t i)
{
    if (i >= len) {
        return len;
    }
    if (t[i] == '"') {
        return skip_string(t, len, i);
    }
    if (t[i] == '{' || t[i] == '[') {
        size_t depth = 0;
        while (i < len) {
            char ch = t[i];
            if (ch == '"') {
                i = skip_string(t, len, i);
                continue;
            }
            if (ch == '{' || ch == '[') {
                depth++;
            } else if (ch == '}' || ch == ']') {
                depth--;
                if (depth == 0) {
                    return i + 1;
                }
            }
            i++;
        }
        return len;
    }
    while (i < len && t[i] != ',' && t[i] != '}' && t[i] != ']' && t[i] != ' ' && t[i] != '\n' &&
           t[i] != '\r' && t[i] != '\t') {
        i++;
    }
    return i;
}

// Finds the raw text of the top-level member `key` of the object in t (which cJSON has already
// accepted as valid JSON).
static gt_err raw_member(const char *t, size_t len, const char *key, gt_span *out)
{
    size_t klen = strlen(key);
    size_t i = skip_ws(t, len, 0);
    GT_ENSURE(i < len && t[i] == '{', GT_E_FORMAT, "collateral: not a JSON object");
    i++;
    for (;;) {
        i = skip_ws(t, len, i);
        GT_ENSURE(i < len && t[i] == '"', GT_E_FORMAT, "collateral: member '%s' not found", key);
        size_t kstart = i + 1;
        i = skip_string(t, len, i);
        GT_ENSURE(i < len, GT_E_FORMAT, "collateral: unterminated key");
        size_t kend = i - 1;
        i = skip_ws(t, len, i);
        GT_ENSURE(i < len && t[i] == ':', GT_E_FORMAT, "collateral: expected ':'");
        i = skip_ws(t, len, i + 1);
        size_t vstart = i;
        i = skip_value(t, len, i);
        GT_ENSURE(i <= len && i > vstart, GT_E_FORMAT, "collateral: bad value");
        if (kend - kstart == klen && memcmp(t + kstart, key, klen) == 0) {
            *out = (gt_span){(const uint8_t *)t + vstart, i - vstart};
            return GT_OK;
        }
        i = skip_ws(t, len, i);
        GT_ENSURE(i < len && t[i] == ',', GT_E_FORMAT, "collateral: member '%s' not found", key);
        i++;
    }
}

// {"<member>":{...},"signature":"<128 hex>"}: copies the raw member value and the signature.
static gt_err signed_json_parse(const uint8_t *data, size_t len, const char *member, gt_buf *body,
                                uint8_t sig[GT_INTEL_SIG_BYTES])
{
    cJSON *doc = NULL;
    gt_err err = GT_OK;
    GT_TRY(gt_json_parse((const char *)data, len, &doc));
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, member);
    GT_ENSURE_GOTO(err, cJSON_IsObject(m), out, GT_E_FORMAT, "collateral: no '%s' object",
                   member);
    GT_TRY_GOTO(err, gt_json_get_hex(doc, "signature", sig, GT_INTEL_SIG_BYTES), out);
    gt_span raw = {0};
    GT_TRY_GOTO(err, raw_member((const char *)data, len, member, &raw), out);
    GT_TRY_GOTO(err, gt_buf_append(body, raw.data, raw.len), out);
out:
    cJSON_Delete(doc);
    return err;
}

static gt_err chain_add(gt_intel_collateral *c, const uint8_t *pem, size_t len)
{
    gt_x509 **certs = NULL;
    size_t n = 0;
    GT_TRY(gt_x509_parse_pem_all(&certs, &n, (const char *)pem, len));
    if (n == 0) {
        free(certs);
        return gt_errf(GT_E_FORMAT, "collateral: TCB signing chain holds no certificate");
    }
    c->tcb_chain = certs;
    c->tcb_chain_count = n;
    return GT_OK;
}

// Accepts DER or PEM; PEM is kept as it is (the crypto layer reads both).
static gt_err crl_add(gt_buf *dst, const uint8_t *data, size_t len, const char *what)
{
    GT_ENSURE(len > 0, GT_E_FORMAT, "collateral: empty %s", what);
    GT_ENSURE(data[0] == 0x30 || (len > 10 && memcmp(data, "-----BEGIN", 10) == 0), GT_E_FORMAT,
              "collateral: %s is neither DER nor PEM", what);
    return gt_buf_append(dst, data, len);
}

static gt_err hex_crl_add(gt_buf *dst, const cJSON *doc, const char *field)
{
    const char *hex = NULL;
    GT_TRY(gt_json_get_string(doc, field, &hex));
    size_t n = strlen(hex) / 2;
    gt_buf b = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_buf_reserve(&b, n + 1), out);
    size_t got = 0;
    GT_TRY_GOTO(err, gt_hex_decode(b.data, b.cap, &got, hex), out);
    b.len = got;
    GT_TRY_GOTO(err, crl_add(dst, b.data, b.len, field), out);
out:
    gt_buf_free_nowipe(&b);
    return err;
}

// dcap-qvl: {"tcb_info": "<json text>", "tcb_info_signature": "hex", "qe_identity": "<json>",
// "qe_identity_signature": "hex", "pck_crl": "hex DER", "root_ca_crl": "hex DER",
// "tcb_info_issuer_chain": "PEM", ...}. The JSON strings are the signed bytes.
static gt_err dcap_json_add(gt_intel_collateral *c, const uint8_t *data, size_t len)
{
    cJSON *doc = NULL;
    gt_err err = GT_OK;
    GT_TRY(gt_json_parse((const char *)data, len, &doc));
    const char *s = NULL;
    GT_TRY_GOTO(err, gt_json_get_string(doc, "tcb_info", &s), out);
    GT_TRY_GOTO(err, gt_buf_append(&c->tcb_info, s, strlen(s)), out);
    GT_TRY_GOTO(err, gt_json_get_hex(doc, "tcb_info_signature", c->tcb_info_sig,
                                     GT_INTEL_SIG_BYTES), out);
    c->has_tcb_info = true;
    GT_TRY_GOTO(err, gt_json_get_string(doc, "qe_identity", &s), out);
    GT_TRY_GOTO(err, gt_buf_append(&c->qe_identity, s, strlen(s)), out);
    GT_TRY_GOTO(err, gt_json_get_hex(doc, "qe_identity_signature", c->qe_identity_sig,
                                     GT_INTEL_SIG_BYTES), out);
    c->has_qe_identity = true;
    GT_TRY_GOTO(err, gt_json_get_string(doc, "tcb_info_issuer_chain", &s), out);
    GT_TRY_GOTO(err, chain_add(c, (const uint8_t *)s, strlen(s)), out);
    GT_TRY_GOTO(err, hex_crl_add(&c->pck_crl, doc, "pck_crl"), out);
    GT_TRY_GOTO(err, hex_crl_add(&c->root_ca_crl, doc, "root_ca_crl"), out);
out:
    cJSON_Delete(doc);
    return err;
}

gt_err gt_intel_collateral_add(gt_intel_collateral *c, gt_intel_coll_kind kind,
                               const uint8_t *data, size_t len)
{
    GT_ENSURE(len <= COLL_MAX_BYTES, GT_E_LIMIT, "collateral: %zu bytes", len);
    uint8_t sig[GT_INTEL_SIG_BYTES] = {0};
    switch (kind) {
    case GT_INTEL_COLL_TCB_INFO:
        GT_ENSURE(!c->has_tcb_info, GT_E_STATE, "collateral: TCB info given twice");
        GT_TRY(gt_err_wrap(signed_json_parse(data, len, "tcbInfo", &c->tcb_info, sig),
                           "TCB info"));
        memcpy(c->tcb_info_sig, sig, sizeof sig);
        c->has_tcb_info = true;
        return GT_OK;
    case GT_INTEL_COLL_QE_IDENTITY:
        GT_ENSURE(!c->has_qe_identity, GT_E_STATE, "collateral: QE identity given twice");
        GT_TRY(gt_err_wrap(signed_json_parse(data, len, "enclaveIdentity", &c->qe_identity, sig),
                           "QE identity"));
        memcpy(c->qe_identity_sig, sig, sizeof sig);
        c->has_qe_identity = true;
        return GT_OK;
    case GT_INTEL_COLL_TCB_SIGNING_CHAIN:
        GT_ENSURE(c->tcb_chain_count == 0, GT_E_STATE, "collateral: TCB chain given twice");
        return chain_add(c, data, len);
    case GT_INTEL_COLL_PCK_CRL:
        GT_ENSURE(c->pck_crl.len == 0, GT_E_STATE, "collateral: PCK CRL given twice");
        return crl_add(&c->pck_crl, data, len, "PCK CRL");
    case GT_INTEL_COLL_ROOT_CA_CRL:
        GT_ENSURE(c->root_ca_crl.len == 0, GT_E_STATE, "collateral: root CA CRL given twice");
        return crl_add(&c->root_ca_crl, data, len, "root CA CRL");
    case GT_INTEL_COLL_DCAP_QVL_JSON: {
        GT_ENSURE(!c->has_tcb_info && !c->has_qe_identity && c->tcb_chain_count == 0 &&
                      c->pck_crl.len == 0 && c->root_ca_crl.len == 0,
                  GT_E_STATE, "collateral: dcap-qvl JSON must be the only collateral");
        // Built on the side: a failure leaves c as it was.
        gt_intel_collateral tmp = {0};
        gt_err err = dcap_json_add(&tmp, data, len);
        if (!gt_is_ok(err)) {
            gt_intel_collateral_free(&tmp);
            return gt_err_wrap(err, "dcap-qvl collateral");
        }
        gt_intel_collateral_free(c);
        *c = tmp;
        return GT_OK;
    }
    default:
        return gt_errf(GT_E_ARG, "collateral: unknown kind %d", (int)kind);
    }
}

gt_err gt_intel_collateral_add_file(gt_intel_collateral *c, gt_intel_coll_kind kind,
                                    const char *path)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, COLL_MAX_BYTES, &b));
    gt_err err = gt_intel_collateral_add(c, kind, b.data, b.len);
    gt_buf_free_nowipe(&b);
    return gt_err_wrap(err, "%s", path);
}

void gt_intel_collateral_free(gt_intel_collateral *c)
{
    gt_buf_free_nowipe(&c->tcb_info);
    gt_buf_free_nowipe(&c->qe_identity);
    gt_buf_free_nowipe(&c->pck_crl);
    gt_buf_free_nowipe(&c->root_ca_crl);
    for (size_t i = 0; i < c->tcb_chain_count; i++) {
        gt_x509_free(c->tcb_chain[i]);
    }
    free(c->tcb_chain);
    memset(c, 0, sizeof *c);
}

gt_err gt_intel_parse_time(const char *s, int64_t *out)
{
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0, n = 0;
    GT_ENSURE(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h, &mi, &se, &n) == 6 &&
                  n == 20 && s[n] == '\0',
              GT_E_FORMAT, "time '%.32s' is not YYYY-MM-DDTHH:MM:SSZ", s);
    GT_ENSURE(y >= 1970 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h <= 23 && mi <= 59 &&
                  se <= 60 && h >= 0 && mi >= 0 && se >= 0,
              GT_E_FORMAT, "time '%.32s' out of range", s);
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                    .tm_min = mi, .tm_sec = se};
    *out = (int64_t)timegm(&tm);
    return GT_OK;
}
