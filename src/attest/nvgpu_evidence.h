// attest/nvgpu_evidence.h: NVIDIA Hopper (H100/H200) confidential-computing GPU evidence, as
// returned by the driver (nvmlDeviceGetConfComputeGpuAttestationReport): an SPDM 1.1
// GET_MEASUREMENTS request immediately followed by the MEASUREMENTS response. Parsing and offline
// verification. Internal to attest/: the evidence framework (include/gputravel/attest.h) wraps it.
//
// Layout (DMTF DSP0274 1.1, all integers little-endian):
//   request : SPDMVersion 0x11, 0xE0, Param1 (bit 0: signature requested), Param2 (0xFF: all),
//             Nonce[32], SlotIDParam (1.1+ only)                                   = 37 bytes
//   response: SPDMVersion, 0x60, Param1, Param2 (slot id in bits 0..3), NumberOfBlocks u8,
//             MeasurementRecordLength u24, MeasurementRecord (blocks: Index u8, Spec u8,
//             Size u16, then DMTF: ValueType u8, ValueSize u16, Value), Nonce[32],
//             OpaqueDataLength u16, OpaqueData (NVIDIA TLVs: type u16, length u16, value),
//             Signature (ECDSA P-384, raw r || s big-endian, 96 bytes)
// Signed data (DSP0274 1.1, L1/L2): SHA-384 over request || response without the signature.
//
// Trust: the parser trusts nothing it reads; lengths come from the length fields, never from the
// buffer size (trailing bytes are counted and ignored). Verification trusts only the roots passed
// in (the NVIDIA Device Identity CA) and the time `at`. Limits: no OCSP, no RIM (golden
// measurement) comparison: measurements are claims for the policy to judge. SPDM 1.2+ (signed
// with a context prefix) is GT_E_UNSUPPORTED.
#ifndef GPUTRAVEL_ATTEST_NVGPU_EVIDENCE_H
#define GPUTRAVEL_ATTEST_NVGPU_EVIDENCE_H

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GT_NVGPU_SIG_BYTES 96          // ECDSA P-384 r || s
#define GT_NVGPU_MAX_BLOCKS 255        // NumberOfBlocks is a u8
#define GT_NVGPU_MAX_OPAQUE_FIELDS 64
#define GT_NVGPU_SPDM_GET_MEASUREMENTS 0xE0
#define GT_NVGPU_SPDM_MEASUREMENTS 0x60
// TCG DICE extension of the GPU leaf certificate carrying the firmware id (FWID, SHA-384) that
// the opaque FWID field must equal.
#define GT_NVGPU_OID_DICE_FWID "2.23.133.5.4.1"

// NVIDIA opaque-data TLV types (as in NVIDIA nvtrust's OpaqueDataType).
typedef enum {
    GT_NVGPU_OPAQUE_CERT_ISSUER_NAME = 1,
    GT_NVGPU_OPAQUE_CERT_AUTHORITY_KEY_IDENTIFIER = 2,
    GT_NVGPU_OPAQUE_DRIVER_VERSION = 3,
    GT_NVGPU_OPAQUE_GPU_INFO = 4,
    GT_NVGPU_OPAQUE_SKU = 5,
    GT_NVGPU_OPAQUE_VBIOS_VERSION = 6,
    GT_NVGPU_OPAQUE_MANUFACTURER_ID = 7,
    GT_NVGPU_OPAQUE_TAMPER_DETECTION = 8,
    GT_NVGPU_OPAQUE_SMC = 9,
    GT_NVGPU_OPAQUE_VPR = 10,
    GT_NVGPU_OPAQUE_NVDEC0_STATUS = 11,
    GT_NVGPU_OPAQUE_MSRSCNT = 12,
    GT_NVGPU_OPAQUE_CPRINFO = 13,
    GT_NVGPU_OPAQUE_BOARD_ID = 14,
    GT_NVGPU_OPAQUE_CHIP_SKU = 15,
    GT_NVGPU_OPAQUE_CHIP_SKU_MOD = 16,
    GT_NVGPU_OPAQUE_PROJECT = 17,
    GT_NVGPU_OPAQUE_PROJECT_SKU = 18,
    GT_NVGPU_OPAQUE_PROJECT_SKU_MOD = 19,
    GT_NVGPU_OPAQUE_FWID = 20,
    GT_NVGPU_OPAQUE_PROTECTED_PCIE_STATUS = 21,
    GT_NVGPU_OPAQUE_SWITCH_PDI = 22,
    GT_NVGPU_OPAQUE_FLOORSWEPT_PORTS = 23,
    GT_NVGPU_OPAQUE_POSITION_ID = 24,
    GT_NVGPU_OPAQUE_LOCK_SWITCH_STATUS = 25,
    GT_NVGPU_OPAQUE_GPU_LINK_CONN = 32,
    GT_NVGPU_OPAQUE_SYS_ENABLE_STATUS = 33,
    GT_NVGPU_OPAQUE_OPAQUE_DATA_VERSION = 34,
    GT_NVGPU_OPAQUE_CHIP_INFO = 35,
    GT_NVGPU_OPAQUE_FEATURE_FLAG = 36,
} gt_nvgpu_opaque_type;

