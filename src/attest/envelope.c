// attest/envelope.c: evidence as bytes. Type detection of the native formats, the GTEV
// envelope, evidence files, and the report_data binding. Calls no verifier, so every verifier
// (and the vsgx one, which reads the host evidence nested in its quote) may call it.
#include "claims.h"
#include "sim_report.h"

// Format headers for their header sizes only: detection reads no further.
#include "intel_quote.h"
#include "nvgpu_evidence.h"
#include "snp_report.h"

#include <string.h>

// ---- detection -----------------------------------------------------------------------------------
// Each native format is recognised by its own header; detect_as returns GT_OK when the bytes look
// like `type`, and otherwise an error that says why not (used verbatim when --type was given).

// Envelope: "GTEV" | u16le envelope version | u16le type | u32le body len | body |
//           u32le aux len | aux  (exactly; nothing after)
#define GT_EVIDENCE_MAGIC "GTEV"
#define GT_EVIDENCE_ENVELOPE_VERSION 1

static gt_err detect_intel(const uint8_t *data, size_t len, gt_tee_type type, uint32_t *version)
{
    const char *name = gt_tee_type_name(type);
    gt_reader r = gt_reader_init(data, len);
    uint16_t ver = 0, akt = 0;
    uint32_t tee = 0;
    GT_ENSURE(len >= GT_INTEL_HEADER_BYTES, GT_E_TRUNCATED,
              "%s quote: %zu bytes, shorter than the 48-byte header", name, len);
    GT_TRY(gt_reader_u16le(&r, &ver));
    GT_TRY(gt_reader_u16le(&r, &akt));
    GT_TRY(gt_reader_u32le(&r, &tee));
    GT_ENSURE(ver >= 3 && ver <= 5, GT_E_UNSUPPORTED, "%s quote: version %u (expected 3, 4 or 5)",
              name, ver);
    GT_ENSURE(akt == 2 || akt == 3, GT_E_FORMAT,
              "%s quote: attestation key type %u (expected 2 = ECDSA P-256)", name, akt);
    uint32_t want = type == GT_TEE_TDX ? 0x81u : 0x0u;
    GT_ENSURE(tee == want, GT_E_FORMAT, "%s quote: TEE type 0x%08x (expected 0x%08x)", name, tee,
              want);
    GT_ENSURE(!(type == GT_TEE_TDX && ver == 3), GT_E_UNSUPPORTED,
              "tdx quote: version 3 carries SGX reports only");
    *version = ver;
    return GT_OK;
}

static gt_err detect_snp(const uint8_t *data, size_t len, uint32_t *version)
{
    gt_reader r = gt_reader_init(data, len);
    uint32_t ver = 0, algo = 0;
    GT_TRY(gt_reader_u32le(&r, &ver));
    GT_ENSURE(ver >= 2 && ver <= 5, GT_E_UNSUPPORTED, "snp report: version %u (expected 2..5)",
              ver);
    GT_ENSURE(len >= GT_SNP_REPORT_BYTES, GT_E_TRUNCATED, "snp report: %zu bytes (expected %u)",
              len, GT_SNP_REPORT_BYTES);
    GT_TRY(gt_reader_skip(&r, 0x34 - 4));
    GT_TRY(gt_reader_u32le(&r, &algo));
    GT_ENSURE(algo == 1, GT_E_FORMAT,
              "snp report: signature algorithm %u (expected 1 = ECDSA P-384 with SHA-384)", algo);
    *version = ver;
    return GT_OK;
}

static gt_err detect_nvgpu(const uint8_t *data, size_t len, uint32_t *version)
{
    GT_ENSURE(len >= 2, GT_E_TRUNCATED, "nvgpu evidence: %zu bytes", len);
    GT_ENSURE(data[0] >= 0x10 && data[0] <= 0x13, GT_E_UNSUPPORTED,
              "nvgpu evidence: SPDM version byte 0x%02x (expected 0x10..0x13)", data[0]);
    GT_ENSURE(data[1] == GT_NVGPU_SPDM_GET_MEASUREMENTS, GT_E_FORMAT,
              "nvgpu evidence: SPDM request code 0x%02x (expected 0xe0 GET_MEASUREMENTS)",
              data[1]);
    *version = data[0];
    return GT_OK;
}

