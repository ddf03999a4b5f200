// NVIDIA Hopper SPDM GET_MEASUREMENTS evidence: parser, opaque-data decoding, claims.
// Reads in message order (DSP0274 1.1 §10.11) through one gt_reader.
#include "nvgpu_evidence.h"

#include <stdio.h>
#include <string.h>

static const struct {
    uint16_t type;
    const char *name;
} opaque_names[] = {
    {GT_NVGPU_OPAQUE_CERT_ISSUER_NAME, "CERT_ISSUER_NAME"},
    {GT_NVGPU_OPAQUE_CERT_AUTHORITY_KEY_IDENTIFIER, "CERT_AUTHORITY_KEY_IDENTIFIER"},
    {GT_NVGPU_OPAQUE_DRIVER_VERSION, "DRIVER_VERSION"},
    {GT_NVGPU_OPAQUE_GPU_INFO, "GPU_INFO"},
    {GT_NVGPU_OPAQUE_SKU, "SKU"},
    {GT_NVGPU_OPAQUE_VBIOS_VERSION, "VBIOS_VERSION"},
    {GT_NVGPU_OPAQUE_MANUFACTURER_ID, "MANUFACTURER_ID"},
    {GT_NVGPU_OPAQUE_TAMPER_DETECTION, "TAMPER_DETECTION"},
    {GT_NVGPU_OPAQUE_SMC, "SMC"},
    {GT_NVGPU_OPAQUE_VPR, "VPR"},
    {GT_NVGPU_OPAQUE_NVDEC0_STATUS, "NVDEC0_STATUS"},
    {GT_NVGPU_OPAQUE_MSRSCNT, "MSRSCNT"},
    {GT_NVGPU_OPAQUE_CPRINFO, "CPRINFO"},
    {GT_NVGPU_OPAQUE_BOARD_ID, "BOARD_ID"},
    {GT_NVGPU_OPAQUE_CHIP_SKU, "CHIP_SKU"},
    {GT_NVGPU_OPAQUE_CHIP_SKU_MOD, "CHIP_SKU_MOD"},
    {GT_NVGPU_OPAQUE_PROJECT, "PROJECT"},
    {GT_NVGPU_OPAQUE_PROJECT_SKU, "PROJECT_SKU"},
    {GT_NVGPU_OPAQUE_PROJECT_SKU_MOD, "PROJECT_SKU_MOD"},
    {GT_NVGPU_OPAQUE_FWID, "FWID"},
    {GT_NVGPU_OPAQUE_PROTECTED_PCIE_STATUS, "PROTECTED_PCIE_STATUS"},
    {GT_NVGPU_OPAQUE_SWITCH_PDI, "SWITCH_PDI"},
    {GT_NVGPU_OPAQUE_FLOORSWEPT_PORTS, "FLOORSWEPT_PORTS"},
    {GT_NVGPU_OPAQUE_POSITION_ID, "POSITION_ID"},
    {GT_NVGPU_OPAQUE_LOCK_SWITCH_STATUS, "LOCK_SWITCH_STATUS"},
    {GT_NVGPU_OPAQUE_GPU_LINK_CONN, "GPU_LINK_CONN"},
    {GT_NVGPU_OPAQUE_SYS_ENABLE_STATUS, "SYS_ENABLE_STATUS"},
    {GT_NVGPU_OPAQUE_OPAQUE_DATA_VERSION, "OPAQUE_DATA_VERSION"},
    {GT_NVGPU_OPAQUE_CHIP_INFO, "CHIP_INFO"},
    {GT_NVGPU_OPAQUE_FEATURE_FLAG, "FEATURE_FLAG"},
};

const char *gt_nvgpu_opaque_type_name(uint16_t type)
{
    for (size_t i = 0; i < sizeof opaque_names / sizeof opaque_names[0]; i++) {
        if (opaque_names[i].type == type) {
            return opaque_names[i].name;
        }
    }
    return NULL;
}

static gt_err read_u24le(gt_reader *r, uint32_t *v)
{
    uint8_t b[3] = {0};
    GT_TRY(gt_reader_bytes(r, b, sizeof b));
    *v = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16);
    return GT_OK;
}

