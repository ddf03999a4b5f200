// attest/snp_report.h: AMD SEV-SNP ATTESTATION_REPORT (versions 2 to 5; Milan, Genoa, Turin)
// parsing and offline verification against the VCEK/VLEK certificate and the AMD chain.
// Internal to attest/: the evidence framework (include/gputravel/attest.h) wraps it.
//
// Layout: SEV Secure Nested Paging Firmware ABI Specification (AMD 56860), table "ATTESTATION_
// REPORT Structure". 1184 bytes, all integers little-endian. The signature (ECDSA P-384 with
// SHA-384) covers bytes 0x000..0x29F; r and s sit in 72-byte little-endian fields at 0x2A0 and
// 0x2E8 (the top 24 bytes of each are zero for P-384).
//
// Trust: the parser trusts nothing it reads (gt_reader only, length from the format, never from
// the buffer size: trailing bytes are ignored and counted). Verification trusts only the roots
// passed in gt_snp_verify_params (the caller's pinned ARK), and the time `at` it is given.
// Limits: no CRL fetching, no KDS access (offline only); reports signed with no key (MASK_CHIP_KEY
// or signing_key == NONE) never verify.
#ifndef GPUTRAVEL_ATTEST_SNP_REPORT_H
#define GPUTRAVEL_ATTEST_SNP_REPORT_H

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GT_SNP_REPORT_BYTES 1184        // 0x4A0
#define GT_SNP_SIGNED_BYTES 0x2A0       // bytes covered by the signature
#define GT_SNP_SIG_FIELD_BYTES 72       // r, s: little-endian, zero-extended
#define GT_SNP_SIG_RS_BYTES 96          // r || s, big-endian, 48 bytes each
#define GT_SNP_HOST_DATA_BYTES 32
#define GT_SNP_CHIP_ID_BYTES 64
#define GT_SNP_TURIN_HWID_BYTES 8      // Turin VCEK hwID: chip_id[0..8)
#define GT_SNP_SIG_ALGO_ECDSA_P384_SHA384 1

// Guest policy bits (ABI spec, "GUEST_POLICY").
#define GT_SNP_POLICY_SMT (1ull << 16)
#define GT_SNP_POLICY_RESERVED1 (1ull << 17)  // must be one
#define GT_SNP_POLICY_MIGRATE_MA (1ull << 18)
#define GT_SNP_POLICY_DEBUG (1ull << 19)
#define GT_SNP_POLICY_SINGLE_SOCKET (1ull << 20)

// AMD VCEK/VLEK certificate extensions (AMD "Versioned Chip Endorsement Key (VCEK) Certificate
// and KDS Interface Specification", 57230).
#define GT_SNP_OID_PRODUCT_NAME "1.3.6.1.4.1.3704.1.2"
#define GT_SNP_OID_BL_SPL "1.3.6.1.4.1.3704.1.3.1"
#define GT_SNP_OID_TEE_SPL "1.3.6.1.4.1.3704.1.3.2"
#define GT_SNP_OID_SNP_SPL "1.3.6.1.4.1.3704.1.3.3"
#define GT_SNP_OID_UCODE_SPL "1.3.6.1.4.1.3704.1.3.8"
#define GT_SNP_OID_FMC_SPL "1.3.6.1.4.1.3704.1.3.9"  // Turin
#define GT_SNP_OID_HWID "1.3.6.1.4.1.3704.1.4"

typedef enum {
    GT_SNP_PRODUCT_UNKNOWN = 0,  // v2 reports carry no CPUID; Milan/Genoa share one TCB layout
    GT_SNP_PRODUCT_MILAN,        // family 0x19, model 0x00..0x0f
    GT_SNP_PRODUCT_GENOA,        // family 0x19, model 0x10..0x1f and 0xa0..0xaf
    GT_SNP_PRODUCT_TURIN,        // family 0x1a, model 0x00..0x1f
} gt_snp_product;

// signer_info bits 2..4 (SIGNING_KEY).
typedef enum {
    GT_SNP_KEY_VCEK = 0,
    GT_SNP_KEY_VLEK = 1,
    GT_SNP_KEY_NONE = 7,
} gt_snp_signing_key;

