// SIGSTRUCT (SDM vol. 3D, "Enclave Signature Structure"): parse, check, build, sign, JSON.
// 1808 bytes, little-endian; the signature covers bytes [0,128) and [900,1028).
#include <gputravel/enclave.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

static const uint8_t HEADER[12] = {0x06, 0, 0, 0, 0xe1, 0, 0, 0, 0, 0, 0x01, 0};
static const uint8_t HEADER2[16] = {0x01, 0x01, 0, 0, 0x60, 0, 0, 0, 0x60, 0, 0, 0, 0x01, 0, 0, 0};

#define SIGNED1_END 128      // [0,128): header .. reserved1
#define SIGNED2_START 900    // [900,1028): miscselect .. isvsvn
#define SIGNED2_END 1028

static gt_err read_attributes(gt_reader *r, gt_sgx_attributes *a)
{
    GT_TRY(gt_reader_u64le(r, &a->flags));
    return gt_reader_u64le(r, &a->xfrm);
}

gt_err gt_sgx_sigstruct_parse(const uint8_t *data, size_t len, gt_sgx_sigstruct *s)
{
    memset(s, 0, sizeof *s);
    GT_ENSURE(len >= GT_SGX_SIGSTRUCT_BYTES, GT_E_TRUNCATED,
              "sigstruct: %zu bytes (a SIGSTRUCT is 1808)", len);
    GT_ENSURE(len == GT_SGX_SIGSTRUCT_BYTES, GT_E_FORMAT,
              "sigstruct: %zu bytes (a SIGSTRUCT is 1808)", len);
    gt_reader r = gt_reader_init(data, len);
    GT_TRY(gt_reader_bytes(&r, s->header, sizeof s->header));              // 0
    gt_reader h = gt_reader_init(s->header + 12, 4);
    GT_TRY(gt_reader_u32le(&h, &s->header_type));
    GT_TRY(gt_reader_u32le(&r, &s->vendor));                               // 16
    GT_TRY(gt_reader_u32le(&r, &s->date));                                 // 20
    GT_TRY(gt_reader_bytes(&r, s->header2, sizeof s->header2));            // 24
    GT_TRY(gt_reader_u32le(&r, &s->swdefined));                            // 40
    GT_TRY(gt_reader_bytes(&r, s->reserved1, sizeof s->reserved1));        // 44
    GT_TRY(gt_reader_bytes(&r, s->modulus, sizeof s->modulus));            // 128
    GT_TRY(gt_reader_u32le(&r, &s->exponent));                             // 512
    GT_TRY(gt_reader_bytes(&r, s->signature, sizeof s->signature));        // 516
    GT_TRY(gt_reader_u32le(&r, &s->miscselect));                           // 900
    GT_TRY(gt_reader_u32le(&r, &s->miscmask));                             // 904
    GT_TRY(gt_reader_u8(&r, &s->cet_attributes));                          // 908
    GT_TRY(gt_reader_u8(&r, &s->cet_attributes_mask));                     // 909
    GT_TRY(gt_reader_bytes(&r, s->reserved2, sizeof s->reserved2));        // 910
    GT_TRY(gt_reader_bytes(&r, s->isvfamilyid, sizeof s->isvfamilyid));    // 912
    GT_TRY(read_attributes(&r, &s->attributes));                           // 928
    GT_TRY(read_attributes(&r, &s->attributemask));                        // 944
    GT_TRY(gt_reader_bytes(&r, s->enclavehash, sizeof s->enclavehash));    // 960
    GT_TRY(gt_reader_bytes(&r, s->reserved3, sizeof s->reserved3));        // 992
    GT_TRY(gt_reader_bytes(&r, s->isvextprodid, sizeof s->isvextprodid));  // 1008
    GT_TRY(gt_reader_u16le(&r, &s->isvprodid));                            // 1024
    GT_TRY(gt_reader_u16le(&r, &s->isvsvn));                               // 1026
    GT_TRY(gt_reader_bytes(&r, s->reserved4, sizeof s->reserved4));        // 1028
    GT_TRY(gt_reader_bytes(&r, s->q1, sizeof s->q1));                      // 1040
    GT_TRY(gt_reader_bytes(&r, s->q2, sizeof s->q2));                      // 1424
    GT_TRY(gt_reader_expect_end(&r, "sigstruct"));
    memcpy(s->raw, data, GT_SGX_SIGSTRUCT_BYTES);
    return GT_OK;
}

