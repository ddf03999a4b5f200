// gputravel/attest.h: evidence and appraisal (docs/design.md §4).
//
//   collect(report_data)                          -> evidence      (gt_attest_collect)
//   appraise(evidence, policy, expected binding)  -> verdict + claims + every reason
//                                                                   (gt_attest_appraise)
//
// Evidence types: sim (our simulated platform, ECDSA P-384 signed, ALWAYS insecure-simulation),
// tdx and sgx (Intel DCAP quotes v3/v4/v5), snp (AMD SEV-SNP attestation reports) and nvgpu
// (NVIDIA Hopper SPDM GET_MEASUREMENTS transcripts). Native hardware formats are read as they
// are; evidence files we write ourselves are wrapped in a self-describing envelope ("GTEV", a
// type tag and a version), see docs/attestation.md for both layouts.
//
// Trusts: only the roots the caller passes (Intel SGX Root CA, AMD ARK, NVIDIA Device Identity
// CA, the sim root public key) and the caller's verification time. Never a key or certificate
// the evidence carries about itself (those only build the path to a caller's root).
// Does not trust: any evidence byte, certificate, collateral or policy file. Bad input yields
// verdict INVALID with a reason, never a crash and never ACCEPTED.
//
// Limits: evidence files up to GT_EVIDENCE_MAX_BYTES; no network (no PCS/KDS/OCSP fetching):
// collateral comes from files.
#ifndef GPUTRAVEL_ATTEST_H
#define GPUTRAVEL_ATTEST_H

#include <gputravel/crypto.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GT_REPORT_DATA_BYTES 64
// A measurement, SHA-384 sized: sim's (of the attested executable or device), TDX MRTD, SNP
// MEASUREMENT; agreements allow-list values of this size.
#define GT_MEASUREMENT_BYTES 48
#define GT_NVGPU_NONCE_BYTES 32  // the verifier nonce of an NVIDIA SPDM GET_MEASUREMENTS request
#define GT_EVIDENCE_MAX_BYTES (1u << 20)
#define GT_POLICY_MAX_BYTES (1u << 20)
#define GT_INSECURE_SIMULATION "insecure-simulation"

// ---- TEE types -------------------------------------------------------------------------------
// The numeric values are the envelope's type tag: never renumber.
typedef enum {
    GT_TEE_AUTO = 0,  // "detect it" (as an input); never the type of parsed evidence
    GT_TEE_SIM = 1,
    GT_TEE_TDX = 2,
    GT_TEE_SGX = 3,
    GT_TEE_SNP = 4,
    GT_TEE_NVGPU = 5,
    GT_TEE_VSGX = 6,  // an SGX quote by gputravel's virtual QE, rooted in host evidence (below)
} gt_tee_type;
#define GT_TEE_TYPE_MAX GT_TEE_VSGX

// "auto", "sim", "tdx", "sgx", "snp", "nvgpu", "vsgx"; "unknown" for other values.
const char *gt_tee_type_name(gt_tee_type type);
// Parses one of the names above; GT_E_ARG otherwise.
GT_MUST_USE gt_err gt_tee_type_parse(const char *name, gt_tee_type *out);

// ---- evidence --------------------------------------------------------------------------------
// An evidence: its type, the native bytes (quote, report, SPDM transcript, sim report) and
// optional auxiliary bytes the platform returned with it (configfs-tsm auxblob: SNP certificate
// table). Owns its buffers; zero-initialise, gt_evidence_free when done.
typedef struct {
    gt_tee_type type;
    uint32_t version;  // format version: quote 3/4/5, SNP report 2..5, SPDM 0x10..0x13, sim 1
    bool enveloped;    // read from (or to be written as) a GTEV envelope
    gt_buf body;
    gt_buf aux;
} gt_evidence;

