// attest/intel_quote.h: Intel DCAP quotes (SGX quote v3, TDX quote v4 and v5) - parsing and
// offline verification. Internal to the attest layer; the evidence framework
// (include/gputravel/attest.h) wraps it.
//
// Trusts: nothing in the quote; the caller's trusted roots (the Intel SGX Root CA) and its
// verification time. Collateral (TCB info, QE identity, CRLs, TCB signing chain) is untrusted
// too: its signatures, chain and validity dates are checked like the quote's.
//
// Parsing reads only through gt_reader and trusts the length fields, never the buffer size:
// bytes after the quote (several real samples have them) are ignored and q->size says how many
// bytes the quote used. A parsed quote borrows the input buffer (the gt_span fields point into it):
// keep the buffer alive while the gt_intel_quote is used. Nothing is allocated by parsing.
//
// Verification never stops at the first problem: gt_intel_quote_verify fills a gt_intel_verdict
// with every reason it found (bad signature, chain, revocation, collateral, TCB level) and the
// flags below, and returns GT_OK only when there is no reason at all.
#ifndef GPUTRAVEL_ATTEST_INTEL_QUOTE_H
#define GPUTRAVEL_ATTEST_INTEL_QUOTE_H

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- wire constants -------------------------------------------------------------------------
#define GT_INTEL_HEADER_BYTES 48
#define GT_SGX_REPORT_BYTES 384        // SGX enclave report body (also the QE report)
#define GT_TD10_REPORT_BYTES 584       // TDX 1.0 TD report body
#define GT_TD15_REPORT_BYTES 648       // TDX 1.5 TD report body (+ tee_tcb_svn2, mr_servicetd)
#define GT_INTEL_SIG_BYTES 64          // ECDSA P-256 r || s
#define GT_INTEL_PUBKEY_BYTES 64       // P-256 x || y
#define GT_INTEL_TEE_SGX 0x00000000u
#define GT_INTEL_TEE_TDX 0x00000081u
#define GT_INTEL_ATT_KEY_ECDSA_P256 2
#define GT_INTEL_CERT_PCK_CHAIN_PEM 5  // certification data: concatenated PCK chain (PEM)
#define GT_INTEL_CERT_QE_REPORT 6      // certification data: QE report wrapping type 5
#define GT_INTEL_MAX_QUOTE_BYTES (1u << 20)  // refuse anything larger (real quotes: ~5 KiB)
// OID of the SGX extensions of a PCK certificate (FMSPC, PCE-ID, CPU SVN, PCE SVN, ...).
#define GT_INTEL_SGX_EXT_OID "1.2.840.113741.1.13.1"

// ---- parsed quote ---------------------------------------------------------------------------

// 48-byte header, little-endian, in wire order. qe_svn/pce_svn are reserved (zero) in TDX quotes.
typedef struct {
    uint16_t version;          // 3 (SGX), 4 (SGX or TDX), 5 (TDX 1.0/1.5 or SGX)
    uint16_t att_key_type;     // 2 = ECDSA-256-with-P-256 (the only one supported)
    uint32_t tee_type;         // GT_INTEL_TEE_SGX or GT_INTEL_TEE_TDX
    uint16_t qe_svn;
    uint16_t pce_svn;
    uint8_t qe_vendor_id[16];  // 939a7233f79c4ca9940a0db3957f0607 = Intel
    uint8_t user_data[20];
} gt_intel_quote_header;

// SGX REPORT body (384 bytes): the enclave report of an SGX quote and the QE report of any quote.
typedef struct {
    uint8_t cpu_svn[16];
    uint32_t misc_select;
    uint8_t isv_ext_prod_id[16];
    uint8_t attributes[16];    // flags (LE u64: bit 0 INIT, bit 1 DEBUG, ...) || xfrm
    uint8_t mr_enclave[32];
    uint8_t mr_signer[32];
    uint8_t config_id[64];
    uint16_t isv_prod_id;
    uint16_t isv_svn;
    uint16_t config_svn;
    uint8_t isv_family_id[16];
    uint8_t report_data[GT_REPORT_DATA_BYTES];
} gt_sgx_report;