static gt_err detect_sim_body(const uint8_t *data, size_t len, uint32_t *version)
{
    gt_reader r = gt_reader_init(data, len);
    uint16_t ver = 0;
    GT_TRY(gt_reader_u16le(&r, &ver));
    GT_ENSURE(ver == GT_SIM_REPORT_VERSION, GT_E_UNSUPPORTED,
              "sim evidence: version %u (expected %u)", ver, GT_SIM_REPORT_VERSION);
    *version = ver;
    return GT_OK;
}

static gt_err detect_as(const uint8_t *data, size_t len, gt_tee_type type, uint32_t *version)
{
    switch (type) {
    case GT_TEE_TDX:
    case GT_TEE_SGX:
        return detect_intel(data, len, type, version);
    case GT_TEE_SNP:
        return detect_snp(data, len, version);
    case GT_TEE_NVGPU:
        return detect_nvgpu(data, len, version);
    case GT_TEE_VSGX:  // an SGX quote v3 (its certification data is checked by the verifier)
        GT_TRY(detect_intel(data, len, GT_TEE_SGX, version));
        GT_ENSURE(*version == 3, GT_E_UNSUPPORTED, "vsgx quote: version %u (expected 3)",
                  *version);
        return GT_OK;
    case GT_TEE_SIM:
        return gt_errf(GT_E_FORMAT, "sim evidence: no GTEV envelope");
    case GT_TEE_AUTO:
    default:
        return gt_errf(GT_E_ARG, "detect: no type");
    }
}

typedef struct {
    gt_tee_type type;
    uint32_t version;
    bool enveloped;
    gt_span body;
    gt_span aux;
} parsed_evidence;

static gt_err parse_envelope(const uint8_t *data, size_t len, parsed_evidence *pe)
{
    gt_reader r = gt_reader_init(data, len);
    uint8_t magic[4] = {0};
    uint16_t ver = 0, tag = 0;
    uint32_t body_len = 0, aux_len = 0;
    GT_TRY(gt_reader_bytes(&r, magic, sizeof magic));
    GT_ENSURE(memcmp(magic, GT_EVIDENCE_MAGIC, 4) == 0, GT_E_FORMAT, "evidence: not a GTEV file");
    GT_TRY(gt_err_wrap(gt_reader_u16le(&r, &ver), "evidence envelope"));
    GT_ENSURE(ver == GT_EVIDENCE_ENVELOPE_VERSION, GT_E_UNSUPPORTED,
              "evidence envelope: version %u (expected %u)", ver, GT_EVIDENCE_ENVELOPE_VERSION);
    GT_TRY(gt_err_wrap(gt_reader_u16le(&r, &tag), "evidence envelope"));
    GT_ENSURE(tag >= GT_TEE_SIM && tag <= GT_TEE_TYPE_MAX, GT_E_FORMAT,
              "evidence envelope: unknown type tag %u", tag);
    GT_TRY(gt_err_wrap(gt_reader_u32le(&r, &body_len), "evidence envelope"));
    GT_ENSURE(body_len <= GT_EVIDENCE_MAX_BYTES, GT_E_LIMIT,
              "evidence envelope: body of %u bytes is too large", body_len);
    GT_TRY(gt_err_wrap(gt_reader_span(&r, body_len, &pe->body), "evidence envelope: body"));
    GT_TRY(gt_err_wrap(gt_reader_u32le(&r, &aux_len), "evidence envelope"));
    GT_ENSURE(aux_len <= GT_EVIDENCE_MAX_BYTES, GT_E_LIMIT,
              "evidence envelope: aux of %u bytes is too large", aux_len);
    GT_TRY(gt_err_wrap(gt_reader_span(&r, aux_len, &pe->aux), "evidence envelope: aux"));
    GT_TRY(gt_reader_expect_end(&r, "evidence envelope"));
    pe->type = (gt_tee_type)tag;
    pe->enveloped = true;
    if (pe->type == GT_TEE_SIM) {
        return detect_sim_body(pe->body.data, pe->body.len, &pe->version);
    }
    return gt_err_wrap(detect_as(pe->body.data, pe->body.len, pe->type, &pe->version),
                       "evidence envelope (type %s)", gt_tee_type_name(pe->type));
}