gt_err gt_sgx_sigstruct_find(const uint8_t *data, size_t len, gt_sgx_sigstruct *out,
                             size_t *offset)
{
    *offset = 0;
    if (len >= 4 && memcmp(data, "\x7f" "ELF", 4) == 0) {
        gt_sgx_meta meta;
        size_t at = 0;
        gt_err e = gt_sgx_meta_parse(data, len, &meta);
        if (e.code == GT_E_NONE) {
            at = meta.sigstruct_offset;
        } else if (e.code == GT_E_NOTFOUND) {  // not the SDK's: perhaps Open Enclave's
            gt_err oe = gt_sgx_oeinfo_sigstruct(data, len, &at);
            if (oe.code == GT_E_NOTFOUND) {
                return gt_err_wrap(oe, "no SGX SDK metadata (.note.sgxmeta), and for Open "
                                   "Enclave");
            }
            GT_TRY(oe);
        } else {
            return e;
        }
        gt_reader r = gt_reader_init(data, len);
        gt_span css = {0};
        GT_TRY(gt_reader_skip(&r, at));
        GT_TRY(gt_reader_span(&r, GT_SGX_SIGSTRUCT_BYTES, &css));
        *offset = at;
        return gt_sgx_sigstruct_parse(css.data, css.len, out);
    }
    return gt_sgx_sigstruct_parse(data, len, out);
}

void gt_sgx_sigstruct_encode(gt_sgx_sigstruct *s)
{
    uint8_t *b = s->raw;
    memset(b, 0, GT_SGX_SIGSTRUCT_BYTES);
    memcpy(b + 0, s->header, 16);
    gt_store_u32le(b + 12, s->header_type);
    gt_store_u32le(b + 16, s->vendor);
    gt_store_u32le(b + 20, s->date);
    memcpy(b + 24, s->header2, 16);
    gt_store_u32le(b + 40, s->swdefined);
    memcpy(b + 44, s->reserved1, 84);
    memcpy(b + 128, s->modulus, GT_SGX_KEY_BYTES);
    gt_store_u32le(b + 512, s->exponent);
    memcpy(b + 516, s->signature, GT_SGX_KEY_BYTES);
    gt_store_u32le(b + 900, s->miscselect);
    gt_store_u32le(b + 904, s->miscmask);
    b[908] = s->cet_attributes;
    b[909] = s->cet_attributes_mask;
    memcpy(b + 910, s->reserved2, 2);
    memcpy(b + 912, s->isvfamilyid, 16);
    gt_store_u64le(b + 928, s->attributes.flags);
    gt_store_u64le(b + 936, s->attributes.xfrm);
    gt_store_u64le(b + 944, s->attributemask.flags);
    gt_store_u64le(b + 952, s->attributemask.xfrm);
    memcpy(b + 960, s->enclavehash, 32);
    memcpy(b + 992, s->reserved3, 16);
    memcpy(b + 1008, s->isvextprodid, 16);
    b[1024] = (uint8_t)s->isvprodid;
    b[1025] = (uint8_t)(s->isvprodid >> 8);
    b[1026] = (uint8_t)s->isvsvn;
    b[1027] = (uint8_t)(s->isvsvn >> 8);
    memcpy(b + 1028, s->reserved4, 12);
    memcpy(b + 1040, s->q1, GT_SGX_KEY_BYTES);
    memcpy(b + 1424, s->q2, GT_SGX_KEY_BYTES);
    memcpy(s->header + 12, b + 12, 4);
}

// ---- DATE -----------------------------------------------------------------------------------

static bool bcd_ok(uint32_t v, unsigned digits, unsigned *out)
{
    unsigned n = 0;
    for (int i = (int)digits - 1; i >= 0; i--) {
        unsigned d = (v >> (4 * i)) & 0xf;
        if (d > 9) {
            return false;
        }
        n = n * 10 + d;
    }
    *out = n;
    return true;
}

