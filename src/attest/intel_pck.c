// The SGX extensions of a PCK certificate (OID 1.2.840.113741.1.13.1), read from DER with
// gt_reader. Layout (Intel "SGX PCK Certificate and CRL Profile"):
//   SEQUENCE OF SEQUENCE { OID, value }:
//     .1 PPID OCTET STRING(16)       .2 TCB SEQUENCE OF SEQUENCE { OID .2.N, value }:
//                                          .2.1-.2.16 INTEGER comp SVN, .2.17 INTEGER PCESVN,
//                                          .2.18 OCTET STRING(16) CPUSVN
//     .3 PCE-ID OCTET STRING(2)      .4 FMSPC OCTET STRING(6)     .5 SGX type ENUMERATED
//     .6 / .7 platform instance / configuration (Platform CA certs only; skipped)
#include "intel_quote.h"

#include <string.h>

#define DER_INTEGER 0x02
#define DER_OCTET_STRING 0x04
#define DER_OID 0x06
#define DER_ENUMERATED 0x0a
#define DER_SEQUENCE 0x30

// 1.2.840.113741.1.13.1 as DER OID content bytes.
static const uint8_t sgx_oid[] = {0x2a, 0x86, 0x48, 0x86, 0xf8, 0x4d, 0x01, 0x0d, 0x01};

// One TLV: checks the tag and returns a reader over the value (definite lengths only).
static gt_err der_tlv(gt_reader *r, uint8_t want_tag, gt_reader *value)
{
    uint8_t tag = 0, l0 = 0;
    GT_TRY(gt_reader_u8(r, &tag));
    GT_ENSURE(tag == want_tag, GT_E_FORMAT, "pck extension: tag 0x%02x where 0x%02x expected",
              tag, want_tag);
    GT_TRY(gt_reader_u8(r, &l0));
    size_t len = l0;
    if (l0 & 0x80) {
        size_t nbytes = l0 & 0x7f;
        GT_ENSURE(nbytes >= 1 && nbytes <= 3, GT_E_FORMAT,
                  "pck extension: length of %zu bytes", nbytes);
        len = 0;
        for (size_t i = 0; i < nbytes; i++) {
            uint8_t b = 0;
            GT_TRY(gt_reader_u8(r, &b));
            len = (len << 8) | b;
        }
        GT_ENSURE(len >= 0x80, GT_E_FORMAT, "pck extension: non-minimal length");
    }
    return gt_reader_sub(r, len, value);
}

// The OID of an inner SEQUENCE must be the SGX OID plus one or two arcs; returns them.
static gt_err sub_oid(gt_reader *r, int *arc1, int *arc2)
{
    gt_reader oid = {0};
    GT_TRY(der_tlv(r, DER_OID, &oid));
    gt_span s = {0};
    GT_TRY(gt_reader_span(&oid, gt_reader_left(&oid), &s));
    GT_ENSURE((s.len == sizeof sgx_oid + 1 || s.len == sizeof sgx_oid + 2) &&
                  memcmp(s.data, sgx_oid, sizeof sgx_oid) == 0,
              GT_E_FORMAT, "pck extension: unexpected OID");
    *arc1 = s.data[sizeof sgx_oid];
    *arc2 = s.len == sizeof sgx_oid + 2 ? s.data[sizeof sgx_oid + 1] : -1;
    GT_ENSURE(*arc1 < 0x80 && *arc2 < 0x80, GT_E_FORMAT, "pck extension: OID arc too large");
    return GT_OK;
}

// A non-negative INTEGER/ENUMERATED that fits in 16 bits (leading 0x00 allowed for the sign).
static gt_err der_small_uint(gt_reader *r, uint8_t tag, uint32_t *out)
{
    gt_reader v = {0};
    GT_TRY(der_tlv(r, tag, &v));
    size_t n = gt_reader_left(&v);
    GT_ENSURE(n >= 1 && n <= 3, GT_E_FORMAT, "pck extension: integer of %zu bytes", n);
    uint32_t x = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = 0;
        GT_TRY(gt_reader_u8(&v, &b));
        GT_ENSURE(i != 0 || (b & 0x80) == 0, GT_E_FORMAT, "pck extension: negative integer");
        x = (x << 8) | b;
    }
    GT_ENSURE(x <= 0xffff, GT_E_FORMAT, "pck extension: integer %u out of range", x);
    *out = x;
    return GT_OK;
}

