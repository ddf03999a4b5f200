// crypto/: HMAC (RFC 4231 cases 1-2), HKDF (RFC 5869 cases 1-3, SHA-256), X25519 (RFC 7748
// §5.2 scalar multiplication incl. iterations, §6.1 Diffie-Hellman) and Ed25519 (RFC 8032
// §7.1 tests 1, 2, 3 and SHA(abc)), typed in as published; and Ed25519 keys and signature points
// of small order, which OpenSSL alone accepts, refused.
#include "testlib.h"

#include <gputravel/crypto.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include <stdbool.h>
#include <string.h>

static size_t unhex(uint8_t *out, size_t cap, const char *hex)
{
    size_t n = 0;
    GT_ASSERT_OK(gt_hex_decode(out, cap, &n, hex));
    return n;
}

static void hmac_rfc4231(void **state)
{
    (void)state;
    uint8_t key[20], out[64], want[64];
    memset(key, 0x0b, sizeof key);
    const char *hi = "Hi There";
    static const struct {
        gt_hash_alg alg;
        const char *tag;
    } rows[] = {
        {GT_HASH_SHA256, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {GT_HASH_SHA384, "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c"
                         "faea9ea9076ede7f4af152e8b2fa9cb6"},
        {GT_HASH_SHA512, "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
                         "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"},
    };
    for (size_t i = 0; i < 3; i++) {
        size_t n = unhex(want, sizeof want, rows[i].tag);
        GT_ASSERT_OK(gt_hmac(rows[i].alg, out, hi, strlen(hi), key, sizeof key));
        assert_memory_equal(out, want, n);
    }
    // Case 2: key "Jefe".
    const char *q = "what do ya want for nothing?";
    unhex(want, sizeof want, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    GT_ASSERT_OK(gt_hmac(GT_HASH_SHA256, out, q, strlen(q), (const uint8_t *)"Jefe", 4));
    assert_memory_equal(out, want, 32);
    GT_ASSERT_OK(gt_hmac(GT_HASH_SHA256, out, q, strlen(q), (const uint8_t *)"Jeff", 4));
    assert_memory_not_equal(out, want, 32);
    GT_ASSERT_CODE(gt_hmac((gt_hash_alg)5, out, q, 1, key, 1), GT_E_ARG);
}

static void hkdf_rfc5869(void **state)
{
    (void)state;
    uint8_t ikm[80], salt[80], info[80], okm[82], want[82];
    // Case 1.
    memset(ikm, 0x0b, 22);
    size_t salt_len = unhex(salt, sizeof salt, "000102030405060708090a0b0c");
    size_t info_len = unhex(info, sizeof info, "f0f1f2f3f4f5f6f7f8f9");
    unhex(want, sizeof want,
          "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
    GT_ASSERT_OK(gt_hkdf(GT_HASH_SHA256, okm, 42, ikm, 22, salt, salt_len, info, info_len));
    assert_memory_equal(okm, want, 42);
    // Case 2: 80-byte inputs 0x00.., 0x60.., 0xb0...
    for (int i = 0; i < 80; i++) {
        ikm[i] = (uint8_t)i;
        salt[i] = (uint8_t)(0x60 + i);
        info[i] = (uint8_t)(0xb0 + i);
    }
    unhex(want, sizeof want,
          "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
          "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
          "cc30c58179ec3e87c14c01d5c1f3434f1d87");
    GT_ASSERT_OK(gt_hkdf(GT_HASH_SHA256, okm, 82, ikm, 80, salt, 80, info, 80));
    assert_memory_equal(okm, want, 82);
    // Case 3: no salt, no info.
    memset(ikm, 0x0b, 22);
    unhex(want, sizeof want,
          "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8");
    GT_ASSERT_OK(gt_hkdf(GT_HASH_SHA256, okm, 42, ikm, 22, NULL, 0, NULL, 0));
    assert_memory_equal(okm, want, 42);
    // A different info gives a different key; SHA-384/512 work; limits are enforced.
    GT_ASSERT_OK(gt_hkdf(GT_HASH_SHA256, okm, 42, ikm, 22, NULL, 0, (const uint8_t *)"x", 1));
    assert_memory_not_equal(okm, want, 42);
    GT_ASSERT_OK(gt_hkdf(GT_HASH_SHA384, okm, 48, ikm, 22, NULL, 0, NULL, 0));
    GT_ASSERT_OK(gt_hkdf(GT_HASH_SHA512, okm, 64, ikm, 22, NULL, 0, NULL, 0));
    uint8_t big[255 * 32 + 1];
    GT_ASSERT_OK(gt_hkdf(GT_HASH_SHA256, big, 255 * 32, ikm, 22, NULL, 0, NULL, 0));
    GT_ASSERT_CODE(gt_hkdf(GT_HASH_SHA256, big, 255 * 32 + 1, ikm, 22, NULL, 0, NULL, 0),
                   GT_E_LIMIT);
    GT_ASSERT_CODE(gt_hkdf(GT_HASH_SHA256, big, 0, ikm, 22, NULL, 0, NULL, 0), GT_E_LIMIT);
}

static void x25519_rfc7748_scalar_mult(void **state)
{
    (void)state;
    static const struct {
        const char *k, *u, *out;
    } rows[] = {
        {"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
         "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
         "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
        {"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
         "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
         "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
    };
    for (size_t i = 0; i < 2; i++) {
        uint8_t k[32], u[32], want[32], out[32];
        GT_ASSERT_OK(gt_hex_decode_exact(k, 32, rows[i].k));
        GT_ASSERT_OK(gt_hex_decode_exact(u, 32, rows[i].u));
        GT_ASSERT_OK(gt_hex_decode_exact(want, 32, rows[i].out));
        GT_ASSERT_OK(gt_x25519_shared(out, u, k));
        assert_memory_equal(out, want, 32);
    }
    // Iterated: k = u = 9; each round k' = X25519(k, u), u' = k. After 1 and 1000 rounds.
    uint8_t k[32] = {9}, u[32] = {9}, r[32], want1[32], want1000[32];
    GT_ASSERT_OK(gt_hex_decode_exact(
        want1, 32, "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"));
    GT_ASSERT_OK(gt_hex_decode_exact(
        want1000, 32, "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51"));
    for (int it = 1; it <= 1000; it++) {
        GT_ASSERT_OK(gt_x25519_shared(r, u, k));
        memcpy(u, k, 32);
        memcpy(k, r, 32);
        if (it == 1) {
            assert_memory_equal(k, want1, 32);
        }
    }
    assert_memory_equal(k, want1000, 32);
}

static void x25519_rfc7748_dh(void **state)
{
    (void)state;
    uint8_t a_sec[32], a_pub[32], b_sec[32], b_pub[32], want[32], pub[32], s1[32], s2[32];
    GT_ASSERT_OK(gt_hex_decode_exact(
        a_sec, 32, "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"));
    GT_ASSERT_OK(gt_hex_decode_exact(
        a_pub, 32, "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"));
    GT_ASSERT_OK(gt_hex_decode_exact(
        b_sec, 32, "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"));
    GT_ASSERT_OK(gt_hex_decode_exact(
        b_pub, 32, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"));
    GT_ASSERT_OK(gt_hex_decode_exact(
        want, 32, "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"));
    GT_ASSERT_OK(gt_x25519_public(pub, a_sec));
    assert_memory_equal(pub, a_pub, 32);
    GT_ASSERT_OK(gt_x25519_public(pub, b_sec));
    assert_memory_equal(pub, b_pub, 32);
    GT_ASSERT_OK(gt_x25519_shared(s1, b_pub, a_sec));
    GT_ASSERT_OK(gt_x25519_shared(s2, a_pub, b_sec));
    assert_memory_equal(s1, want, 32);
    assert_memory_equal(s2, want, 32);

    // Fresh key pairs agree with each other.
    uint8_t p1[32], k1[32], p2[32], k2[32];
    GT_ASSERT_OK(gt_x25519_keypair(p1, k1));
    GT_ASSERT_OK(gt_x25519_keypair(p2, k2));
    assert_memory_not_equal(k1, k2, 32);
    GT_ASSERT_OK(gt_x25519_public(pub, k1));
    assert_memory_equal(pub, p1, 32);
    GT_ASSERT_OK(gt_x25519_shared(s1, p2, k1));
    GT_ASSERT_OK(gt_x25519_shared(s2, p1, k2));
    assert_memory_equal(s1, s2, 32);

    // Small-order peer keys (u = 0, u = 1, a point of order 8, u = p - 1) give an all-zero
    // secret: refused, output zeroed.
    static const char *small[] = {
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        uint8_t peer[32], out[32];
        GT_ASSERT_OK(gt_hex_decode_exact(peer, 32, small[i]));
        memset(out, 0x5a, sizeof out);
        GT_ASSERT_CODE(gt_x25519_shared(out, peer, a_sec), GT_E_AUTH);
        uint8_t zero[32] = {0};
        assert_memory_equal(out, zero, 32);
    }
    gt_secure_zero(k1, sizeof k1);
    gt_secure_zero(k2, sizeof k2);
}

typedef struct {
    const char *sec, *pub, *msg, *sig;
} ed_row;

static const ed_row ed_rows[] = {
    {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
    {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
    // TEST SHA(abc): the message is SHA-512("abc").
    {"833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
     "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
     "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
     "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
     "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"},
};

static void ed25519_rfc8032(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ed_rows / sizeof ed_rows[0]; i++) {
        uint8_t sec[32], pub[32], msg[64], want[64], sig[64], got_pub[32];
        GT_ASSERT_OK(gt_hex_decode_exact(sec, 32, ed_rows[i].sec));
        GT_ASSERT_OK(gt_hex_decode_exact(pub, 32, ed_rows[i].pub));
        size_t mlen = unhex(msg, sizeof msg, ed_rows[i].msg);
        GT_ASSERT_OK(gt_hex_decode_exact(want, 64, ed_rows[i].sig));
        GT_ASSERT_OK(gt_ed25519_public(got_pub, sec));
        assert_memory_equal(got_pub, pub, 32);
        GT_ASSERT_OK(gt_ed25519_public_check(pub));
        GT_ASSERT_OK(gt_ed25519_sign(sig, msg, mlen, sec));
        assert_memory_equal(sig, want, 64);
        GT_ASSERT_OK(gt_ed25519_verify(want, msg, mlen, pub));

        // Wrong signatures: every 5th bit flipped, another message, another key.
        for (size_t bit = 0; bit < 512; bit += 5) {
            uint8_t bad[64];
            memcpy(bad, want, 64);
            bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            GT_ASSERT_CODE(gt_ed25519_verify(bad, msg, mlen, pub), GT_E_AUTH);
        }
        uint8_t other[65];
        memcpy(other, msg, mlen);
        other[mlen] = 0;
        GT_ASSERT_CODE(gt_ed25519_verify(want, other, mlen + 1, pub), GT_E_AUTH);
        if (mlen > 0) {
            other[0] ^= 1;
            GT_ASSERT_CODE(gt_ed25519_verify(want, other, mlen, pub), GT_E_AUTH);
        }
        uint8_t wrong_pub[32];
        GT_ASSERT_OK(gt_hex_decode_exact(wrong_pub, 32,
                                         ed_rows[(i + 1) % 4].pub));
        GT_ASSERT_CODE(gt_ed25519_verify(want, msg, mlen, wrong_pub), GT_E_AUTH);
    }
    // A fresh key pair signs and verifies.
    uint8_t pub[32], sec[32], sig[64], pub2[32];
    GT_ASSERT_OK(gt_ed25519_keypair(pub, sec));
    GT_ASSERT_OK(gt_ed25519_public(pub2, sec));
    assert_memory_equal(pub, pub2, 32);
    GT_ASSERT_OK(gt_ed25519_sign(sig, "hello", 5, sec));
    GT_ASSERT_OK(gt_ed25519_verify(sig, "hello", 5, pub));
    GT_ASSERT_CODE(gt_ed25519_verify(sig, "hellp", 5, pub), GT_E_AUTH);
    gt_secure_zero(sec, sizeof sec);
}

// Every encoding of a point of small order: the eight points, the non-canonical y + p of those
// with y < 19, and x = 0 written with its sign bit set. tests/oracle/ed25519_torsion.py derives
// the points from the curve and checks (CTest crypto/ed25519_torsion_oracle) that this list
// holds every one of them.
static const char *const small_order_points[] = {
    "0100000000000000000000000000000000000000000000000000000000000000",  // identity
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  //   y = p + 1
    "0100000000000000000000000000000000000000000000000000000000000080",  //   sign bit set
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  // order 2
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",  //   sign bit set
    "0000000000000000000000000000000000000000000000000000000000000000",  // order 4
    "0000000000000000000000000000000000000000000000000000000000000080",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  //   y = p
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",  // order 8
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
};

// What OpenSSL alone says of sig under pub (no gputravel check in between).
static bool openssl_alone_verifies(const uint8_t sig[64], const char *msg, const uint8_t pub[32])
{
    EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
    EVP_MD_CTX *mctx = EVP_MD_CTX_new();
    bool ok = pkey != NULL && mctx != NULL &&
              EVP_DigestVerifyInit(mctx, NULL, NULL, NULL, pkey) == 1 &&
              EVP_DigestVerify(mctx, sig, 64, (const uint8_t *)msg, strlen(msg)) == 1;
    ERR_clear_error();
    EVP_MD_CTX_free(mctx);
    EVP_PKEY_free(pkey);
    return ok;
}

// The attack: a key of small order A and a signature R = a small-order point, S = 0. Then
// [S]B = R + [k]A holds whenever [k]A = R, for the identity as A and R every time, whatever the
// message: one "signature" for all ledger heads, manifests and checkpoints. Each key is refused
// by gt_ed25519_public_check and no such signature verifies.
static void ed25519_small_order_refused(void **state)
{
    (void)state;
    const size_t n = sizeof small_order_points / sizeof small_order_points[0];
    static const char *const msgs[] = {"ledger head of h0", "ledger head of h1"};
    size_t forgeries_openssl_takes = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t pub[32];
        GT_ASSERT_OK(gt_hex_decode_exact(pub, 32, small_order_points[i]));
        GT_ASSERT_CODE(gt_ed25519_public_check(pub), GT_E_FORMAT);
        for (size_t j = 0; j < n; j++) {
            uint8_t sig[64] = {0};
            GT_ASSERT_OK(gt_hex_decode_exact(sig, 32, small_order_points[j]));
            for (size_t m = 0; m < 2; m++) {
                forgeries_openssl_takes += openssl_alone_verifies(sig, msgs[m], pub);
                GT_ASSERT_CODE(gt_ed25519_verify(sig, msgs[m], strlen(msgs[m]), pub), GT_E_AUTH);
            }
        }
    }
    // Informative: how exposed the bare library is (OpenSSL 3.0 takes the identity forgery).
    print_message("OpenSSL alone accepts %zu of the %zu forgeries\n", forgeries_openssl_takes,
                  2 * n * n);

    // A real key passes; its genuine signature with R swapped for the identity does not.
    uint8_t pub[32], sec[32], sig[64];
    GT_ASSERT_OK(gt_ed25519_keypair(pub, sec));
    GT_ASSERT_OK(gt_ed25519_public_check(pub));
    GT_ASSERT_OK(gt_ed25519_sign(sig, "m", 1, sec));
    GT_ASSERT_OK(gt_ed25519_verify(sig, "m", 1, pub));
    GT_ASSERT_OK(gt_hex_decode_exact(sig, 32, small_order_points[0]));
    GT_ASSERT_CODE(gt_ed25519_verify(sig, "m", 1, pub), GT_E_AUTH);
    gt_secure_zero(sec, sizeof sec);

    // Every non-canonical y (p .. 2^255 - 1, either sign) is refused, small order or not.
    for (unsigned low = 0xed; low <= 0xff; low++) {
        for (unsigned sign = 0; sign < 2; sign++) {
            uint8_t enc[32];
            memset(enc, 0xff, sizeof enc);
            enc[0] = (uint8_t)low;
            enc[31] = sign ? 0xff : 0x7f;
            gt_err e = gt_ed25519_public_check(enc);
            assert_int_equal(e.code, GT_E_FORMAT);
        }
    }
    // y = p - 2 is canonical and of no small-order point: it passes.
    uint8_t below_p[32];
    memset(below_p, 0xff, sizeof below_p);
    below_p[0] = 0xeb;
    below_p[31] = 0x7f;
    GT_ASSERT_OK(gt_ed25519_public_check(below_p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hmac_rfc4231),
        cmocka_unit_test(hkdf_rfc5869),
        cmocka_unit_test(x25519_rfc7748_scalar_mult),
        cmocka_unit_test(x25519_rfc7748_dh),
        cmocka_unit_test(ed25519_rfc8032),
        cmocka_unit_test(ed25519_small_order_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