gt_sgx_date_encoding gt_sgx_date_decode(uint32_t date, char *iso, size_t cap)
{
    unsigned y = 0, m = 0, d = 0;
    // BCD 0xYYYYMMDD: a zero date (the Linux selftest's) is BCD too.
    if (bcd_ok(date >> 16, 4, &y) && bcd_ok((date >> 8) & 0xff, 2, &m) &&
        bcd_ok(date & 0xff, 2, &d) && (date == 0 || (m >= 1 && m <= 12 && d >= 1 && d <= 31))) {
        snprintf(iso, cap, "%04u-%02u-%02u", y, m, d);
        return GT_SGX_DATE_BCD;
    }
    // Gramine until 2022: bytes year u16 | month u8 | day u8, i.e. 0xDDMMYYYY read as u32.
    y = date & 0xffff;
    m = (date >> 16) & 0xff;
    d = date >> 24;
    if (y >= 1970 && y <= 9999 && m >= 1 && m <= 12 && d >= 1 && d <= 31) {
        snprintf(iso, cap, "%04u-%02u-%02u", y, m, d);
        return GT_SGX_DATE_BINARY;
    }
    snprintf(iso, cap, "invalid");
    return GT_SGX_DATE_INVALID;
}

const char *gt_sgx_date_encoding_name(gt_sgx_date_encoding e)
{
    return e == GT_SGX_DATE_BCD ? "bcd" : e == GT_SGX_DATE_BINARY ? "binary" : "invalid";
}

// ---- checks ---------------------------------------------------------------------------------

gt_err gt_sgx_sigstruct_digest(const gt_sgx_sigstruct *s, uint8_t out[GT_SGX_HASH_BYTES])
{
    gt_hash_ctx *h = NULL;
    GT_TRY(gt_hash_new(&h, GT_HASH_SHA256));
    gt_err err = gt_hash_update(h, s->raw, SIGNED1_END);
    if (gt_is_ok(err)) {
        err = gt_hash_update(h, s->raw + SIGNED2_START, SIGNED2_END - SIGNED2_START);
    }
    if (gt_is_ok(err)) {
        err = gt_hash_final(h, out);
    }
    gt_hash_free(h);
    return err;
}

static bool zero_bytes(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc |= p[i];
    }
    return acc == 0;
}

// Compares little-endian a < b.
static bool le_less(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        if (a[i] != b[i]) {
            return a[i] < b[i];
        }
    }
    return false;
}

gt_err gt_sgx_sigstruct_verify(const gt_sgx_sigstruct *s, gt_sgx_sigstruct_checks *c)
{
    memset(c, 0, sizeof *c);
    c->header_ok = memcmp(s->raw, HEADER, sizeof HEADER) == 0 &&
                   (s->header_type == 0 || s->header_type == GT_SGX_HEADER_TYPE_DEBUG);
    c->header2_ok = memcmp(s->raw + 24, HEADER2, sizeof HEADER2) == 0;
    c->vendor_ok = s->vendor == 0 || s->vendor == GT_SGX_VENDOR_INTEL;
    c->exponent_ok = s->exponent == 3;
    c->modulus_ok = (s->modulus[GT_SGX_KEY_BYTES - 1] & 0x80) != 0;  // exactly 3072 bits
    c->signature_lt_modulus = le_less(s->signature, s->modulus, GT_SGX_KEY_BYTES);
    c->reserved_ok[0] = zero_bytes(s->reserved1, sizeof s->reserved1);
    c->reserved_ok[1] = zero_bytes(s->reserved2, sizeof s->reserved2);
    c->reserved_ok[2] = zero_bytes(s->reserved3, sizeof s->reserved3);
    c->reserved_ok[3] = zero_bytes(s->reserved4, sizeof s->reserved4);
    GT_TRY(gt_hash(GT_HASH_SHA256, c->mrsigner, s->modulus, sizeof s->modulus));
    GT_TRY(gt_sgx_sigstruct_digest(s, c->signed_digest));
    if (c->modulus_ok && c->signature_lt_modulus) {
        gt_err e = gt_rsa_le_verify_sha256(s->signature, s->modulus, GT_SGX_KEY_BYTES, 3,
                                           c->signed_digest);
        if (e.code != GT_E_NONE && e.code != GT_E_AUTH) {
            return e;
        }
        // The exponent field must say 3 too: the signature is checked with e = 3 regardless.
        c->signature_ok = e.code == GT_E_NONE;
        uint8_t q1[GT_SGX_KEY_BYTES], q2[GT_SGX_KEY_BYTES];
        GT_TRY(gt_rsa_le_q1q2(q1, q2, s->signature, s->modulus, GT_SGX_KEY_BYTES));
        c->q1_ok = gt_ct_equal(q1, s->q1, sizeof q1);
        c->q2_ok = gt_ct_equal(q2, s->q2, sizeof q2);
    }
    c->all_ok = c->header_ok && c->header2_ok && c->vendor_ok && c->exponent_ok &&
                c->modulus_ok && c->signature_lt_modulus && c->reserved_ok[0] &&
                c->reserved_ok[1] && c->reserved_ok[2] && c->reserved_ok[3] && c->signature_ok &&
                c->q1_ok && c->q2_ok;
    return GT_OK;
}

