// Certificate glue shared by the SNP and NVIDIA verifiers (see attest_internal.h).
#include "attest_internal.h"

gt_err gt_attest_chain_verify(const gt_x509 *leaf, const gt_x509_verify_params *xp)
{
    if (xp->root_count == 0) {
        return gt_errf(GT_E_AUTH, "no trusted root given");
    }
    return gt_x509_verify_chain(leaf, xp);
}

gt_err gt_attest_leaf_ec_point(const gt_x509 *leaf, uint8_t *xy, size_t cap, size_t *len)
{
    gt_pkey *key = NULL;
    gt_err e = gt_x509_public_key(leaf, &key);
    if (e.code == GT_E_NONE) {
        e = gt_pkey_ec_public_xy(key, xy, cap, len);
    }
    gt_pkey_free(key);
    return e;
}
