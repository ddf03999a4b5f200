// attest/claims.h: the vocabulary every attest unit shares (claims.c): reason lists, claim
// helpers over cJSON, and (declared in attest.h) TEE type and verdict names and the evidence
// value's lifetime. It calls no other attest unit, so the dispatcher (evidence.c), the
// verifiers and the policy all depend on it and it depends on none of them.
// Not a public header: only src/attest/*.c (and white-box tests) include it.
#ifndef GPUTRAVEL_ATTEST_CLAIMS_H
#define GPUTRAVEL_ATTEST_CLAIMS_H

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

// Claim helpers over cJSON objects (dotted paths: "reported_tcb.snp", "measurements.2").
const cJSON *gt_claims_get(const cJSON *claims, const char *path);
GT_MUST_USE gt_err gt_claims_add_hex(cJSON *claims, const char *name, const void *p, size_t n);

#endif