static gt_err parse_request(gt_nvgpu_evidence *ev, gt_reader *r)
{
    GT_TRY(gt_reader_u8(r, &ev->req_version));
    GT_TRY(gt_reader_u8(r, &ev->req_code));
    GT_TRY(gt_reader_u8(r, &ev->req_param1));
    GT_TRY(gt_reader_u8(r, &ev->req_param2));
    GT_ENSURE(ev->req_version == 0x10 || ev->req_version == 0x11, GT_E_UNSUPPORTED,
              "request: SPDM version 0x%02x (expected 0x10 or 0x11)", ev->req_version);
    GT_ENSURE(ev->req_code == GT_NVGPU_SPDM_GET_MEASUREMENTS, GT_E_FORMAT,
              "request: code 0x%02x (expected GET_MEASUREMENTS 0xe0)", ev->req_code);
    GT_ENSURE(ev->req_param1 & 1u, GT_E_UNSUPPORTED, "request: no signature requested");
    GT_TRY(gt_reader_bytes(r, ev->nonce, sizeof ev->nonce));
    if (ev->req_version >= 0x11) {
        GT_TRY(gt_reader_u8(r, &ev->req_slot));
    }
    return GT_OK;
}

static gt_err parse_block(gt_nvgpu_measurement *m, gt_reader *rec)
{
    uint16_t size = 0, vsize = 0;
    GT_TRY(gt_reader_u8(rec, &m->index));
    GT_TRY(gt_reader_u8(rec, &m->spec));
    GT_TRY(gt_reader_u16le(rec, &size));
    GT_ENSURE(m->index >= 1 && m->index <= 0xfe, GT_E_FORMAT, "measurement index %u reserved",
              m->index);
    gt_reader blk = {0};
    GT_TRY(gt_reader_sub(rec, size, &blk));
    GT_ENSURE(m->spec == 1, GT_E_UNSUPPORTED, "measurement %u: specification 0x%02x (DMTF only)",
              m->index, m->spec);
    GT_TRY(gt_reader_u8(&blk, &m->value_type));
    GT_TRY(gt_reader_u16le(&blk, &vsize));
    GT_TRY(gt_reader_span(&blk, vsize, &m->value));
    GT_TRY(gt_reader_expect_end(&blk, "measurement block"));
    return GT_OK;
}

static gt_err parse_record(gt_nvgpu_evidence *ev, gt_reader *rec)
{
    for (size_t i = 0; i < ev->number_of_blocks; i++) {
        gt_nvgpu_measurement *m = &ev->measurements[i];
        GT_TRY(gt_err_wrap(parse_block(m, rec), "measurement block %zu", i));
        for (size_t j = 0; j < i; j++) {
            GT_ENSURE(ev->measurements[j].index != m->index, GT_E_FORMAT,
                      "measurement index %u appears twice", m->index);
        }
        ev->measurement_count = i + 1;
    }
    GT_TRY(gt_reader_expect_end(rec, "measurement record"));
    return GT_OK;
}

static gt_err parse_opaque(gt_nvgpu_evidence *ev, gt_reader *od)
{
    while (gt_reader_left(od) > 0) {
        GT_ENSURE(ev->opaque_count < GT_NVGPU_MAX_OPAQUE_FIELDS, GT_E_LIMIT,
                  "opaque data: more than %d fields", GT_NVGPU_MAX_OPAQUE_FIELDS);
        gt_nvgpu_opaque_field *f = &ev->opaque[ev->opaque_count];
        uint16_t flen = 0;
        GT_TRY(gt_reader_u16le(od, &f->type));
        GT_TRY(gt_reader_u16le(od, &flen));
        GT_TRY(gt_err_wrap(gt_reader_span(od, flen, &f->value), "opaque field type %u", f->type));
        for (size_t j = 0; j < ev->opaque_count; j++) {
            GT_ENSURE(ev->opaque[j].type != f->type, GT_E_FORMAT,
                      "opaque data: field type %u appears twice", f->type);
        }
        ev->opaque_count++;
    }
    return GT_OK;
}