// TD report body: TDX 1.0 (584 bytes) or 1.5 (648 bytes; the last two fields are zero in 1.0).
typedef struct {
    uint8_t tee_tcb_svn[16];
    uint8_t mr_seam[48];
    uint8_t mr_signer_seam[48];
    uint8_t seam_attributes[8];
    uint8_t td_attributes[8];  // byte 0 bit 0 = DEBUG; byte 3 bit 4 = SEPT_VE_DISABLE
    uint8_t xfam[8];
    uint8_t mr_td[48];
    uint8_t mr_config_id[48];
    uint8_t mr_owner[48];
    uint8_t mr_owner_config[48];
    uint8_t rtmr[4][48];
    uint8_t report_data[GT_REPORT_DATA_BYTES];
    uint8_t tee_tcb_svn2[16];  // TDX 1.5 only
    uint8_t mr_servicetd[48];  // TDX 1.5 only
} gt_td_report;

typedef enum {
    GT_INTEL_BODY_SGX = 1,   // the v5 body type numbers
    GT_INTEL_BODY_TD10 = 2,
    GT_INTEL_BODY_TD15 = 3,
} gt_intel_body_type;

typedef struct {
    gt_intel_quote_header header;
    gt_intel_body_type body_type;
    uint32_t body_size;            // bytes of the report body (v5: its size field)
    gt_sgx_report sgx;             // body_type == GT_INTEL_BODY_SGX
    gt_td_report td;               // body_type == TD10 / TD15
    gt_span signed_region;         // header || [v5 type, size] || body: what the AK signed
    uint32_t signature_data_len;
    uint8_t signature[GT_INTEL_SIG_BYTES];            // by the attestation key, r || s
    uint8_t attestation_key[GT_INTEL_PUBKEY_BYTES];   // x || y
    uint16_t cert_data_type;       // outer certification data type: 5 (v3) or 6 (v4/v5)
    gt_sgx_report qe_report;
    gt_span qe_report_raw;         // the 384 bytes the PCK leaf signed
    uint8_t qe_report_signature[GT_INTEL_SIG_BYTES];
    gt_span qe_auth_data;
    uint16_t pck_cert_data_type;   // the type of the PCK chain data (always 5 when parsed)
    gt_span pck_chain_pem;         // PEM: PCK leaf, PCK platform/processor CA, root
    size_t size;                   // quote bytes used (<= input length)
} gt_intel_quote;

// Parses a quote from data[0..len). Errors: GT_E_TRUNCATED (a length field points past the end),
// GT_E_FORMAT (inconsistent lengths or types), GT_E_UNSUPPORTED (version, key type, TEE type,
// body type or certification data type not handled), GT_E_LIMIT (len > GT_INTEL_MAX_QUOTE_BYTES).
// On failure *q is zeroed.
GT_MUST_USE gt_err gt_intel_quote_parse(gt_intel_quote *q, const uint8_t *data, size_t len);
// Parses the 384-byte SGX report layout from r (used for both bodies and QE reports).
GT_MUST_USE gt_err gt_sgx_report_parse(gt_reader *r, gt_sgx_report *rep);
bool gt_intel_quote_is_tdx(const gt_intel_quote *q);
// DEBUG attribute of the body: TD_ATTRIBUTES bit 0 (TDX) or ATTRIBUTES bit 1 (SGX).
bool gt_intel_quote_debug(const gt_intel_quote *q);
// The 64 bytes of REPORTDATA of the body.
const uint8_t *gt_intel_quote_report_data(const gt_intel_quote *q);