// Reads evidence from bytes: a GTEV envelope, or a native format recognised by its header
// (TDX/SGX quote: version 3..5 + attestation key type + TEE type; SNP: version 2..5, signature
// algorithm 1 and at least 1184 bytes; NVIDIA: SPDM version byte 0x10..0x13 + GET_MEASUREMENTS
// request code 0xE0). `expect` = GT_TEE_AUTO detects; otherwise the evidence must be of that
// type. Errors: GT_E_FORMAT (unrecognised, or another type than expected), GT_E_UNSUPPORTED
// (envelope or sim version), GT_E_TRUNCATED, GT_E_LIMIT (larger than GT_EVIDENCE_MAX_BYTES).
// Signatures are NOT checked here. On failure *ev is left empty.
GT_MUST_USE gt_err gt_evidence_parse(gt_evidence *ev, const uint8_t *data, size_t len,
                                     gt_tee_type expect);
// Detects the type and version of native or enveloped evidence without copying.
GT_MUST_USE gt_err gt_evidence_detect(const uint8_t *data, size_t len, gt_tee_type *type,
                                      uint32_t *version);
// Serialises ev as a GTEV envelope (appends to out; caller frees).
GT_MUST_USE gt_err gt_evidence_encode(const gt_evidence *ev, gt_buf *out);
GT_MUST_USE gt_err gt_evidence_load_file(gt_evidence *ev, const char *path, gt_tee_type expect);
// Writes the envelope atomically (mode 0644).
GT_MUST_USE gt_err gt_evidence_save_file(const gt_evidence *ev, const char *path);
void gt_evidence_free(gt_evidence *ev);  // public data: frees without wiping

// ---- report_data binding ---------------------------------------------------------------------
// report_data = SHA-512(domain tag || nonce || session public key || agreement hash), each part
// prefixed by its length as a big-endian u32 so that no two inputs collide (a plain
// concatenation would let bytes move between the parts). pubkey and agreement_hash may be empty
// (len 0); the domain tag must be non-empty (e.g. "gputravel/device-session/v1").
GT_MUST_USE gt_err gt_attest_report_data_build(uint8_t out[GT_REPORT_DATA_BYTES],
                                               const char *domain_tag, const uint8_t *nonce,
                                               size_t nonce_len, const uint8_t *pubkey,
                                               size_t pubkey_len, const uint8_t *agreement_hash,
                                               size_t agreement_hash_len);

// ---- sim backend -----------------------------------------------------------------------------
// A simulated platform: a root key (ECDSA P-384) kept in a directory (root-key.pem 0600,
// root-pub.pem 0644), created on first use. Evidence it signs is ALWAYS reported as
// insecure-simulation: it proves only that whoever holds that directory's private key signed
// these claims, nothing about hardware isolation.

// The directory is configuration the caller passes in: the library never reads the environment.
// Wherever a call takes a directory, a non-NULL one wins; NULL means the process-wide root set
// by gt_sim_root_set (the CLI sets it once at start from --sim-root or its environment, see
// `gputravel --help`; tests set it in their setup). With neither, GT_E_STATE saying what to set.

// Sets (copies) the process-wide root; NULL or "" clears it. GT_E_LIMIT if the path is too
// long. Thread-safe, but meant for start-up: a change is not seen by a call already resolving.
GT_MUST_USE gt_err gt_sim_root_set(const char *dir);
// The root directory: dir if non-NULL and non-empty, else the process-wide root.
GT_MUST_USE gt_err gt_sim_root_dir(char *out, size_t cap, const char *dir);
// Loads the root private key of dir (resolved as above), creating the key pair when
// `create` is true and none exists yet. pub_path (optional) receives root-pub.pem's path.
GT_MUST_USE gt_err gt_sim_root_open(gt_pkey **root, char *pub_path, size_t pub_cap,
                                    const char *dir, bool create);
#define GT_SIM_ROOT_KEY_FILE "root-key.pem"  // the private key's file in the directory