// TCB_VERSION (a u64). Milan/Genoa: bl[7:0] tee[15:8] snp[55:48] ucode[63:56].
// Turin: fmc[7:0] bl[15:8] tee[23:16] snp[31:24] ucode[63:56] (has_fmc set).
typedef struct {
    uint64_t raw;
    bool has_fmc;
    uint8_t fmc;
    uint8_t bootloader;
    uint8_t tee;
    uint8_t snp;
    uint8_t microcode;
} gt_snp_tcb;

// A parsed report. Byte arrays are copies; signed_region borrows the caller's input bytes and
// lives as long as they do.
typedef struct {
    uint32_t version;          // 0x000
    uint32_t guest_svn;        // 0x004
    uint64_t policy;           // 0x008
    uint8_t family_id[16];     // 0x010
    uint8_t image_id[16];      // 0x020
    uint32_t vmpl;             // 0x030
    uint32_t signature_algo;   // 0x034
    gt_snp_tcb current_tcb;    // 0x038
    uint64_t platform_info;    // 0x040
    uint32_t signer_info;      // 0x048: bit0 author_key_en, bit1 mask_chip_key, 2..4 signing_key
    uint8_t report_data[GT_REPORT_DATA_BYTES];     // 0x050
    uint8_t measurement[GT_MEASUREMENT_BYTES];     // 0x090
    uint8_t host_data[GT_SNP_HOST_DATA_BYTES];         // 0x0C0
    uint8_t id_key_digest[48];                         // 0x0E0
    uint8_t author_key_digest[48];                     // 0x110
    uint8_t report_id[32];                             // 0x140
    uint8_t report_id_ma[32];                          // 0x160
    gt_snp_tcb reported_tcb;                           // 0x180
    uint8_t cpuid_fam_id;      // 0x188 (v3+; 0 in v2)
    uint8_t cpuid_mod_id;      // 0x189
    uint8_t cpuid_step;        // 0x18A
    uint8_t chip_id[GT_SNP_CHIP_ID_BYTES];             // 0x1A0
    gt_snp_tcb committed_tcb;                          // 0x1E0
    uint8_t current_build, current_minor, current_major;        // 0x1E8
    uint8_t committed_build, committed_minor, committed_major;  // 0x1EC
    gt_snp_tcb launch_tcb;                             // 0x1F0
    uint64_t launch_mit_vector;   // 0x1F8 (v5+; 0 before)
    uint64_t current_mit_vector;  // 0x200 (v5+; 0 before)
    uint8_t sig_r_le[GT_SNP_SIG_FIELD_BYTES];          // 0x2A0, as stored
    uint8_t sig_s_le[GT_SNP_SIG_FIELD_BYTES];          // 0x2E8, as stored
    bool sig_reserved_zero;    // 0x330..0x49F all zero
    gt_snp_product product;    // from CPUID (v3+), else UNKNOWN
    gt_span signed_region;     // input bytes 0x000..0x29F (borrowed)
    size_t trailing_bytes;     // input bytes after the 1184-byte report (ignored)
} gt_snp_report;

// Parses one report from data[0..len). Reads exactly GT_SNP_REPORT_BYTES; further bytes are
// counted in trailing_bytes. GT_E_TRUNCATED when shorter; GT_E_UNSUPPORTED for a version outside
// 2..5. On failure *rep is zeroed.
GT_MUST_USE gt_err gt_snp_report_parse(gt_snp_report *rep, const uint8_t *data, size_t len);

// Decodes a TCB_VERSION for a product (Turin layout only for GT_SNP_PRODUCT_TURIN).
gt_snp_tcb gt_snp_tcb_decode(uint64_t raw, gt_snp_product product);
const char *gt_snp_product_name(gt_snp_product product);      // "Milan", ..., "unknown"
gt_snp_signing_key gt_snp_report_signing_key(const gt_snp_report *rep);
const char *gt_snp_signing_key_name(gt_snp_signing_key key);  // "VCEK", "VLEK", "none", "reserved"
static inline bool gt_snp_report_debug_allowed(const gt_snp_report *rep)
{
    return (rep->policy & GT_SNP_POLICY_DEBUG) != 0;
}