// ---- claims ---------------------------------------------------------------------------------
// The measurements and attributes of the body, named as in tests/testdata/attestation/*.expected.json
// (TDX: tee_tcb_svn, mr_seam, mr_signer_seam, seam_attributes, td_attributes, xfam, mr_td,
// mr_config_id, mr_owner, mr_owner_config, rtmr0..rtmr3, report_data, [tee_tcb_svn2,
// mr_servicetd], debug; SGX: cpu_svn, attributes, mr_enclave, mr_signer, isv_prod_id, isv_svn,
// config_id, config_svn, isv_ext_prod_id, isv_family_id, report_data, debug).
typedef enum { GT_INTEL_CLAIM_BYTES, GT_INTEL_CLAIM_UINT, GT_INTEL_CLAIM_BOOL } gt_intel_claim_kind;
typedef struct {
    const char *name;          // static string
    gt_intel_claim_kind kind;
    const uint8_t *bytes;      // BYTES: points into the gt_intel_quote
    size_t len;
    uint64_t value;            // UINT; BOOL (0/1)
} gt_intel_claim;
#define GT_INTEL_MAX_CLAIMS 24
// Fills out[0..n) (cap >= GT_INTEL_MAX_CLAIMS always suffices); returns n.
size_t gt_intel_quote_claims(const gt_intel_quote *q, gt_intel_claim *out, size_t cap);
// Adds every claim to obj: bytes as lower-case hex strings, numbers, booleans.
GT_MUST_USE gt_err gt_intel_quote_claims_json(const gt_intel_quote *q, cJSON *obj);

// ---- PCK certificate SGX extensions (OID 1.2.840.113741.1.13.1) -----------------------------
typedef struct {
    uint8_t ppid[16];
    uint8_t cpu_svn[16];
    uint8_t comp_svn[16];      // SGX TCB component SVNs 1..16
    uint16_t pce_svn;
    uint8_t pce_id[2];
    uint8_t fmspc[6];
    int sgx_type;              // 0 Standard, 1 Scalable, 2 Scalable with integrity; -1 absent
} gt_intel_pck_ext;
// Parses the DER value of the extension (the SEQUENCE inside the OCTET STRING).
GT_MUST_USE gt_err gt_intel_pck_ext_parse(gt_intel_pck_ext *ext, const uint8_t *der, size_t len);

// ---- collateral -----------------------------------------------------------------------------
typedef enum {
    GT_INTEL_COLL_TCB_INFO,           // PCS TCB info response: {"tcbInfo":{...},"signature":"hex"}
    GT_INTEL_COLL_QE_IDENTITY,        // PCS QE identity: {"enclaveIdentity":{...},"signature":..}
    GT_INTEL_COLL_TCB_SIGNING_CHAIN,  // PEM: Intel SGX TCB Signing cert (+ root)
    GT_INTEL_COLL_PCK_CRL,            // DER or PEM CRL of the PCK platform/processor CA
    GT_INTEL_COLL_ROOT_CA_CRL,        // DER or PEM CRL of the Intel SGX Root CA
    GT_INTEL_COLL_DCAP_QVL_JSON,      // dcap-qvl's collateral JSON (all of the above in one)
} gt_intel_coll_kind;

// Owned collateral. Zero-initialise, add pieces, gt_intel_collateral_free when done.
typedef struct {
    gt_buf tcb_info;                  // exact signed bytes of the "tcbInfo" JSON value
    uint8_t tcb_info_sig[GT_INTEL_SIG_BYTES];
    bool has_tcb_info;
    gt_buf qe_identity;               // exact signed bytes of the "enclaveIdentity" JSON value
    uint8_t qe_identity_sig[GT_INTEL_SIG_BYTES];
    bool has_qe_identity;
    gt_x509 **tcb_chain;              // [0] = TCB signing cert, then the rest of the PEM bundle
    size_t tcb_chain_count;
    gt_buf pck_crl;
    gt_buf root_ca_crl;
} gt_intel_collateral;

// Adds one piece from memory (copied). GT_E_FORMAT when it does not parse as that kind;
// GT_E_STATE when that piece was already added (a dcap-qvl JSON must be the only piece). On
// failure c is unchanged.
GT_MUST_USE gt_err gt_intel_collateral_add(gt_intel_collateral *c, gt_intel_coll_kind kind,
                                           const uint8_t *data, size_t len);