// Device only: what holds the device's protected memory, as the device says of itself. A party
// the device travels to checks it against what it asked for (a trip in host memory is not a trip
// into device memory). Two bits of the sim report's flags (sim_report.h).
typedef enum {
    GT_SIM_MEMORY_UNSTATED = 0,  // not a device, or a device that does not say
    GT_SIM_MEMORY_DEVD = 1,      // devd: the emulated confidential device, its own process
    GT_SIM_MEMORY_CUDA = 2,      // a GPU, on a trip a cuda trainer serves itself
    GT_SIM_MEMORY_HOST = 3,      // a cpu trainer's host memory: no protection at all
} gt_sim_device_memory;
// "unstated", "devd", "cuda", "host" (the claims' "device_memory"); "unknown" out of range.
const char *gt_sim_device_memory_name(gt_sim_device_memory m);

typedef struct {
    uint8_t measurement[GT_MEASUREMENT_BYTES];
    uint8_t report_data[GT_REPORT_DATA_BYTES];
    uint32_t svn;
    bool debug;
    bool device;      // the evidence describes a (simulated) confidential device, not a CPU TEE
    bool cc_mode;     // device only: confidential-computing mode on
    gt_sim_device_memory memory;  // device only (else UNSTATED)
    uint64_t issued_at;  // unix seconds (informational; freshness comes from report_data)
} gt_sim_claims;

// measurement = SHA-384 of path (NULL: /proc/self/exe, the running executable).
GT_MUST_USE gt_err gt_sim_measure_exe(uint8_t out[GT_MEASUREMENT_BYTES], const char *path);
// Builds and signs sim evidence (type GT_TEE_SIM, enveloped) with the root's private key.
GT_MUST_USE gt_err gt_sim_evidence_create(gt_evidence *ev, const gt_sim_claims *claims,
                                          const gt_pkey *root);

// ---- collection ------------------------------------------------------------------------------
// Linux configfs-tsm (Documentation/ABI/testing/configfs-tsm): mkdir ROOT/<entry>, read
// generation, write inblob (report_data), check generation advanced by exactly one, read
// outblob, auxblob (if present) and provider, read generation again: any change means another
// writer raced us (GT_E_STATE). The entry is removed afterwards.
typedef enum {
    GT_TSM_STEP_MKDIR,          // the entry directory was created
    GT_TSM_STEP_INBLOB_WRITTEN,
    GT_TSM_STEP_OUTBLOB_READ,
    GT_TSM_STEP_BEFORE_RMDIR,
} gt_tsm_step;

typedef struct {
    const char *root;      // NULL: /sys/kernel/config/tsm/report
    const char *entry;     // NULL: a unique "gputravel-<pid>-<random>" name
    // Called after each step (tests play the kernel with it); NULL on real hardware.
    void (*hook)(void *ctx, gt_tsm_step step, const char *entry_path);
    void *hook_ctx;
} gt_tsm_params;

typedef struct {
    gt_buf outblob;        // the quote / report
    gt_buf auxblob;        // empty if the provider has none
    char provider[64];     // "tdx_guest", "sev_guest", ...
    uint64_t generation;
} gt_tsm_report;

GT_MUST_USE gt_err gt_tsm_report_collect(gt_tsm_report *out, const gt_tsm_params *p,
                                         const uint8_t report_data[GT_REPORT_DATA_BYTES]);
void gt_tsm_report_free(gt_tsm_report *r);

// Guest-device ioctls (no configfs-tsm). TDX: TDX_CMD_GET_REPORT0 on /dev/tdx_guest returns the
// 1024-byte TDREPORT (MAC'd for the local quoting enclave, not remotely verifiable on its own).
// SNP: SNP_GET_REPORT on /dev/sev-guest returns the 1184-byte attestation report (vmpl 0).
#define GT_TDX_TDREPORT_BYTES 1024
GT_MUST_USE gt_err gt_tdx_guest_get_report0(uint8_t tdreport[GT_TDX_TDREPORT_BYTES],
                                            const char *dev_path,
                                            const uint8_t report_data[GT_REPORT_DATA_BYTES]);
