// NVIDIA GPU evidence verification: GPU chain to the NVIDIA Device Identity CA, SPDM signature by
// the leaf key, the verifier's nonce, and the opaque FWID against the leaf's DICE FWID.
#include "nvgpu_evidence.h"

#include "chain.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void add_reason(gt_nvgpu_verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_reason(gt_nvgpu_verdict *v, const char *fmt, ...)
{
    if (v->reason_count < GT_NVGPU_MAX_REASONS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->reasons[v->reason_count], GT_NVGPU_REASON_BYTES, fmt, ap);
        va_end(ap);
    }
    v->reason_count++;
}

// One DER element: tag (single byte), definite length (short form or 1..3 length bytes), and a
// reader over its contents.
static gt_err der_next(gt_reader *r, uint8_t *tag, gt_reader *contents)
{
    uint8_t l0 = 0;
    GT_TRY(gt_reader_u8(r, tag));
    GT_ENSURE((*tag & 0x1f) != 0x1f, GT_E_FORMAT, "DER: multi-byte tag");
    GT_TRY(gt_reader_u8(r, &l0));
    size_t len = l0;
    if (l0 >= 0x80) {
        size_t nbytes = l0 & 0x7fu;
        GT_ENSURE(nbytes >= 1 && nbytes <= 3, GT_E_FORMAT, "DER: length form 0x%02x", l0);
        len = 0;
        for (size_t i = 0; i < nbytes; i++) {
            uint8_t b = 0;
            GT_TRY(gt_reader_u8(r, &b));
            len = (len << 8) | b;
        }
    }
    return gt_reader_sub(r, len, contents);
}

// DER of OID 2.16.840.1.101.3.4.2.2 (id-sha384).
static const uint8_t oid_sha384[] = {0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02};

// FWID ::= SEQUENCE { hashAlg OBJECT IDENTIFIER, fwid OCTET STRING }: true if SHA-384.
static bool fwid_sha384(gt_reader seq, uint8_t out[GT_SHA384_BYTES])
{
    uint8_t tag = 0;
    gt_reader oid = {0}, dig = {0};
    if (der_next(&seq, &tag, &oid).code != GT_E_NONE || tag != 0x06 ||
        oid.len != sizeof oid_sha384 || memcmp(oid.data, oid_sha384, sizeof oid_sha384) != 0) {
        return false;
    }
    if (der_next(&seq, &tag, &dig).code != GT_E_NONE || tag != 0x04 ||
        dig.len != GT_SHA384_BYTES) {
        return false;
    }
    return gt_reader_bytes(&dig, out, GT_SHA384_BYTES).code == GT_E_NONE;
}

// The extension is either the TCG DICE "composite device id" (SEQUENCE { version, SPKI, FWID })
// that Hopper leaf certificates carry, or a DiceTcbInfo with fwids [6] SEQUENCE OF FWID.
gt_err gt_nvgpu_leaf_fwid(const gt_x509 *leaf, uint8_t fwid[GT_SHA384_BYTES])
{
    gt_span val = {0};
    GT_TRY(gt_err_wrap(gt_x509_extension(leaf, GT_NVGPU_OID_DICE_FWID, &val), "leaf FWID"));
    gt_reader r = gt_reader_init(val.data, val.len);
    gt_reader outer = {0};
    uint8_t tag = 0;
    GT_TRY(gt_err_wrap(der_next(&r, &tag, &outer), "leaf FWID"));
    GT_ENSURE(tag == 0x30, GT_E_FORMAT, "leaf FWID: not a SEQUENCE");
    while (gt_reader_left(&outer) > 0) {
        gt_reader el = {0};
        GT_TRY(gt_err_wrap(der_next(&outer, &tag, &el), "leaf FWID"));
        if (tag == 0x30 && fwid_sha384(el, fwid)) {
            return GT_OK;
        }
        if (tag == 0xa6) {  // DiceTcbInfo fwids
            while (gt_reader_left(&el) > 0) {
                gt_reader f = {0};
                GT_TRY(gt_err_wrap(der_next(&el, &tag, &f), "leaf FWID"));
                if (tag == 0x30 && fwid_sha384(f, fwid)) {
                    return GT_OK;
                }
            }
        }
    }
    return gt_errf(GT_E_NOTFOUND, "leaf FWID: no SHA-384 FWID in the DICE extension");
}