// ---- signing --------------------------------------------------------------------------------

static uint32_t bcd_date(int64_t now)
{
    time_t t = (time_t)now;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL) {
        return 0;
    }
    unsigned y = (unsigned)tm.tm_year + 1900, m = (unsigned)tm.tm_mon + 1, d = (unsigned)tm.tm_mday;
    uint32_t v = 0;
    unsigned digits[8] = {y / 1000 % 10, y / 100 % 10, y / 10 % 10, y % 10,
                          m / 10, m % 10, d / 10, d % 10};
    for (int i = 0; i < 8; i++) {
        v = (v << 4) | digits[i];
    }
    return v;
}

void gt_sgx_sign_params_default(gt_sgx_sign_params *p, int64_t now)
{
    memset(p, 0, sizeof *p);
    p->date = bcd_date(now);
    p->miscmask = 0xffffffffu;
    p->attributes.flags = GT_SGX_ATTR_MODE64BIT;
    p->attributes.xfrm = 0x3;
    p->attributemask.flags = ~0ull;
    p->attributemask.xfrm = 0xffffffffffffff1bull;
}

gt_err gt_sgx_sigstruct_sign(gt_sgx_sigstruct *s, const gt_sgx_sign_params *p, const gt_pkey *key)
{
    memset(s, 0, sizeof *s);
    uint64_t e = 0;
    unsigned bits = 0;
    GT_TRY(gt_pkey_rsa_public_le(key, s->modulus, sizeof s->modulus, &e, &bits));
    GT_ENSURE(bits == 3072 && e == 3, GT_E_ARG,
              "sign: SGX needs an RSA-3072 key with exponent 3, this one is %u bits with "
              "exponent %llu (make one: openssl genrsa -3 3072)", bits, (unsigned long long)e);
    GT_ENSURE(p->header_type == 0 || p->header_type == GT_SGX_HEADER_TYPE_DEBUG, GT_E_ARG,
              "sign: header type 0x%08x (0 or 0x80000000)", p->header_type);
    memcpy(s->header, HEADER, sizeof HEADER);
    s->header_type = p->header_type;
    s->vendor = p->vendor;
    s->date = p->date;
    memcpy(s->header2, HEADER2, sizeof HEADER2);
    s->swdefined = p->swdefined;
    s->exponent = 3;
    s->miscselect = p->miscselect;
    s->miscmask = p->miscmask;
    memcpy(s->isvfamilyid, p->isvfamilyid, 16);
    s->attributes = p->attributes;
    s->attributemask = p->attributemask;
    memcpy(s->enclavehash, p->enclavehash, GT_SGX_HASH_BYTES);
    memcpy(s->isvextprodid, p->isvextprodid, 16);
    s->isvprodid = p->isvprodid;
    s->isvsvn = p->isvsvn;
    gt_sgx_sigstruct_encode(s);
    uint8_t digest[GT_SGX_HASH_BYTES];
    GT_TRY(gt_sgx_sigstruct_digest(s, digest));
    GT_TRY(gt_pkey_rsa_sign_sha256_le(key, digest, s->signature, sizeof s->signature));
    GT_TRY(gt_rsa_le_q1q2(s->q1, s->q2, s->signature, s->modulus, GT_SGX_KEY_BYTES));
    gt_sgx_sigstruct_encode(s);
    return GT_OK;
}