static gt_err der_octets(gt_reader *r, uint8_t *out, size_t n, const char *what)
{
    gt_reader v = {0};
    GT_TRY(der_tlv(r, DER_OCTET_STRING, &v));
    GT_ENSURE(gt_reader_left(&v) == n, GT_E_FORMAT, "pck extension: %s is %zu bytes, not %zu",
              what, gt_reader_left(&v), n);
    return gt_reader_bytes(&v, out, n);
}

static gt_err tcb_parse(gt_reader *r, gt_intel_pck_ext *ext, unsigned *seen)
{
    gt_reader seq = {0};
    GT_TRY(der_tlv(r, DER_SEQUENCE, &seq));
    uint32_t comps = 0;
    while (gt_reader_left(&seq) > 0) {
        gt_reader item = {0};
        GT_TRY(der_tlv(&seq, DER_SEQUENCE, &item));
        int a1 = 0, a2 = 0;
        GT_TRY(sub_oid(&item, &a1, &a2));
        GT_ENSURE(a1 == 2 && a2 >= 1, GT_E_FORMAT, "pck extension: bad TCB OID");
        if (a2 <= 16) {
            uint32_t v = 0;
            GT_TRY(der_small_uint(&item, DER_INTEGER, &v));
            GT_ENSURE(v <= 0xff, GT_E_FORMAT, "pck extension: comp SVN %u out of range", v);
            ext->comp_svn[a2 - 1] = (uint8_t)v;
            comps |= 1u << (a2 - 1);
        } else if (a2 == 17) {
            uint32_t v = 0;
            GT_TRY(der_small_uint(&item, DER_INTEGER, &v));
            ext->pce_svn = (uint16_t)v;
            *seen |= 1u << 17;
        } else if (a2 == 18) {
            GT_TRY(der_octets(&item, ext->cpu_svn, sizeof ext->cpu_svn, "CPUSVN"));
            *seen |= 1u << 18;
        } else {
            continue;  // unknown arc: ignore, as the profile allows extension
        }
        GT_TRY(gt_reader_expect_end(&item, "pck extension: TCB item"));
    }
    GT_ENSURE(comps == 0xffffu, GT_E_FORMAT, "pck extension: TCB component SVNs incomplete");
    *seen |= 1u << 2;
    return GT_OK;
}

gt_err gt_intel_pck_ext_parse(gt_intel_pck_ext *ext, const uint8_t *der, size_t len)
{
    memset(ext, 0, sizeof *ext);
    ext->sgx_type = -1;
    gt_reader r = gt_reader_init(der, len);
    gt_reader top = {0};
    GT_TRY(der_tlv(&r, DER_SEQUENCE, &top));
    GT_TRY(gt_reader_expect_end(&r, "pck extension"));
    unsigned seen = 0;
    while (gt_reader_left(&top) > 0) {
        gt_reader item = {0};
        GT_TRY(der_tlv(&top, DER_SEQUENCE, &item));
        int a1 = 0, a2 = 0;
        GT_TRY(sub_oid(&item, &a1, &a2));
        GT_ENSURE(a2 == -1, GT_E_FORMAT, "pck extension: unexpected nested OID");
        switch (a1) {
        case 1: GT_TRY(der_octets(&item, ext->ppid, sizeof ext->ppid, "PPID")); break;
        case 2: GT_TRY(tcb_parse(&item, ext, &seen)); break;
        case 3: GT_TRY(der_octets(&item, ext->pce_id, sizeof ext->pce_id, "PCE-ID")); break;
        case 4: GT_TRY(der_octets(&item, ext->fmspc, sizeof ext->fmspc, "FMSPC")); break;
        case 5: {
            uint32_t t = 0;
            GT_TRY(der_small_uint(&item, DER_ENUMERATED, &t));
            ext->sgx_type = (int)t;
            break;
        }
        default:
            continue;  // .6 platform instance id, .7 configuration, future arcs
        }
        seen |= 1u << a1;
        GT_TRY(gt_reader_expect_end(&item, "pck extension: item"));
    }
    unsigned need = (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4) | (1u << 17) | (1u << 18);
    GT_ENSURE((seen & need) == need, GT_E_FORMAT,
              "pck extension: missing PPID, TCB, PCESVN, CPUSVN, PCE-ID or FMSPC");
    return GT_OK;
}