GT_MUST_USE gt_err gt_sev_guest_get_report(gt_buf *report, const char *dev_path, uint32_t vmpl,
                                           const uint8_t report_data[GT_REPORT_DATA_BYTES]);

// SNP_GET_DERIVED_KEY on /dev/sev-guest: a 32-byte key the AMD-SP derives from the chip's VCEK
// root (root_key_select 0) mixed with the guest fields selected (GT_SNP_KEY_FIELD_*; bound to
// the launch measurement with GT_SNP_KEY_FIELD_MEASUREMENT), for this vmpl. Only this guest
// launch on this chip can derive it again. GT_E_NOTFOUND when the device is absent.
#define GT_SNP_DERIVED_KEY_BYTES 32
#define GT_SNP_KEY_FIELD_GUEST_POLICY 0x01ull
#define GT_SNP_KEY_FIELD_IMAGE_ID 0x02ull
#define GT_SNP_KEY_FIELD_FAMILY_ID 0x04ull
#define GT_SNP_KEY_FIELD_MEASUREMENT 0x08ull
#define GT_SNP_KEY_FIELD_GUEST_SVN 0x10ull
#define GT_SNP_KEY_FIELD_TCB_VERSION 0x20ull
GT_MUST_USE gt_err gt_sev_guest_get_derived_key(uint8_t key[GT_SNP_DERIVED_KEY_BYTES],
                                                const char *dev_path, uint32_t vmpl,
                                                uint64_t guest_field_select);

typedef struct {
    gt_tee_type type;       // sim, tdx or snp (GT_TEE_AUTO: configfs provider decides)
    const char *sim_root;   // sim: root directory (NULL: the process-wide root, gt_sim_root_set)
    const char *sim_exe;    // sim: executable to measure (NULL: /proc/self/exe)
    uint32_t sim_svn;
    bool sim_debug;
    const gt_tsm_params *tsm;  // tdx/snp: configfs-tsm parameters (NULL: defaults)
    const char *dev_path;      // tdx/snp ioctl fallback device (NULL: /dev/tdx_guest, /dev/sev-guest)
} gt_collect_params;

// Collects fresh evidence bound to report_data. sim: signs with the sim root (created on first
// use). tdx/snp: configfs-tsm, falling back to the guest device ioctl when configfs-tsm is absent
// (SNP: the report; TDX: GT_E_UNSUPPORTED, a TDREPORT needs a quoting service to become a quote).
GT_MUST_USE gt_err gt_attest_collect(gt_evidence *ev, const gt_collect_params *p,
                                     const uint8_t report_data[GT_REPORT_DATA_BYTES]);

// ---- vsgx: SGX quotes of gputravel's virtual quoting enclave (docs/enclave.md) -------------
// An SGX ECDSA quote v3 (header 48 | ISV enclave report body 384 | u32 signature data length |
// quote signature 64 | attestation key 64 | QE report 384 | QE report signature 64 | u16 QE
// auth data length | QE auth data | u16 certification data type | u32 size | data), whose
// certification data is type GT_VSGX_CERT_HOST_EVIDENCE: a GTEV envelope of the HOST TEE's
// evidence (sim, tdx or snp) instead of a PCK chain. That evidence's report_data is
// gt_vsgx_host_report_data(platform id, attestation key, QE report): the host's hardware root
// vouches for the virtual QE's key, its identity and the platform. Enveloped as type vsgx.
#define GT_VSGX_CERT_HOST_EVIDENCE 0x4754u  // "TG": outside Intel's types 1..7
#define GT_VSGX_QE_ISVPRODID 1               // as Intel's QE
#define GT_VSGX_QE_ISVSVN 1
#define GT_VSGX_PLATFORM_ID_BYTES 32
#define GT_VSGX_QE_VENDOR_ID "gputravel-vQE-v1"  // the 16 bytes of the header's QE vendor id
#define GT_VSGX_HOST_DOMAIN "gputravel/vsgx-qe-host/v1"
#define GT_VSGX_HEADER_BYTES 48
#define GT_VSGX_REPORT_BODY_BYTES 384
#define GT_VSGX_SIG_BYTES 64
#define GT_VSGX_KEY_BYTES 64
// The virtual QE's identity: MRENCLAVE = SHA-256("gputravel/vsgx-qe/mrenclave/v1"), MRSIGNER =
// SHA-256("gputravel/vsgx-qe/mrsigner/v1"). It is not an enclave image: the QE is code of the
// gputravel binary, which the host evidence measures; these constants name it in SGX terms.
GT_MUST_USE gt_err gt_vsgx_qe_identity(uint8_t mrenclave[32], uint8_t mrsigner[32]);
// report_data = gt_attest_report_data_build(GT_VSGX_HOST_DOMAIN, platform id, attestation
// key x||y, the 384-byte QE report body).
GT_MUST_USE gt_err gt_vsgx_host_report_data(uint8_t out[GT_REPORT_DATA_BYTES],
                                            const uint8_t platform_id[GT_VSGX_PLATFORM_ID_BYTES],
                                            const uint8_t attestation_key[GT_VSGX_KEY_BYTES],
                                            const uint8_t qe_report[GT_VSGX_REPORT_BODY_BYTES]);

