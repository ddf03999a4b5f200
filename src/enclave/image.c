// Any enclave image: its kind told from its first bytes, then measured by that kind's code
// (measure.c for SGXS and flat images, sgxmeta.c for SDK signed enclaves).
#include <gputravel/enclave.h>

#include <string.h>

const char *gt_sgx_image_kind_name(gt_sgx_image_kind k)
{
    switch (k) {
    case GT_SGX_IMAGE_AUTO: return "auto";
    case GT_SGX_IMAGE_SGXS: return "sgxs";
    case GT_SGX_IMAGE_SIGNED_SO: return "signed-so";
    case GT_SGX_IMAGE_FLAT: return "flat";
    }
    return "unknown";
}

gt_err gt_sgx_measure_image(const uint8_t *data, size_t len, gt_sgx_image_kind kind,
                            uint32_t ssaframesize, uint64_t size, gt_sgx_measurement *out,
                            gt_sgx_image_kind *kind_out)
{
    if (kind == GT_SGX_IMAGE_AUTO) {
        if (len >= 4 && memcmp(data, "\x7f" "ELF", 4) == 0) {
            kind = GT_SGX_IMAGE_SIGNED_SO;
        } else if (len >= 8 && (memcmp(data, "ECREATE\0", 8) == 0 ||
                                memcmp(data, "UNSIZED\0", 8) == 0)) {
            kind = GT_SGX_IMAGE_SGXS;
        } else {
            memset(out, 0, sizeof *out);
            return gt_errf(GT_E_FORMAT, "image: neither an ELF (SGX SDK signed enclave) nor an "
                           "SGXS stream; for a flat page image say --format flat");
        }
    }
    if (kind_out != NULL) {
        *kind_out = kind;
    }
    switch (kind) {
    case GT_SGX_IMAGE_SGXS: return gt_sgx_measure_sgxs(data, len, out);
    case GT_SGX_IMAGE_SIGNED_SO: return gt_sgx_measure_signed_so(data, len, out, NULL);
    case GT_SGX_IMAGE_FLAT:
        return gt_sgx_measure_flat(data, len, ssaframesize ? ssaframesize : 1, size, out);
    case GT_SGX_IMAGE_AUTO: break;
    }
    return gt_errf(GT_E_ARG, "image: unknown kind %d", (int)kind);
}