static gt_err parse_response(gt_nvgpu_evidence *ev, gt_reader *r)
{
    GT_TRY(gt_reader_u8(r, &ev->resp_version));
    GT_TRY(gt_reader_u8(r, &ev->resp_code));
    GT_TRY(gt_reader_u8(r, &ev->resp_param1));
    GT_TRY(gt_reader_u8(r, &ev->resp_param2));
    GT_ENSURE(ev->resp_code == GT_NVGPU_SPDM_MEASUREMENTS, GT_E_FORMAT,
              "response: code 0x%02x (expected MEASUREMENTS 0x60)", ev->resp_code);
    GT_ENSURE(ev->resp_version == ev->req_version, GT_E_FORMAT,
              "response: SPDM version 0x%02x != request 0x%02x", ev->resp_version,
              ev->req_version);
    GT_TRY(gt_reader_u8(r, &ev->number_of_blocks));
    GT_TRY(read_u24le(r, &ev->record_len));
    gt_reader rec = {0};
    GT_TRY(gt_err_wrap(gt_reader_sub(r, ev->record_len, &rec), "measurement record"));
    GT_TRY(parse_record(ev, &rec));
    GT_TRY(gt_reader_bytes(r, ev->resp_nonce, sizeof ev->resp_nonce));
    GT_TRY(gt_reader_u16le(r, &ev->opaque_len));
    gt_reader od = {0};
    GT_TRY(gt_err_wrap(gt_reader_sub(r, ev->opaque_len, &od), "opaque data"));
    GT_TRY(parse_opaque(ev, &od));
    return GT_OK;
}

gt_err gt_nvgpu_evidence_parse(gt_nvgpu_evidence *ev, const uint8_t *data, size_t len)
{
    memset(ev, 0, sizeof *ev);
    gt_reader r = gt_reader_init(data, len);
    gt_err err = parse_request(ev, &r);
    if (err.code == GT_E_NONE) {
        err = gt_err_wrap(parse_response(ev, &r), "response");
    } else {
        err = gt_err_wrap(err, "request");
    }
    if (err.code == GT_E_NONE) {
        // Everything read so far is signed: borrow exactly those bytes.
        gt_reader whole = gt_reader_init(data, len);
        err = gt_reader_span(&whole, r.pos, &ev->signed_region);
    }
    if (err.code == GT_E_NONE) {
        err = gt_err_wrap(gt_reader_bytes(&r, ev->signature, sizeof ev->signature), "signature");
    }
    if (err.code != GT_E_NONE) {
        memset(ev, 0, sizeof *ev);
        return gt_err_wrap(err, "nvgpu evidence");
    }
    ev->total_len = len;
    ev->trailing_bytes = gt_reader_left(&r);
    return GT_OK;
}

gt_err gt_nvgpu_measurement_find(const gt_nvgpu_evidence *ev, uint8_t index,
                                 const gt_nvgpu_measurement **out)
{
    for (size_t i = 0; i < ev->measurement_count; i++) {
        if (ev->measurements[i].index == index) {
            *out = &ev->measurements[i];
            return GT_OK;
        }
    }
    return gt_errf(GT_E_NOTFOUND, "nvgpu evidence: no measurement %u", index);
}

gt_err gt_nvgpu_opaque_find(const gt_nvgpu_evidence *ev, uint16_t type, gt_span *value)
{
    for (size_t i = 0; i < ev->opaque_count; i++) {
        if (ev->opaque[i].type == type) {
            *value = ev->opaque[i].value;
            return GT_OK;
        }
    }
    const char *name = gt_nvgpu_opaque_type_name(type);
    return gt_errf(GT_E_NOTFOUND, "nvgpu evidence: no opaque %s", name ? name : "field");
}