static gt_err parse_any(const uint8_t *data, size_t len, gt_tee_type expect, parsed_evidence *pe)
{
    memset(pe, 0, sizeof *pe);
    GT_ENSURE((unsigned)expect <= GT_TEE_TYPE_MAX, GT_E_ARG, "evidence: bad expected type");
    GT_ENSURE(len <= GT_EVIDENCE_MAX_BYTES, GT_E_LIMIT,
              "evidence: %zu bytes, more than the %u-byte limit", len, GT_EVIDENCE_MAX_BYTES);
    GT_ENSURE(len > 0, GT_E_TRUNCATED, "evidence: empty");
    if (len >= 4 && memcmp(data, GT_EVIDENCE_MAGIC, 4) == 0) {
        GT_TRY(parse_envelope(data, len, pe));
        GT_ENSURE(expect == GT_TEE_AUTO || expect == pe->type, GT_E_FORMAT,
                  "evidence is %s, but %s was expected", gt_tee_type_name(pe->type),
                  gt_tee_type_name(expect));
        return GT_OK;
    }
    pe->body = (gt_span){data, len};
    if (expect != GT_TEE_AUTO) {
        GT_TRY(detect_as(data, len, expect, &pe->version));
        pe->type = expect;
        return GT_OK;
    }
    static const gt_tee_type order[] = {GT_TEE_TDX, GT_TEE_SGX, GT_TEE_SNP, GT_TEE_NVGPU};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        uint32_t v = 0;
        if (gt_is_ok(detect_as(data, len, order[i], &v))) {
            pe->type = order[i];
            pe->version = v;
            return GT_OK;
        }
    }
    return gt_errf(GT_E_FORMAT,
                   "evidence: unrecognised format (not a GTEV file, TDX/SGX quote, SNP report or "
                   "NVIDIA SPDM transcript; first bytes %02x %02x %02x %02x)",
                   data[0], len > 1 ? data[1] : 0, len > 2 ? data[2] : 0, len > 3 ? data[3] : 0);
}

gt_err gt_evidence_detect(const uint8_t *data, size_t len, gt_tee_type *type, uint32_t *version)
{
    parsed_evidence pe;
    GT_TRY(parse_any(data, len, GT_TEE_AUTO, &pe));
    *type = pe.type;
    *version = pe.version;
    return GT_OK;
}

gt_err gt_evidence_parse(gt_evidence *ev, const uint8_t *data, size_t len, gt_tee_type expect)
{
    memset(ev, 0, sizeof *ev);
    parsed_evidence pe;
    GT_TRY(parse_any(data, len, expect, &pe));
    gt_evidence tmp = {.type = pe.type, .version = pe.version, .enveloped = pe.enveloped};
    gt_err err = gt_buf_append(&tmp.body, pe.body.data, pe.body.len);
    if (gt_is_ok(err) && pe.aux.len > 0) {
        err = gt_buf_append(&tmp.aux, pe.aux.data, pe.aux.len);
    }
    if (!gt_is_ok(err)) {
        gt_evidence_free(&tmp);
        return err;
    }
    *ev = tmp;
    return GT_OK;
}

