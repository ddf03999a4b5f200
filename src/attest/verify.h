// attest/verify.h: the interface between the dispatcher (evidence.c) and the per-type verifiers
// (sim.c, intel_adapter.c, snp_adapter.c, nvgpu_adapter.c). Verifiers depend on claims.h, never
// on evidence.c. Not a public header.
#ifndef GPUTRAVEL_ATTEST_VERIFY_H
#define GPUTRAVEL_ATTEST_VERIFY_H

#include "claims.h"

// What a per-type verifier reports about one evidence, before any policy: the thin adapters
// fill it from the format verifiers (sim.c, intel_quote.c, snp_report.c, nvgpu_evidence.c).
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
    bool insecure_simulation;  // sim evidence, or evidence rooted in sim evidence (vsgx on sim)
} gt_attest_check;

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
// vsgx: the SGX quote (attestation key, QE report, QE identity), then the host evidence it
// carries by that host type's own verifier, then the binding between the two.
GT_MUST_USE gt_err gt_attest_verify_vsgx(gt_attest_check *c, const gt_evidence *ev,
                                         const gt_attest_ctx *ctx);
GT_MUST_USE gt_err gt_attest_verify_nvgpu(gt_attest_check *c, const gt_evidence *ev,
                                          const gt_attest_ctx *ctx);

#endif