// The signature as big-endian r || s (48 bytes each). GT_E_FORMAT when r or s does not fit in
// 48 bytes (non-zero high bytes): such a signature can never be valid.
GT_MUST_USE gt_err gt_snp_report_signature_rs(const gt_snp_report *rep,
                                              uint8_t rs[GT_SNP_SIG_RS_BYTES]);
// Verifies the report signature alone with a P-384 public key (x || y, big-endian, 96 bytes,
// as gt_pkey_ec_public_xy returns it). GT_E_AUTH when it does not verify.
GT_MUST_USE gt_err gt_snp_report_verify_signature(const gt_snp_report *rep,
                                                  const uint8_t *pub_xy, size_t pub_len);

// Fills obj (a cJSON object the caller owns) with the report's claims under the field names of
// tests/testdata/attestation/snp/*.expected.json ("parsed"): numbers for version, guest_svn, vmpl,
// signature_algo; "0x%016x" strings for raw 64-bit values; lower-case hex for byte fields; TCBs
// as {raw, bootloader, tee, snp, microcode[, fmc]}. GT_E_NOMEM if cJSON fails.
GT_MUST_USE gt_err gt_snp_report_claims_json(const gt_snp_report *rep, cJSON *obj);

// ---- verification ---------------------------------------------------------------------------

#define GT_SNP_MAX_REASONS 16
#define GT_SNP_REASON_BYTES 192

typedef struct {
    const gt_x509 *vek;                   // VCEK or VLEK that signed the report
    const gt_x509 *const *intermediates;  // ASK (VCEK) or ASVK (VLEK)
    size_t intermediate_count;
    const gt_x509 *const *roots;          // trusted ARK(s): the caller pins them
    size_t root_count;
    const gt_span *crls;                  // optional ARK/ASK CRLs (DER or PEM)
    size_t crl_count;
    int64_t at;                           // verification time, seconds since the epoch
} gt_snp_verify_params;

// The verdict: every check runs, each failure adds a reason. ok iff reason_count == 0.
typedef struct {
    bool ok;
    bool signature_valid;   // report signature verifies with the VEK's public key
    bool chain_valid;       // VEK -> ASK/ASVK -> trusted ARK at `at` (RSA-PSS, validity)
    bool key_valid;         // certificate kind (SEV-VCEK / SEV-VLEK) == signer_info signing_key,
                            // and the intermediate's product == the report's CPUID product (v3+)
    bool tcb_valid;         // VEK blSPL/teeSPL/snpSPL/ucodeSPL(/fmcSPL) == reported_tcb
    bool chip_id_valid;     // VCEK hwID == chip_id (VLEK: not applicable, true)
    size_t reason_count;    // may exceed GT_SNP_MAX_REASONS; only the first ones are stored
    char reasons[GT_SNP_MAX_REASONS][GT_SNP_REASON_BYTES];
} gt_snp_verdict;

// Runs every check of the report against the certificates in p and fills *v (zeroed first).
// Returns GT_OK whenever the verdict could be formed (even a negative one); an error only for
// misuse or a crypto-library failure (GT_E_NOMEM, GT_E_CRYPTO).
GT_MUST_USE gt_err gt_snp_report_verify(gt_snp_verdict *v, const gt_snp_report *rep,
                                        const gt_snp_verify_params *p);
// Compares the VEK's blSPL/teeSPL/snpSPL/ucodeSPL (and fmcSPL when tcb->has_fmc) extensions with
// tcb. GT_E_AUTH naming the first mismatching field; GT_E_NOTFOUND / GT_E_FORMAT for a missing
// or malformed extension.
GT_MUST_USE gt_err gt_snp_vek_check_tcb(const gt_x509 *vek, const gt_snp_tcb *tcb);
// Compares the VCEK's hwID extension with the report's chip_id (all 64 bytes; for Turin, whose
// VCEKs carry an 8-byte hwID, the first 8). GT_E_AUTH on mismatch.
GT_MUST_USE gt_err gt_snp_vek_check_chip_id(const gt_x509 *vek,
                                            const uint8_t chip_id[GT_SNP_CHIP_ID_BYTES],
                                            gt_snp_product product);

#endif