gt_err gt_evidence_encode(const gt_evidence *ev, gt_buf *out)
{
    GT_ENSURE(ev->type >= GT_TEE_SIM && ev->type <= GT_TEE_TYPE_MAX, GT_E_ARG,
              "evidence: cannot encode type %d", (int)ev->type);
    GT_ENSURE(ev->body.len <= GT_EVIDENCE_MAX_BYTES && ev->aux.len <= GT_EVIDENCE_MAX_BYTES,
              GT_E_LIMIT, "evidence: too large to encode");
    gt_writer w = gt_writer_init_dynamic();
    gt_err err;
    GT_TRY_GOTO(err, gt_writer_bytes(&w, GT_EVIDENCE_MAGIC, 4), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, GT_EVIDENCE_ENVELOPE_VERSION), out);
    GT_TRY_GOTO(err, gt_writer_u16le(&w, (uint16_t)ev->type), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, (uint32_t)ev->body.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, ev->body.data, ev->body.len), out);
    GT_TRY_GOTO(err, gt_writer_u32le(&w, (uint32_t)ev->aux.len), out);
    GT_TRY_GOTO(err, gt_writer_bytes(&w, ev->aux.data, ev->aux.len), out);
    GT_TRY_GOTO(err, gt_buf_append(out, w.data, w.len), out);
out:
    gt_writer_free(&w);
    return err;
}

gt_err gt_evidence_load_file(gt_evidence *ev, const char *path, gt_tee_type expect)
{
    memset(ev, 0, sizeof *ev);
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, GT_EVIDENCE_MAX_BYTES, &b));
    gt_err err = gt_evidence_parse(ev, b.data, b.len, expect);
    gt_buf_free_nowipe(&b);
    return gt_is_ok(err) ? err : gt_err_wrap(err, "%s", path);
}

gt_err gt_evidence_save_file(const gt_evidence *ev, const char *path)
{
    gt_buf b = {0};
    gt_err err;
    GT_TRY_GOTO(err, gt_evidence_encode(ev, &b), out);
    GT_TRY_GOTO(err, gt_file_write_atomic(path, b.data, b.len, 0644), out);
out:
    gt_buf_free_nowipe(&b);
    return err;
}

// ---- report_data -------------------------------------------------------------------------------

static gt_err hash_part(gt_hash_ctx *h, const void *p, size_t n)
{
    uint8_t len[4];
    GT_ENSURE(n <= UINT32_MAX, GT_E_ARG, "report_data: part too long");
    gt_store_u32be(len, (uint32_t)n);
    GT_TRY(gt_hash_update(h, len, sizeof len));
    if (n > 0) {
        GT_TRY(gt_hash_update(h, p, n));
    }
    return GT_OK;
}

gt_err gt_attest_report_data_build(uint8_t out[GT_REPORT_DATA_BYTES], const char *domain_tag,
                                   const uint8_t *nonce, size_t nonce_len, const uint8_t *pubkey,
                                   size_t pubkey_len, const uint8_t *agreement_hash,
                                   size_t agreement_hash_len)
{
    GT_ENSURE(domain_tag != NULL && domain_tag[0] != '\0', GT_E_ARG,
              "report_data: empty domain tag");
    GT_ENSURE((nonce != NULL || nonce_len == 0) && (pubkey != NULL || pubkey_len == 0) &&
                  (agreement_hash != NULL || agreement_hash_len == 0),
              GT_E_ARG, "report_data: NULL part with a length");
    gt_hash_ctx *h = NULL;
    gt_err err;
    GT_TRY_GOTO(err, gt_hash_new(&h, GT_HASH_SHA512), out);
    GT_TRY_GOTO(err, hash_part(h, domain_tag, strlen(domain_tag)), out);
    GT_TRY_GOTO(err, hash_part(h, nonce, nonce_len), out);
    GT_TRY_GOTO(err, hash_part(h, pubkey, pubkey_len), out);
    GT_TRY_GOTO(err, hash_part(h, agreement_hash, agreement_hash_len), out);
    GT_TRY_GOTO(err, gt_hash_final(h, out), out);
out:
    gt_hash_free(h);
    return err;
}

