// attest/policy.h: policy evaluation, for the dispatcher (evidence.c) and white-box tests.
// policy.c depends on claims.h only. Not a public header.
#ifndef GPUTRAVEL_ATTEST_POLICY_H
#define GPUTRAVEL_ATTEST_POLICY_H

#include "claims.h"

// Adds a reason to `reasons` for every rule the authentic evidence breaks, and warnings for
// notable passes.
GT_MUST_USE gt_err gt_policy_evaluate(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                                      const char *tcb_status, const gt_appraise_params *params,
                                      gt_strlist *reasons, gt_strlist *warnings);

#endif
