// attest/attest_internal.h: what the evidence framework and its per-type verifiers share.
// Not a public header: only src/attest/*.c include it.
#ifndef GPUTRAVEL_ATTEST_INTERNAL_H
#define GPUTRAVEL_ATTEST_INTERNAL_H

#include <gputravel/attest.h>

// A growing list of formatted strings (reasons, warnings). Zero-initialise; free with
// gt_strlist_free. Adding only fails on out-of-memory.
typedef struct {
    char **items;
    size_t count;
} gt_strlist;

GT_MUST_USE gt_err gt_strlist_addf(gt_strlist *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool gt_strlist_contains(const gt_strlist *l, const char *needle);
void gt_strlist_free(gt_strlist *l);

// What a per-type verifier reports about one evidence, before any policy: the thin adapters in
// evidence.c fill it from the format verifiers (sim.c, intel_quote.c, snp_report.c,
// nvgpu_evidence.c).
typedef struct {
    bool parsed;            // the bytes parsed as this type
    uint32_t version;
    bool signature_valid;   // the evidence signature verifies with the key that should sign it
    bool chain_valid;       // that key chains to a caller root at `at` (sim: is the caller root)
    char tcb_status[48];    // Intel TCB status, "" when none
    cJSON *claims;          // object, owned; lower-case hex
    gt_strlist invalid;     // reasons it is not authentic           -> verdict INVALID
    gt_strlist rejected;    // reasons authentic evidence is refused  -> verdict REJECTED
    gt_strlist warnings;
} gt_attest_check;

void gt_attest_check_free(gt_attest_check *c);

// Resolved trust inputs shared by the verifiers.
typedef struct {
    const gt_appraise_params *p;
    int64_t at;  // p->at, or now
} gt_attest_ctx;

// Per-type verifiers. Each fills c (claims already an empty object) and returns an error only
// for resource failures; every problem with the evidence goes into c->invalid / c->rejected.
GT_MUST_USE gt_err gt_attest_verify_sim(gt_attest_check *c, const gt_evidence *ev,
                                        const gt_attest_ctx *ctx);
GT_MUST_USE gt_err gt_attest_verify_intel(gt_attest_check *c, const gt_evidence *ev,
                                          const gt_attest_ctx *ctx);
GT_MUST_USE gt_err gt_attest_verify_snp(gt_attest_check *c, const gt_evidence *ev,
                                        const gt_attest_ctx *ctx);
GT_MUST_USE gt_err gt_attest_verify_nvgpu(gt_attest_check *c, const gt_evidence *ev,
                                          const gt_attest_ctx *ctx);

// Sim report layout (the body of a type-sim envelope), little-endian:
//   0   2  version (1)
//   2   2  flags: bit 0 debug, bit 1 device, bit 2 cc_mode; other bits zero
//   4   4  svn
//   8   8  issued_at (unix seconds)
//   16 48  measurement
//   64 64  report_data
//   128 32 root key id: SHA-256 of the root public key x || y (diagnostics only, never trusted)
//   160 2  signature length n (8..GT_SIM_SIG_MAX)
//   162 n  DER ECDSA P-384 / SHA-384 signature over GT_SIM_SIGN_DOMAIN (with its NUL) || bytes
//          0..160
#define GT_SIM_VERSION 1
#define GT_SIM_SIGNED_BYTES 160
#define GT_SIM_SIG_MAX 120
#define GT_SIM_FLAG_DEBUG 0x1u
#define GT_SIM_FLAG_DEVICE 0x2u
#define GT_SIM_FLAG_CC_MODE 0x4u
#define GT_SIM_FLAGS_KNOWN 0x7u
#define GT_SIM_SIGN_DOMAIN "gputravel sim evidence v1"

typedef struct {
    uint16_t version;
    uint16_t flags;
    gt_sim_claims claims;
    uint8_t root_key_id[32];
    gt_span signed_region;  // borrowed from the parsed bytes
    gt_span signature;
} gt_sim_report;

// Parses a sim report body exactly (no trailing bytes). Signature NOT checked.
GT_MUST_USE gt_err gt_sim_report_parse(gt_sim_report *r, const uint8_t *data, size_t len);

// Envelope: "GTEV" | u16le envelope version | u16le type | u32le body len | body |
//           u32le aux len | aux  (exactly; nothing after)
#define GT_EVIDENCE_MAGIC "GTEV"
#define GT_EVIDENCE_ENVELOPE_VERSION 1

// Claim helpers over cJSON objects (dotted paths: "reported_tcb.snp", "measurements.2").
const cJSON *gt_claims_get(const cJSON *claims, const char *path);
GT_MUST_USE gt_err gt_claims_add_hex(cJSON *claims, const char *name, const void *p, size_t n);

// Policy evaluation (policy.c): adds a reason to `reasons` for every rule the authentic evidence
// breaks, and warnings for notable passes.
GT_MUST_USE gt_err gt_policy_evaluate(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                                      const char *tcb_status, const gt_appraise_params *params,
                                      gt_strlist *reasons, gt_strlist *warnings);

// ---- certificate glue the format verifiers share (chain.c) ----------------------------------

// The chain from leaf to one of xp's roots at xp->at. GT_E_AUTH (message = the reason) when it
// does not verify or no root is given; any other code means it could not be evaluated.
GT_MUST_USE gt_err gt_attest_chain_verify(const gt_x509 *leaf, const gt_x509_verify_params *xp);
// The leaf's EC public key as x || y (cap >= 2 * 66 covers P-521).
GT_MUST_USE gt_err gt_attest_leaf_ec_point(const gt_x509 *leaf, uint8_t *xy, size_t cap,
                                           size_t *len);

#endif
