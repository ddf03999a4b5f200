// Wiping and constant-time comparison, delegated to OpenSSL so the optimiser cannot drop them.
#include <gputravel/util.h>

#include <openssl/crypto.h>

void gt_secure_zero(void *p, size_t n)
{
    if (p != NULL && n > 0) {
        OPENSSL_cleanse(p, n);
    }
}

bool gt_ct_equal(const void *a, const void *b, size_t n)
{
    return n == 0 || CRYPTO_memcmp(a, b, n) == 0;
}