// One measurement block (DMTF format). value borrows the input bytes.
typedef struct {
    uint8_t index;       // 1..254
    uint8_t spec;        // MeasurementSpecification (bit 0: DMTF)
    uint8_t value_type;  // DMTFSpecMeasurementValueType (bit 7: raw bit stream, else digest)
    gt_span value;       // DMTFSpecMeasurementValue (48 bytes of SHA-384 on Hopper)
} gt_nvgpu_measurement;

// One opaque TLV. value borrows the input bytes.
typedef struct {
    uint16_t type;
    gt_span value;
} gt_nvgpu_opaque_field;

// A parsed evidence. All spans borrow the caller's input bytes and live as long as they do.
typedef struct {
    // GET_MEASUREMENTS request
    uint8_t req_version, req_code, req_param1, req_param2, req_slot;
    uint8_t nonce[GT_NVGPU_NONCE_BYTES];           // the verifier's nonce
    // MEASUREMENTS response
    uint8_t resp_version, resp_code, resp_param1, resp_param2;
    uint8_t number_of_blocks;
    uint32_t record_len;                           // MeasurementRecordLength (u24)
    size_t measurement_count;                      // == number_of_blocks
    gt_nvgpu_measurement measurements[GT_NVGPU_MAX_BLOCKS];  // in record order, unique indices
    uint8_t resp_nonce[GT_NVGPU_NONCE_BYTES];      // the responder's nonce
    uint16_t opaque_len;
    size_t opaque_count;
    gt_nvgpu_opaque_field opaque[GT_NVGPU_MAX_OPAQUE_FIELDS];  // in order, unique types
    uint8_t signature[GT_NVGPU_SIG_BYTES];         // r || s, big-endian
    gt_span signed_region;                         // request || response minus signature
    size_t total_len;                              // the input length
    size_t trailing_bytes;                         // input bytes after the signature (ignored)
} gt_nvgpu_evidence;

// Parses data[0..len). GT_E_TRUNCATED when a length field points past the end, GT_E_FORMAT for
// wrong codes, inconsistent lengths, duplicate measurement indices or opaque types,
// GT_E_UNSUPPORTED for SPDM versions other than 1.0/1.1 or an unsigned request, GT_E_LIMIT for
// more than GT_NVGPU_MAX_OPAQUE_FIELDS TLVs. On failure *ev is zeroed.
GT_MUST_USE gt_err gt_nvgpu_evidence_parse(gt_nvgpu_evidence *ev, const uint8_t *data,
                                           size_t len);

// The measurement block with this index (GT_E_NOTFOUND).
GT_MUST_USE gt_err gt_nvgpu_measurement_find(const gt_nvgpu_evidence *ev, uint8_t index,
                                             const gt_nvgpu_measurement **out);
