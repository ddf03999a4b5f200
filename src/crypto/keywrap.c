// A 32-byte key wrapped to an X25519 public key (an ECIES/HPKE-base-mode shape from OpenSSL's
// parts): a fresh ephemeral key per wrap, KEK = HKDF-SHA256 over the shared secret with both
// public keys as salt, AES-256-GCM with the caller's AAD. Used to release a chunk key from the
// holder's enclave to one attested device only (docs/holder-enclave.md).
#include "internal.h"

#include <string.h>

static const char wrap_info[] = "gputravel key wrap v1";

// KEK for (ephemeral public, recipient public, shared secret); wipes nothing of its inputs.
static gt_err wrap_kek(uint8_t kek[GT_AEAD_KEY_BYTES], const uint8_t shared[GT_X25519_BYTES],
                       const uint8_t eph_pub[GT_X25519_BYTES],
                       const uint8_t recipient[GT_X25519_BYTES])
{
    uint8_t salt[2 * GT_X25519_BYTES];
    memcpy(salt, eph_pub, GT_X25519_BYTES);
    memcpy(salt + GT_X25519_BYTES, recipient, GT_X25519_BYTES);
    return gt_hkdf(GT_HASH_SHA256, kek, GT_AEAD_KEY_BYTES, shared, GT_X25519_BYTES, salt,
                   sizeof salt, (const uint8_t *)wrap_info, sizeof wrap_info - 1);
}

gt_err gt_x25519_wrap(uint8_t out[GT_KEYWRAP_BYTES], const uint8_t key[GT_AEAD_KEY_BYTES],
                      const uint8_t recipient[GT_X25519_BYTES], const uint8_t *aad,
                      size_t aad_len)
{
    uint8_t eph_sec[GT_X25519_BYTES], shared[GT_X25519_BYTES], kek[GT_AEAD_KEY_BYTES];
    gt_err err = GT_OK;
    size_t ct_len = 0;
    memset(out, 0, GT_KEYWRAP_BYTES);
    GT_TRY_GOTO(err, gt_x25519_keypair(out, eph_sec), done);
    GT_TRY_GOTO(err, gt_x25519_shared(shared, recipient, eph_sec), done);
    GT_TRY_GOTO(err, wrap_kek(kek, shared, out, recipient), done);
    // The KEK is new with every ephemeral key, so its one IV never repeats; random anyway.
    uint8_t *iv = out + GT_X25519_BYTES;
    GT_TRY_GOTO(err, gt_random_bytes(iv, GT_AEAD_IV_BYTES), done);
    GT_TRY_GOTO(err, gt_aead_seal(iv + GT_AEAD_IV_BYTES, GT_AEAD_KEY_BYTES + GT_AEAD_TAG_BYTES,
                                  &ct_len, key, GT_AEAD_KEY_BYTES, aad, aad_len, iv, kek),
                done);
done:
    if (!gt_is_ok(err)) {
        memset(out, 0, GT_KEYWRAP_BYTES);
    }
    gt_secure_zero(eph_sec, sizeof eph_sec);
    gt_secure_zero(shared, sizeof shared);
    gt_secure_zero(kek, sizeof kek);
    return err;
}

gt_err gt_x25519_unwrap(uint8_t key[GT_AEAD_KEY_BYTES], const uint8_t *wrapped, size_t len,
                        const uint8_t recipient_sec[GT_X25519_BYTES], const uint8_t *aad,
                        size_t aad_len)
{
    memset(key, 0, GT_AEAD_KEY_BYTES);
    GT_ENSURE(len == GT_KEYWRAP_BYTES, GT_E_FORMAT, "wrapped key: %zu bytes (%d)", len,
              GT_KEYWRAP_BYTES);
    uint8_t pub[GT_X25519_BYTES], shared[GT_X25519_BYTES], kek[GT_AEAD_KEY_BYTES];
    gt_err err = GT_OK;
    size_t pt_len = 0;
    GT_TRY_GOTO(err, gt_x25519_public(pub, recipient_sec), done);
    GT_TRY_GOTO(err, gt_x25519_shared(shared, wrapped, recipient_sec), done);
    GT_TRY_GOTO(err, wrap_kek(kek, shared, wrapped, pub), done);
    const uint8_t *iv = wrapped + GT_X25519_BYTES;
    err = gt_aead_open(key, GT_AEAD_KEY_BYTES, &pt_len, iv + GT_AEAD_IV_BYTES,
                       GT_AEAD_KEY_BYTES + GT_AEAD_TAG_BYTES, aad, aad_len, iv, kek);
    if (gt_is_ok(err) && pt_len != GT_AEAD_KEY_BYTES) {
        err = gt_errf(GT_E_AUTH, "wrapped key: wrong length");
    }
    if (!gt_is_ok(err)) {
        memset(key, 0, GT_AEAD_KEY_BYTES);
        err = gt_errf(GT_E_AUTH, "wrapped key: does not open for this recipient and binding");
    }
done:
    gt_secure_zero(shared, sizeof shared);
    gt_secure_zero(kek, sizeof kek);
    return err;
}