// A NUL-padded ASCII string: printable bytes up to the first NUL, only NULs after it.
static gt_err opaque_string(gt_span v, char *out, size_t cap)
{
    size_t n = 0;
    while (n < v.len && v.data[n] != 0) {
        GT_ENSURE(v.data[n] >= 0x20 && v.data[n] < 0x7f, GT_E_FORMAT,
                  "opaque string: byte 0x%02x not printable", v.data[n]);
        n++;
    }
    for (size_t i = n; i < v.len; i++) {
        GT_ENSURE(v.data[i] == 0, GT_E_FORMAT, "opaque string: data after NUL");
    }
    GT_ENSURE(n < cap, GT_E_LIMIT, "opaque string: %zu bytes do not fit", n);
    memcpy(out, v.data, n);
    out[n] = '\0';
    return GT_OK;
}

gt_err gt_nvgpu_driver_version(const gt_nvgpu_evidence *ev, char *out, size_t cap)
{
    gt_span v = {0};
    GT_TRY(gt_nvgpu_opaque_find(ev, GT_NVGPU_OPAQUE_DRIVER_VERSION, &v));
    return gt_err_wrap(opaque_string(v, out, cap), "DRIVER_VERSION");
}

// VBIOS_VERSION is 8 bytes: a little-endian u32 printed as four dotted bytes, most significant
// first, then the OEM byte (byte 4): 00 9f 00 96 01 .. -> "96.00.9f.00.01".
static gt_err format_vbios(gt_span v, char *out, size_t cap)
{
    GT_ENSURE(v.len >= 5, GT_E_FORMAT, "VBIOS_VERSION: %zu bytes (expected 8)", v.len);
    GT_ENSURE(cap >= 15, GT_E_LIMIT, "VBIOS_VERSION: buffer too small");
    snprintf(out, cap, "%02x.%02x.%02x.%02x.%02x", v.data[3], v.data[2], v.data[1], v.data[0],
             v.data[4]);
    return GT_OK;
}

gt_err gt_nvgpu_vbios_version(const gt_nvgpu_evidence *ev, char *out, size_t cap)
{
    gt_span v = {0};
    GT_TRY(gt_nvgpu_opaque_find(ev, GT_NVGPU_OPAQUE_VBIOS_VERSION, &v));
    return format_vbios(v, out, cap);
}

gt_err gt_nvgpu_evidence_verify_signature(const gt_nvgpu_evidence *ev, const uint8_t *pub_xy,
                                          size_t pub_len)
{
    GT_ENSURE(ev->signed_region.data != NULL, GT_E_ARG, "nvgpu evidence: not parsed");
    gt_err err = gt_ecdsa_verify_raw(GT_EC_P384, GT_HASH_SHA384, ev->signature,
                                     sizeof ev->signature, ev->signed_region.data,
                                     ev->signed_region.len, pub_xy, pub_len);
    if (err.code == GT_E_AUTH) {
        return gt_errf(GT_E_AUTH, "nvgpu evidence: SPDM signature does not verify");
    }
    return err;
}

// ---- claims ---------------------------------------------------------------------------------

static bool add_hex(cJSON *obj, const char *name, const uint8_t *p, size_t n)
{
    char *hex = cJSON_malloc(2 * n + 1);
    if (hex == NULL) {
        return false;
    }
    gt_hex_encode(hex, 2 * n + 1, p, n);
    bool ok = cJSON_AddStringToObject(obj, name, hex) != NULL;
    cJSON_free(hex);
    return ok;
}

static bool add_byte_hex(cJSON *obj, const char *name, uint8_t v)
{
    char s[8];
    snprintf(s, sizeof s, "0x%02x", v);
    return cJSON_AddStringToObject(obj, name, s) != NULL;
}