static void check_fwid(gt_nvgpu_verdict *v, const gt_nvgpu_evidence *ev, const gt_x509 *leaf)
{
    gt_span op = {0};
    uint8_t cert_fwid[GT_SHA384_BYTES] = {0};
    gt_err e = gt_nvgpu_opaque_find(ev, GT_NVGPU_OPAQUE_FWID, &op);
    if (e.code != GT_E_NONE) {
        add_reason(v, "evidence has no FWID opaque field");
        return;
    }
    e = gt_nvgpu_leaf_fwid(leaf, cert_fwid);
    if (e.code != GT_E_NONE) {
        add_reason(v, "%s", e.msg);
        return;
    }
    if (op.len != GT_SHA384_BYTES || !gt_ct_equal(op.data, cert_fwid, GT_SHA384_BYTES)) {
        add_reason(v, "evidence FWID != leaf certificate FWID");
        return;
    }
    v->fwid_valid = true;
}

gt_err gt_nvgpu_evidence_verify(gt_nvgpu_verdict *v, const gt_nvgpu_evidence *ev,
                                const gt_nvgpu_verify_params *p)
{
    memset(v, 0, sizeof *v);
    GT_ENSURE(p != NULL && p->leaf != NULL, GT_E_ARG, "nvgpu verify: no leaf certificate");

    // 1. GPU chain to the trusted NVIDIA Device Identity CA, at the given time.
    gt_x509_verify_params xp = {
        .intermediates = p->intermediates,
        .intermediate_count = p->intermediate_count,
        .roots = p->roots,
        .root_count = p->root_count,
        .crls = p->crls,
        .crl_count = p->crl_count,
        .at = p->at,
    };
    gt_err e = gt_attest_chain_verify(p->leaf, &xp);
    v->chain_valid = e.code == GT_E_NONE;
    if (!v->chain_valid) {
        if (e.code != GT_E_AUTH) {
            return gt_err_wrap(e, "nvgpu verify: chain");
        }
        add_reason(v, "GPU certificate chain: %s", e.msg);
    }

    // 2. The SPDM signature with the leaf's key.
    uint8_t xy[2 * 66] = {0};
    size_t xy_len = 0;
    e = gt_attest_leaf_ec_point(p->leaf, xy, sizeof xy, &xy_len);
    if (e.code != GT_E_NONE) {
        add_reason(v, "leaf public key: %s", e.msg);
    } else if (xy_len != GT_P384_XY_BYTES) {
        add_reason(v, "leaf public key is not P-384 (%zu-byte point)", xy_len);
    } else {
        e = gt_nvgpu_evidence_verify_signature(ev, xy, xy_len);
        v->signature_valid = e.code == GT_E_NONE;
        if (!v->signature_valid) {
            if (e.code != GT_E_AUTH) {
                return gt_err_wrap(e, "nvgpu verify: signature");
            }
            add_reason(v, "%s", e.msg);
        }
    }

    // 3. Freshness: the request carries the verifier's nonce.
    if (p->expected_nonce != NULL) {
        v->nonce_valid = gt_ct_equal(ev->nonce, p->expected_nonce, GT_NVGPU_NONCE_BYTES);
        if (!v->nonce_valid) {
            add_reason(v, "request nonce != expected nonce");
        }
    }

    // 4. The firmware the leaf key was issued to is the firmware that reports.
    check_fwid(v, ev, p->leaf);

    v->ok = v->reason_count == 0;
    return GT_OK;
}