GT_MUST_USE gt_err gt_intel_collateral_add_file(gt_intel_collateral *c, gt_intel_coll_kind kind,
                                                const char *path);
void gt_intel_collateral_free(gt_intel_collateral *c);

// ---- verification ---------------------------------------------------------------------------
typedef struct {
    const gt_x509 *const *roots;      // trusted roots (the Intel SGX Root CA); required
    size_t root_count;
    int64_t at;                       // verification time, seconds since the epoch
    const gt_intel_collateral *collateral;  // optional: NULL = quote + PCK chain only
} gt_intel_verify_params;

#define GT_INTEL_MAX_REASONS 24
#define GT_INTEL_REASON_BYTES 192
#define GT_INTEL_MAX_ADVISORIES 48

typedef struct {
    bool accepted;            // no reason at all
    bool signature_valid;     // quote signature, QE report signature and QE report data binding
    bool chain_valid;         // PCK chain to a trusted root at `at` (with the CRLs, if given)
    bool collateral_valid;    // given collateral is signed, chained, in date and for this FMSPC
    bool pck_ext_valid;       // pck (below) holds the parsed SGX extensions
    const char *tcb_status;   // final (converged) TCB status; NULL when not computed
    const char *platform_tcb_status;  // from the TCB info level alone; NULL when not computed
    const char *tdx_module_status;    // TDX module identity level; NULL when not computed
    const char *qe_tcb_status;        // from the QE identity; NULL when not computed
    gt_intel_pck_ext pck;
    char tcb_date[24];        // tcbDate of the matching TCB level ("" if none)
    size_t advisory_count;
    char advisories[GT_INTEL_MAX_ADVISORIES][24];
    size_t reason_count;      // reasons beyond GT_INTEL_MAX_REASONS are counted, not kept
    char reasons[GT_INTEL_MAX_REASONS][GT_INTEL_REASON_BYTES];
} gt_intel_verdict;

// Verifies q at p->at: quote signature by the attestation key over signed_region; QE report
// signature by the PCK leaf; QE report data = SHA-256(attestation key || QE auth data) || zeros;
// PCK chain to p->roots (with the collateral's CRLs); and with collateral: TCB info and QE identity
// signatures by the TCB signing cert, its chain to p->roots, their validity dates, FMSPC/PCE-ID
// match, the QE identity (MRSIGNER, ISVPRODID, MISCSELECT and ATTRIBUTES under their masks) and
// the TCB status by Intel's TCB level matching. Fills *v (always, from zero).
// Returns GT_OK iff v->accepted; otherwise GT_E_AUTH carrying the first reason. A TCB status
// other than UpToDate is not a reason (policy decides); a revoked or unmatched TCB is.
GT_MUST_USE gt_err gt_intel_quote_verify(const gt_intel_quote *q, const gt_intel_verify_params *p,
                                         gt_intel_verdict *v);
// Only the quote signature by the attestation key over the signed region (GT_E_AUTH if bad).
GT_MUST_USE gt_err gt_intel_quote_verify_signature(const gt_intel_quote *q);
// Adds the verdict to obj: accepted, signature_valid, chain_valid, collateral_valid,
// tcb_status / platform_tcb_status / tdx_module_status / qe_tcb_status (string or null), fmspc,
// pce_id, tcb_date (when known), advisory_ids [..], reasons [..].
GT_MUST_USE gt_err gt_intel_verdict_json(const gt_intel_verdict *v, cJSON *obj);
// Checks that v lists a reason containing `needle` (for tests and messages).
bool gt_intel_verdict_has_reason(const gt_intel_verdict *v, const char *needle);

// Parses "YYYY-MM-DDTHH:MM:SSZ" (UTC) into seconds since the epoch.
GT_MUST_USE gt_err gt_intel_parse_time(const char *s, int64_t *out);

#endif
