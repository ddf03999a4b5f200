// crypto/: AES-128-CMAC against RFC 4493's test vectors (section 4), and one flipped bit of key
// or message changing the tag.
#include "testlib.h"

#include <gputravel/crypto.h>

static void hex(uint8_t *out, size_t n, const char *h)
{
    GT_ASSERT_OK(gt_hex_decode_exact(out, n, h));
}

static void rfc4493_vectors(void **state)
{
    (void)state;
    uint8_t key[16], msg[64], want[16], tag[16];
    hex(key, 16, "2b7e151628aed2a6abf7158809cf4f3c");
    hex(msg, 64, "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                 "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710");
    static const struct {
        size_t len;
        const char *tag;
    } v[] = {{0, "bb1d6929e95937287fa37d129b756746"},
             {16, "070a16b46b4d4144f79bdd9dd04a287c"},
             {40, "dfa66747de9ae63030ca32611497c827"},
             {64, "51f0bebf7e3b9d92fc49741779363cfe"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        hex(want, 16, v[i].tag);
        GT_ASSERT_OK(gt_aes128_cmac(tag, msg, v[i].len, key));
        assert_memory_equal(tag, want, 16);
    }
    hex(want, 16, v[1].tag);
    msg[15] ^= 1;
    GT_ASSERT_OK(gt_aes128_cmac(tag, msg, 16, key));
    assert_memory_not_equal(tag, want, 16);
    msg[15] ^= 1;
    key[0] ^= 0x80;
    GT_ASSERT_OK(gt_aes128_cmac(tag, msg, 16, key));
    assert_memory_not_equal(tag, want, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(rfc4493_vectors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