// The opaque TLV of this type (GT_E_NOTFOUND).
GT_MUST_USE gt_err gt_nvgpu_opaque_find(const gt_nvgpu_evidence *ev, uint16_t type,
                                        gt_span *value);
// "DRIVER_VERSION", ...; NULL for a type not in the table.
const char *gt_nvgpu_opaque_type_name(uint16_t type);
// Driver version string ("550.90.07") and VBIOS version ("96.00.9f.00.01"): GT_E_NOTFOUND when
// absent, GT_E_FORMAT when malformed, GT_E_LIMIT when out_cap is too small.
GT_MUST_USE gt_err gt_nvgpu_driver_version(const gt_nvgpu_evidence *ev, char *out, size_t cap);
GT_MUST_USE gt_err gt_nvgpu_vbios_version(const gt_nvgpu_evidence *ev, char *out, size_t cap);

// Verifies the SPDM signature alone with the leaf's P-384 key (x || y, 96 bytes).
// GT_E_AUTH when it does not verify.
GT_MUST_USE gt_err gt_nvgpu_evidence_verify_signature(const gt_nvgpu_evidence *ev,
                                                      const uint8_t *pub_xy, size_t pub_len);

// Fills obj (caller-owned cJSON object) with the claims under the field names of
// tests/testdata/attestation/nvgpu/*.expected.json ("parsed"): request{...}, response{...},
// measurement_blocks, measurements{"index": hex}, response_nonce, opaque_data_length,
// opaque_fields{NAME: value} (strings for versions/SKUs/project, MSRSCNT as a number array, hex
// otherwise; unknown types as "TYPE_<n>": hex), signature_len, signature_rs_be, total_size,
// trailing_bytes. GT_E_NOMEM if cJSON fails.
GT_MUST_USE gt_err gt_nvgpu_evidence_claims_json(const gt_nvgpu_evidence *ev, cJSON *obj);

// ---- verification ---------------------------------------------------------------------------

#define GT_NVGPU_MAX_REASONS 16
#define GT_NVGPU_REASON_BYTES 192

typedef struct {
    const gt_x509 *leaf;                  // "GH100 A01 GSP FMC LF": its key signs the evidence
    const gt_x509 *const *intermediates;  // the rest of the GPU chain (a copy of the root is fine)
    size_t intermediate_count;
    const gt_x509 *const *roots;          // trusted: the NVIDIA Device Identity CA
    size_t root_count;
    const gt_span *crls;
    size_t crl_count;
    int64_t at;                           // verification time, seconds since the epoch
    const uint8_t *expected_nonce;        // GT_NVGPU_NONCE_BYTES, or NULL: freshness not checked
} gt_nvgpu_verify_params;

typedef struct {
    bool ok;                 // reason_count == 0
    bool signature_valid;    // SPDM signature by the leaf key over request || response
    bool chain_valid;        // leaf -> intermediates -> trusted root at `at`
    bool nonce_valid;        // request nonce == expected_nonce (false when none was given)
    bool fwid_valid;         // opaque FWID == leaf certificate's DICE FWID
    size_t reason_count;     // may exceed GT_NVGPU_MAX_REASONS; only the first ones are stored
    char reasons[GT_NVGPU_MAX_REASONS][GT_NVGPU_REASON_BYTES];
} gt_nvgpu_verdict;

// Runs every check and fills *v (zeroed first). GT_OK whenever a verdict was formed (even a
// negative one); an error only for misuse or a crypto-library failure.
GT_MUST_USE gt_err gt_nvgpu_evidence_verify(gt_nvgpu_verdict *v, const gt_nvgpu_evidence *ev,
                                            const gt_nvgpu_verify_params *p);
// The SHA-384 FWID from the leaf's DICE extension (GT_E_NOTFOUND / GT_E_FORMAT).
GT_MUST_USE gt_err gt_nvgpu_leaf_fwid(const gt_x509 *leaf, uint8_t fwid[GT_SHA384_BYTES]);

#endif