// The parts of a vsgx quote; spans borrow the parsed bytes (or the caller's, to encode).
typedef struct {
    uint16_t qe_svn, pce_svn;
    uint8_t user_data[20];         // the platform id's first 20 bytes (DCAP: a QE id)
    gt_span body;                  // GT_VSGX_REPORT_BODY_BYTES: the enclave's report body
    gt_span signed_region;         // header || body (parsed only)
    uint8_t signature[GT_VSGX_SIG_BYTES];        // by the attestation key, r || s
    uint8_t attestation_key[GT_VSGX_KEY_BYTES];  // P-256 x || y
    gt_span qe_report;             // GT_VSGX_REPORT_BODY_BYTES
    uint8_t qe_report_signature[GT_VSGX_SIG_BYTES];
    gt_span qe_auth_data;
    uint8_t platform_id[GT_VSGX_PLATFORM_ID_BYTES];  // certification data, first
    gt_span host_evidence;         // certification data, the rest: a GTEV envelope
} gt_vsgx_quote;
// Certification data layout: platform id (32) | host evidence GTEV envelope (the rest).
// Parse: every length checked; nothing after the certification data. GT_E_FORMAT /
// GT_E_TRUNCATED / GT_E_UNSUPPORTED (another version, key type, TEE type or cert type).
GT_MUST_USE gt_err gt_vsgx_quote_parse(gt_vsgx_quote *q, const uint8_t *data, size_t len);
// The 48-byte header of such a quote (version 3, ECDSA P-256, SGX, the vQE vendor id).
void gt_vsgx_quote_header(uint8_t out[GT_VSGX_HEADER_BYTES], const gt_vsgx_quote *q);
// Appends the whole quote (q->signed_region is ignored: header rebuilt from q's fields).
GT_MUST_USE gt_err gt_vsgx_quote_encode(const gt_vsgx_quote *q, gt_buf *out);

// ---- policy ----------------------------------------------------------------------------------
// Parsed from JSON (schema in docs/attestation.md). Opaque; gt_policy_free when done.
typedef struct gt_policy gt_policy;

// Unknown or repeated fields, wrong types, bad hex, unknown TEE or TCB status names, and
// "allow_debug": true with "debug_forbidden": true (a contradiction): GT_E_FORMAT naming the
// field.
GT_MUST_USE gt_err gt_policy_parse(gt_policy **out, const char *json, size_t len);
GT_MUST_USE gt_err gt_policy_load_file(gt_policy **out, const char *path);
// The default policy (same as "{}"). Safe defaults, which every policy keeps for what it does not
// explicitly relax: a debug TEE (claim debug true, or not stated; nvgpu has no debug attribute)
// is refused unless "allow_debug": true ("debug_forbidden": false does not re-enable it); an
// Intel (tdx, sgx) TCB status other than UpToDate is refused unless accepted_tcb_statuses lists
// it, and a quote with no status (no collateral) unless the list holds "NotEvaluated" (snp, sim
// and nvgpu report no TCB status); sim is refused unless "allow_simulation": true. Otherwise
// hardware is accepted on signature + chain alone (what the format verifier itself refuses still
// rejects: an Intel TCB level that is Revoked or unsupported).
GT_MUST_USE gt_err gt_policy_default(gt_policy **out);
void gt_policy_free(gt_policy *p);