// ---- JSON -----------------------------------------------------------------------------------

static gt_err add_hex(cJSON *o, const char *key, const void *p, size_t n)
{
    char hex[2 * GT_SGX_KEY_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, p, n);
    GT_ENSURE(cJSON_AddStringToObject(o, key, hex) != NULL, GT_E_NOMEM, "json: out of memory");
    return GT_OK;
}

static gt_err add_fmt(cJSON *o, const char *key, const char *fmt, unsigned long long v)
{
    char text[40];
    snprintf(text, sizeof text, fmt, v);
    GT_ENSURE(cJSON_AddStringToObject(o, key, text) != NULL, GT_E_NOMEM, "json: out of memory");
    return GT_OK;
}

static gt_err add_flag_names(cJSON *o, const char *key, uint64_t flags)
{
    cJSON *a = cJSON_AddArrayToObject(o, key);
    GT_ENSURE(a != NULL, GT_E_NOMEM, "json: out of memory");
    for (unsigned bit = 0; bit < 64; bit++) {
        if ((flags >> bit) & 1) {
            char other[16];
            const char *name = gt_sgx_attribute_name(bit);
            if (name == NULL) {
                snprintf(other, sizeof other, "BIT%u", bit);
                name = other;
            }
            GT_ENSURE(cJSON_AddItemToArray(a, cJSON_CreateString(name)), GT_E_NOMEM,
                      "json: out of memory");
        }
    }
    return GT_OK;
}

static gt_err add_attributes(cJSON *o, const char *key, const gt_sgx_attributes *a, bool names)
{
    uint8_t raw[16];
    gt_store_u64le(raw, a->flags);
    gt_store_u64le(raw + 8, a->xfrm);
    char k[48];
    GT_TRY(add_hex(o, key, raw, sizeof raw));
    snprintf(k, sizeof k, "%s_flags", key);
    GT_TRY(add_fmt(o, k, "0x%016llx", a->flags));
    if (names) {
        snprintf(k, sizeof k, "%s_flags_names", key);
        GT_TRY(add_flag_names(o, k, a->flags));
    }
    snprintf(k, sizeof k, "%s_xfrm", key);
    return add_fmt(o, k, "0x%016llx", a->xfrm);
}

// Bits of the little-endian modulus (3072 when its top bit is set).
static unsigned modulus_bits(const uint8_t n[GT_SGX_KEY_BYTES])
{
    for (size_t i = GT_SGX_KEY_BYTES; i-- > 0;) {
        for (int b = 7; b >= 0; b--) {
            if ((n[i] >> b) & 1) {
                return (unsigned)(8 * i) + (unsigned)b + 1;
            }
        }
    }
    return 0;
}

