// Random bytes from OpenSSL's default DRBG (seeded from the OS).
#include "internal.h"

#include <openssl/rand.h>

gt_err gt_random_bytes(void *out, size_t n)
{
    uint8_t *p = out;
    while (n > 0) {
        size_t step = n < GT_CRYPTO_MAX_STEP ? n : GT_CRYPTO_MAX_STEP;
        if (RAND_bytes(p, (int)step) != 1) {
            return gt_crypto_openssl_err("random bytes");
        }
        p += step;
        n -= step;
    }
    return GT_OK;
}