static bool add_opaque(cJSON *o, const gt_nvgpu_opaque_field *f)
{
    char namebuf[16];
    const char *name = gt_nvgpu_opaque_type_name(f->type);
    if (name == NULL) {
        snprintf(namebuf, sizeof namebuf, "TYPE_%u", f->type);
        name = namebuf;
    }
    char s[256];
    switch (f->type) {
    case GT_NVGPU_OPAQUE_DRIVER_VERSION:
    case GT_NVGPU_OPAQUE_CHIP_SKU:
    case GT_NVGPU_OPAQUE_CHIP_SKU_MOD:
    case GT_NVGPU_OPAQUE_PROJECT:
    case GT_NVGPU_OPAQUE_PROJECT_SKU:
        if (opaque_string(f->value, s, sizeof s).code == GT_E_NONE) {
            return cJSON_AddStringToObject(o, name, s) != NULL;
        }
        break;  // not a clean string: hex below
    case GT_NVGPU_OPAQUE_VBIOS_VERSION:
        if (format_vbios(f->value, s, sizeof s).code == GT_E_NONE) {
            return cJSON_AddStringToObject(o, name, s) != NULL;
        }
        break;
    case GT_NVGPU_OPAQUE_MSRSCNT:
        if (f->value.len % 4 == 0) {
            cJSON *a = cJSON_AddArrayToObject(o, name);
            if (a == NULL) {
                return false;
            }
            gt_reader r = gt_reader_init(f->value.data, f->value.len);
            while (gt_reader_left(&r) >= 4) {
                uint32_t c = 0;
                cJSON *n = NULL;
                if (gt_reader_u32le(&r, &c).code != GT_E_NONE ||
                    (n = cJSON_CreateNumber(c)) == NULL) {
                    return false;
                }
                cJSON_AddItemToArray(a, n);
            }
            return true;
        }
        break;
    default:
        break;
    }
    return add_hex(o, name, f->value.data, f->value.len);
}

gt_err gt_nvgpu_evidence_claims_json(const gt_nvgpu_evidence *ev, cJSON *obj)
{
    cJSON *req = NULL, *resp = NULL, *meas = NULL, *op = NULL;
    bool ok = cJSON_AddNumberToObject(obj, "total_size", (double)ev->total_len) &&
              (req = cJSON_AddObjectToObject(obj, "request")) != NULL &&
              add_byte_hex(req, "spdm_version", ev->req_version) &&
              add_byte_hex(req, "code", ev->req_code) &&
              add_byte_hex(req, "param1", ev->req_param1) &&
              add_byte_hex(req, "param2", ev->req_param2) &&
              add_hex(req, "nonce", ev->nonce, sizeof ev->nonce) &&
              cJSON_AddNumberToObject(req, "slot_id", ev->req_slot) &&
              (resp = cJSON_AddObjectToObject(obj, "response")) != NULL &&
              add_byte_hex(resp, "spdm_version", ev->resp_version) &&
              add_byte_hex(resp, "code", ev->resp_code) &&
              cJSON_AddNumberToObject(resp, "param1", ev->resp_param1) &&
              cJSON_AddNumberToObject(resp, "param2_slot", ev->resp_param2 & 0x0f) &&
              cJSON_AddNumberToObject(resp, "number_of_blocks", ev->number_of_blocks) &&
              cJSON_AddNumberToObject(resp, "measurement_record_length", ev->record_len) &&
              cJSON_AddNumberToObject(obj, "measurement_blocks", (double)ev->measurement_count) &&
              (meas = cJSON_AddObjectToObject(obj, "measurements")) != NULL;
    for (size_t i = 0; ok && i < ev->measurement_count; i++) {
        char idx[8];
        snprintf(idx, sizeof idx, "%u", ev->measurements[i].index);
        ok = add_hex(meas, idx, ev->measurements[i].value.data, ev->measurements[i].value.len);
    }
    ok = ok && add_hex(obj, "response_nonce", ev->resp_nonce, sizeof ev->resp_nonce) &&
         cJSON_AddNumberToObject(obj, "opaque_data_length", ev->opaque_len) &&
         (op = cJSON_AddObjectToObject(obj, "opaque_fields")) != NULL;
    for (size_t i = 0; ok && i < ev->opaque_count; i++) {
        ok = add_opaque(op, &ev->opaque[i]);
    }
    ok = ok && cJSON_AddNumberToObject(obj, "signature_len", GT_NVGPU_SIG_BYTES) &&
         cJSON_AddNumberToObject(obj, "trailing_bytes", (double)ev->trailing_bytes) &&
         add_hex(obj, "signature_rs_be", ev->signature, sizeof ev->signature);
    GT_ENSURE(ok, GT_E_NOMEM, "nvgpu evidence: cannot build claims JSON");
    return GT_OK;
}