static gt_err sigstruct_fields(cJSON *o, const gt_sgx_sigstruct *s,
                               const gt_sgx_sigstruct_checks *c, size_t offset)
{
    char iso[16];
    gt_sgx_date_encoding enc = gt_sgx_date_decode(s->date, iso, sizeof iso);
    bool ok = true;
    GT_TRY(add_hex(o, "mrenclave", s->enclavehash, sizeof s->enclavehash));
    GT_TRY(add_hex(o, "mrsigner", c->mrsigner, sizeof c->mrsigner));
    ok &= cJSON_AddNumberToObject(o, "isvprodid", s->isvprodid) != NULL;
    ok &= cJSON_AddNumberToObject(o, "isvsvn", s->isvsvn) != NULL;
    GT_TRY(add_fmt(o, "vendor", "0x%04llx", s->vendor));
    ok &= cJSON_AddStringToObject(o, "vendor_name", s->vendor == GT_SGX_VENDOR_INTEL ? "Intel"
                                  : s->vendor == 0 ? "non-Intel" : "invalid") != NULL;
    GT_TRY(add_fmt(o, "date", "0x%08llx", s->date));
    ok &= cJSON_AddStringToObject(o, "date_iso", iso) != NULL;
    ok &= cJSON_AddStringToObject(o, "date_encoding", gt_sgx_date_encoding_name(enc)) != NULL;
    GT_TRY(add_hex(o, "header", s->header, sizeof s->header));
    GT_TRY(add_fmt(o, "header_type", "0x%08llx", s->header_type));
    ok &= cJSON_AddStringToObject(o, "header_type_name",
                                  s->header_type == 0 ? "production"
                                  : s->header_type == GT_SGX_HEADER_TYPE_DEBUG ? "debug"
                                                                               : "invalid") != NULL;
    GT_TRY(add_hex(o, "header2", s->header2, sizeof s->header2));
    GT_TRY(add_fmt(o, "swdefined", "0x%08llx", s->swdefined));
    GT_TRY(add_fmt(o, "miscselect", "0x%08llx", s->miscselect));
    GT_TRY(add_fmt(o, "miscmask", "0x%08llx", s->miscmask));
    GT_TRY(add_attributes(o, "attributes", &s->attributes, true));
    GT_TRY(add_attributes(o, "attributemask", &s->attributemask, false));
    GT_TRY(add_hex(o, "isvfamilyid", s->isvfamilyid, sizeof s->isvfamilyid));
    GT_TRY(add_hex(o, "isvextprodid", s->isvextprodid, sizeof s->isvextprodid));
    GT_TRY(add_fmt(o, "cet_attributes", "0x%02llx", s->cet_attributes));
    GT_TRY(add_fmt(o, "cet_attributes_mask", "0x%02llx", s->cet_attributes_mask));
    ok &= cJSON_AddNumberToObject(o, "exponent", s->exponent) != NULL;
    ok &= cJSON_AddNumberToObject(o, "modulus_bits", modulus_bits(s->modulus)) != NULL;
    GT_TRY(add_hex(o, "modulus_le", s->modulus, sizeof s->modulus));
    GT_TRY(add_hex(o, "signature_le", s->signature, sizeof s->signature));
    GT_TRY(add_hex(o, "signed_data_sha256", c->signed_digest, sizeof c->signed_digest));
    ok &= cJSON_AddBoolToObject(o, "rsa_signature_ok", c->signature_ok) != NULL;
    ok &= cJSON_AddBoolToObject(o, "q1_ok", c->q1_ok) != NULL;
    ok &= cJSON_AddBoolToObject(o, "q2_ok", c->q2_ok) != NULL;
    ok &= cJSON_AddBoolToObject(o, "signature_valid", c->all_ok) != NULL;
    ok &= cJSON_AddBoolToObject(o, "q1_q2_valid", c->q1_ok && c->q2_ok) != NULL;
    ok &= cJSON_AddNumberToObject(o, "sigstruct_offset", (double)offset) != NULL;
    GT_ENSURE(ok, GT_E_NOMEM, "json: out of memory");
    return GT_OK;
}