// ---- appraisal -------------------------------------------------------------------------------
typedef enum {
    GT_VERDICT_ACCEPTED = 0,
    GT_VERDICT_REJECTED = 1,  // authentic evidence the policy, TCB or binding refuses
    GT_VERDICT_INVALID = 2,   // not authentic or unreadable: parse, signature, chain, collateral
} gt_verdict;
const char *gt_verdict_name(gt_verdict v);  // "accepted", "rejected", "invalid"

// A trust input read from a file: path (for messages) and its bytes; a sim root public key
// given with no bytes is read from path. Certificates may be PEM (any number) or DER (one).
typedef struct {
    const char *path;
    gt_span data;
} gt_attest_file;

typedef struct {
    const gt_attest_file *roots;       // trusted roots: CA certificates, or the sim root public key
    size_t root_count;
    const gt_attest_file *certs;       // untrusted certificates building the path (VCEK, chains)
    size_t cert_count;
    const gt_attest_file *collateral;  // Intel collateral (TCB info, QE identity, CRLs, ...);
    size_t collateral_count;           // a path may be prefixed with "kind:" (docs)
    int64_t at;                        // verification time (unix seconds); 0 = now
    const uint8_t *expected_report_data;  // 64 bytes the evidence must carry, or NULL
    const uint8_t *nonce;              // verifier nonce, or NULL: nvgpu request nonce must equal
    size_t nonce_len;                  // it; other types: report_data = nonce || zero padding
    const uint8_t *agreement_hash;     // the agreement the evidence is bound to, or NULL
    size_t agreement_hash_len;
} gt_appraise_params;

typedef struct {
    gt_verdict verdict;
    gt_tee_type type;          // GT_TEE_AUTO if not even the type could be read
    uint32_t version;
    bool signature_valid;
    bool chain_valid;
    bool insecure_simulation;  // type sim: always true
    char tcb_status[48];       // Intel TCB status name, "" when none
    cJSON *claims;             // object; lower-case hex; never NULL after gt_attest_appraise
    char **reasons;            // every reason it was not accepted (empty iff ACCEPTED)
    size_t reason_count;
    char **warnings;           // notes that do not change the verdict (insecure-simulation, ...)
    size_t warning_count;
} gt_appraisal;

// Verifies ev against params and appraises it under policy (NULL: gt_policy_default). Fills *out
// (free with gt_appraisal_free) whatever the verdict. Returns an error only for misuse or
// resource failure (GT_E_NOMEM, GT_E_IO reading a root); bad evidence is a verdict, not an error.
GT_MUST_USE gt_err gt_attest_appraise(gt_appraisal *out, const gt_evidence *ev,
                                      const gt_policy *policy, const gt_appraise_params *params);
// Same from raw bytes: a parse failure becomes verdict INVALID with its reason.
GT_MUST_USE gt_err gt_attest_appraise_bytes(gt_appraisal *out, const uint8_t *data, size_t len,
                                            gt_tee_type expect, const gt_policy *policy,
                                            const gt_appraise_params *params);
void gt_appraisal_free(gt_appraisal *a);
// True when some reason contains needle (tests, callers matching a cause).
bool gt_appraisal_has_reason(const gt_appraisal *a, const char *needle);
// {type, version, signature_valid, chain_valid, tcb_status, security, claims, verdict, reasons,
//  warnings}; caller cJSON_Delete. NULL on allocation failure.
cJSON *gt_appraisal_to_json(const gt_appraisal *a);

#endif
