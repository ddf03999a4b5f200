// Wiping and constant-time comparison through calls the optimiser cannot drop: glibc's
// explicit_bzero (its vectorised memset behind a barrier: about twice as fast as
// OPENSSL_cleanse's 8-byte loop on the pager's 64 KiB frames) and OpenSSL's CRYPTO_memcmp.
#include <gputravel/util.h>

#include <openssl/crypto.h>
#include <string.h>

void gt_secure_zero(void *p, size_t n)
{
    if (p != NULL && n > 0) {
        explicit_bzero(p, n);
    }
}

bool gt_ct_equal(const void *a, const void *b, size_t n)
{
    return n == 0 || CRYPTO_memcmp(a, b, n) == 0;
}