static gt_err checks_array(cJSON *o, const gt_sgx_sigstruct_checks *c)
{
    static const char *const names[] = {
        "HEADER", "HEADER2", "VENDOR is 0 or 0x8086", "EXPONENT == 3", "modulus is 3072 bits",
        "signature < modulus", "reserved1 all zero", "reserved2 all zero",
        "reserved3 all zero", "reserved4 all zero",
        "RSA-3072 e=3 PKCS#1 v1.5 SHA-256 over [0,128)||[900,1028)", "Q1 == floor(S^2 / N)",
        "Q2 == floor((S^3 - Q1*S*N) / N)"};
    const bool oks[] = {c->header_ok, c->header2_ok, c->vendor_ok, c->exponent_ok, c->modulus_ok,
                        c->signature_lt_modulus, c->reserved_ok[0], c->reserved_ok[1],
                        c->reserved_ok[2], c->reserved_ok[3], c->signature_ok, c->q1_ok,
                        c->q2_ok};
    cJSON *a = cJSON_AddArrayToObject(o, "checks");
    GT_ENSURE(a != NULL, GT_E_NOMEM, "json: out of memory");
    for (size_t i = 0; i < sizeof oks / sizeof oks[0]; i++) {
        cJSON *e = cJSON_CreateObject();
        GT_ENSURE(e != NULL && cJSON_AddItemToArray(a, e), GT_E_NOMEM, "json: out of memory");
        GT_ENSURE(cJSON_AddStringToObject(e, "check", names[i]) != NULL &&
                      cJSON_AddBoolToObject(e, "ok", oks[i]) != NULL,
                  GT_E_NOMEM, "json: out of memory");
    }
    GT_ENSURE(cJSON_AddBoolToObject(o, "all_ok", c->all_ok) != NULL, GT_E_NOMEM,
              "json: out of memory");
    return GT_OK;
}

gt_err gt_sgx_sigstruct_json(const gt_sgx_sigstruct *s, const gt_sgx_sigstruct_checks *c,
                             size_t offset, cJSON **out)
{
    *out = cJSON_CreateObject();
    GT_ENSURE(*out != NULL, GT_E_NOMEM, "json: out of memory");
    gt_err err = sigstruct_fields(*out, s, c, offset);
    if (gt_is_ok(err)) {
        err = checks_array(*out, c);
    }
    if (!gt_is_ok(err)) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return err;
}

gt_err gt_sgx_measurement_json(const gt_sgx_measurement *m, cJSON **out)
{
    cJSON *o = cJSON_CreateObject(), *ec = NULL, *pt = NULL, *pr = NULL;
    bool ok = o != NULL;
    char hex[2 * GT_SGX_HASH_BYTES + 1], size[24];
    gt_hex_encode(hex, sizeof hex, m->mrenclave, sizeof m->mrenclave);
    snprintf(size, sizeof size, "0x%llx", (unsigned long long)m->size);
    ok = ok && cJSON_AddStringToObject(o, "mrenclave", hex) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "records", (double)m->records) != NULL;
    ok = ok && (ec = cJSON_AddObjectToObject(o, "ecreate")) != NULL;
    ok = ok && cJSON_AddNumberToObject(ec, "ssaframesize", m->ssaframesize) != NULL;
    ok = ok && cJSON_AddStringToObject(ec, "size", size) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "eadd_pages", (double)m->eadd_pages) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "eextend_chunks", (double)m->eextend_chunks) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "unmeasured_chunks", (double)m->unmeasured_chunks);
    ok = ok && (pt = cJSON_AddObjectToObject(o, "page_types")) != NULL;
    for (unsigned t = 0; ok && t < GT_SGX_PT_COUNT_; t++) {
        if (m->page_types[t] > 0) {
            ok = cJSON_AddNumberToObject(pt, gt_sgx_page_type_name(t), (double)m->page_types[t]);
        }
    }
    if (ok && m->page_types_other > 0) {
        ok = cJSON_AddNumberToObject(pt, "other", (double)m->page_types_other) != NULL;
    }
    ok = ok && (pr = cJSON_AddArrayToObject(o, "problems")) != NULL;
    for (uint32_t i = 0; ok && i < m->problem_count && i < GT_SGX_PROBLEMS_KEPT; i++) {
        ok = cJSON_AddItemToArray(pr, cJSON_CreateString(m->problems[i]));
    }
    if (ok && m->problem_count > GT_SGX_PROBLEMS_KEPT) {
        char more[48];
        snprintf(more, sizeof more, "... %u problems in all", m->problem_count);
        ok = cJSON_AddItemToArray(pr, cJSON_CreateString(more));
    }
    if (!ok) {
        cJSON_Delete(o);
        *out = NULL;
        return gt_errf(GT_E_NOMEM, "json: out of memory");
    }
    *out = o;
    return GT_OK;
}
