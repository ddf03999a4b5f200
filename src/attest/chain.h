// attest/chain.h: certificate glue the format verifiers and their adapters share (chain.c):
// the caller's certificate files as a list, and the chain check against the caller's roots.
// Not a public header.
#ifndef GPUTRAVEL_ATTEST_CHAIN_H
#define GPUTRAVEL_ATTEST_CHAIN_H

#include "claims.h"

// The chain from leaf to one of xp's roots at xp->at. GT_E_AUTH (message = the reason) when it
// does not verify or no root is given; any other code means it could not be evaluated.
GT_MUST_USE gt_err gt_attest_chain_verify(const gt_x509 *leaf, const gt_x509_verify_params *xp);
// The leaf's EC public key as x || y (cap >= 2 * 66 covers P-521).
GT_MUST_USE gt_err gt_attest_leaf_ec_point(const gt_x509 *leaf, uint8_t *xy, size_t cap,
                                           size_t *len);

// A caller file's name for messages ("(memory)" when it has none).
static inline const char *gt_attest_file_name(const gt_attest_file *f)
{
    return f->path != NULL ? f->path : "(memory)";
}

// A growing list of owned certificates. Zero-initialise; gt_certvec_free when done.
typedef struct {
    gt_x509 **v;
    size_t n;
} gt_certvec;

void gt_certvec_free(gt_certvec *cv);
// Takes c (freed on failure).
GT_MUST_USE gt_err gt_certvec_push(gt_certvec *cv, gt_x509 *c);
// Adds every certificate of each file (a PEM bundle or one DER certificate). A file that holds
// none is a reason in `bad` ("WHAT FILE: ..."; the appraisal becomes INVALID), not an error.
GT_MUST_USE gt_err gt_certvec_add_files(gt_certvec *cv, const gt_attest_file *files, size_t n,
                                        const char *what, gt_strlist *bad);

#endif
