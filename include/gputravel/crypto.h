// gputravel/crypto.h: thin wrappers over OpenSSL 3. No primitive is implemented here.
//
// Contracts (libsodium style): outputs first, each buffer followed by its length, keys last;
// fixed sizes in the types. A (key, IV) pair is never used twice: these functions never choose
// IVs; callers build them (sealed chunks: random per chunk key; sessions: direction || counter).
// Any authentication failure returns GT_E_AUTH with no detail and leaves no plaintext behind.
// Secret outputs (keys, shared secrets) are the caller's to wipe with gt_secure_zero.
#ifndef GPUTRAVEL_CRYPTO_H
#define GPUTRAVEL_CRYPTO_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define GT_AEAD_KEY_BYTES 32
#define GT_AEAD_IV_BYTES 12
#define GT_AEAD_TAG_BYTES 16
#define GT_SHA256_BYTES 32
#define GT_SHA384_BYTES 48
#define GT_SHA512_BYTES 64
#define GT_X25519_BYTES 32
#define GT_ED25519_PUBLIC_BYTES 32
#define GT_ED25519_SECRET_BYTES 32  // the RFC 8032 seed
#define GT_ED25519_SIG_BYTES 64

// ---- randomness -----------------------------------------------------------------------------
GT_MUST_USE gt_err gt_random_bytes(void *out, size_t n);

// ---- hashes ---------------------------------------------------------------------------------
typedef enum { GT_HASH_SHA256, GT_HASH_SHA384, GT_HASH_SHA512 } gt_hash_alg;
size_t gt_hash_size(gt_hash_alg alg);
GT_MUST_USE gt_err gt_hash(gt_hash_alg alg, uint8_t *out, const void *data, size_t len);
// Incremental hashing; gt_hash_ctx is opaque (an EVP_MD_CTX underneath).
typedef struct gt_hash_ctx gt_hash_ctx;
GT_MUST_USE gt_err gt_hash_new(gt_hash_ctx **ctx, gt_hash_alg alg);
GT_MUST_USE gt_err gt_hash_update(gt_hash_ctx *ctx, const void *data, size_t len);
GT_MUST_USE gt_err gt_hash_final(gt_hash_ctx *ctx, uint8_t *out);  // out: gt_hash_size bytes
void gt_hash_free(gt_hash_ctx *ctx);
// SHA-256/384/512 of a whole file, streamed.
GT_MUST_USE gt_err gt_hash_file(gt_hash_alg alg, uint8_t *out, const char *path);

// ---- HMAC and HKDF (RFC 5869) ---------------------------------------------------------------
GT_MUST_USE gt_err gt_hmac(gt_hash_alg alg, uint8_t *out, const void *data, size_t len,
                           const uint8_t *key, size_t key_len);
GT_MUST_USE gt_err gt_hkdf(gt_hash_alg alg, uint8_t *out, size_t out_len, const uint8_t *ikm,
                           size_t ikm_len, const uint8_t *salt, size_t salt_len,
                           const uint8_t *info, size_t info_len);

// ---- AES-128-CMAC (RFC 4493; SGX key derivation and report MACs) ---------------------------
#define GT_AES128_KEY_BYTES 16
#define GT_CMAC_BYTES 16
GT_MUST_USE gt_err gt_aes128_cmac(uint8_t out[GT_CMAC_BYTES], const void *data, size_t len,
                                  const uint8_t key[GT_AES128_KEY_BYTES]);

// ---- AES-256-GCM, one-shot ------------------------------------------------------------------
// Seals pt into ct (ct_cap >= pt_len + GT_AEAD_TAG_BYTES; the tag is appended).
GT_MUST_USE gt_err gt_aead_seal(uint8_t *ct, size_t ct_cap, size_t *ct_len, const uint8_t *pt,
                                size_t pt_len, const uint8_t *aad, size_t aad_len,
                                const uint8_t iv[GT_AEAD_IV_BYTES],
                                const uint8_t key[GT_AEAD_KEY_BYTES]);
// Opens ct (tag last) into pt. Any failure: pt zeroed, *pt_len = 0, GT_E_AUTH with no detail
// (except pt_cap < ct_len - GT_AEAD_TAG_BYTES, a caller bug: GT_E_LIMIT, pt zeroed too).
GT_MUST_USE gt_err gt_aead_open(uint8_t *pt, size_t pt_cap, size_t *pt_len, const uint8_t *ct,
                                size_t ct_len, const uint8_t *aad, size_t aad_len,
                                const uint8_t iv[GT_AEAD_IV_BYTES],
                                const uint8_t key[GT_AEAD_KEY_BYTES]);

// ---- AES-256-GCM under one key, many messages -----------------------------------------------
// The key schedule is made once (gt_aead_keyed_new) and each message sets only its IV: for a
// channel of many small messages, where the one-shot calls' per-call setup costs more than the
// cipher (enclave ring: about 2.6k of 3k cycles for a 30-byte message). One direction per object
// (encrypt: seal only; decrypt: open only). Same outputs and failure rules as the one-shot calls.
typedef struct gt_aead_keyed gt_aead_keyed;
GT_MUST_USE gt_err gt_aead_keyed_new(gt_aead_keyed **k, bool encrypt,
                                     const uint8_t key[GT_AEAD_KEY_BYTES]);
GT_MUST_USE gt_err gt_aead_keyed_seal(gt_aead_keyed *k, uint8_t *ct, size_t ct_cap,
                                      size_t *ct_len, const uint8_t *pt, size_t pt_len,
                                      const uint8_t *aad, size_t aad_len,
                                      const uint8_t iv[GT_AEAD_IV_BYTES]);
GT_MUST_USE gt_err gt_aead_keyed_open(gt_aead_keyed *k, uint8_t *pt, size_t pt_cap,
                                      size_t *pt_len, const uint8_t *ct, size_t ct_len,
                                      const uint8_t *aad, size_t aad_len,
                                      const uint8_t iv[GT_AEAD_IV_BYTES]);
void gt_aead_keyed_free(gt_aead_keyed *k);  // wipes the key schedule; NULL is fine
// The same with the tag kept apart from the text, and in place allowed (out == in): for a
// buffer with no room after it for a tag (the pager's frames). seal: out gets the ciphertext,
// tag its tag. open: out gets the plaintext only if tag matches; on any failure out is zeroed
// and GT_E_AUTH comes back with no detail.
GT_MUST_USE gt_err gt_aead_keyed_seal_detached(gt_aead_keyed *k, uint8_t *out, const uint8_t *in,
                                               size_t len, const uint8_t *aad, size_t aad_len,
                                               const uint8_t iv[GT_AEAD_IV_BYTES],
                                               uint8_t tag[GT_AEAD_TAG_BYTES]);
GT_MUST_USE gt_err gt_aead_keyed_open_detached(gt_aead_keyed *k, uint8_t *out, const uint8_t *in,
                                               size_t len, const uint8_t *aad, size_t aad_len,
                                               const uint8_t iv[GT_AEAD_IV_BYTES],
                                               const uint8_t tag[GT_AEAD_TAG_BYTES]);

// ---- AES-256-GCM, streaming -----------------------------------------------------------------
// For data larger than memory. Decryption releases plaintext before the tag is checked
// (OpenSSL's streaming GCM): callers must stage it (temp file / protected buffer) and release it
// only after gt_aead_stream_final returns OK. update may be called with out == in (in place).
typedef struct gt_aead_stream gt_aead_stream;
GT_MUST_USE gt_err gt_aead_stream_new(gt_aead_stream **s, bool encrypt,
                                      const uint8_t *aad, size_t aad_len,
                                      const uint8_t iv[GT_AEAD_IV_BYTES],
                                      const uint8_t key[GT_AEAD_KEY_BYTES]);
GT_MUST_USE gt_err gt_aead_stream_update(gt_aead_stream *s, uint8_t *out, const uint8_t *in,
                                         size_t len);
// Encrypt: writes the tag. Decrypt: checks it (GT_E_AUTH on mismatch).
GT_MUST_USE gt_err gt_aead_stream_final(gt_aead_stream *s, uint8_t tag[GT_AEAD_TAG_BYTES]);
void gt_aead_stream_free(gt_aead_stream *s);  // wipes the key schedule

// ---- X25519 (RFC 7748) ----------------------------------------------------------------------
GT_MUST_USE gt_err gt_x25519_keypair(uint8_t pub[GT_X25519_BYTES], uint8_t sec[GT_X25519_BYTES]);
GT_MUST_USE gt_err gt_x25519_public(uint8_t pub[GT_X25519_BYTES],
                                    const uint8_t sec[GT_X25519_BYTES]);
// Fails (GT_E_AUTH) on an all-zero shared secret (small-order peer key).
GT_MUST_USE gt_err gt_x25519_shared(uint8_t shared[GT_X25519_BYTES],
                                    const uint8_t peer_pub[GT_X25519_BYTES],
                                    const uint8_t sec[GT_X25519_BYTES]);

// A 32-byte key wrapped to an X25519 recipient (src/crypto/keywrap.c): ephemeral public 32 |
// IV 12 | AES-256-GCM(key) 32 + tag 16, KEK = HKDF-SHA256(X25519, salt = ephemeral || recipient
// public). The AAD binds what the key is for; unwrap fails (GT_E_AUTH) for any other recipient,
// AAD or changed byte, and then zeroes key.
#define GT_KEYWRAP_BYTES (GT_X25519_BYTES + GT_AEAD_IV_BYTES + GT_AEAD_KEY_BYTES + GT_AEAD_TAG_BYTES)
GT_MUST_USE gt_err gt_x25519_wrap(uint8_t out[GT_KEYWRAP_BYTES],
                                  const uint8_t key[GT_AEAD_KEY_BYTES],
                                  const uint8_t recipient[GT_X25519_BYTES], const uint8_t *aad,
                                  size_t aad_len);
GT_MUST_USE gt_err gt_x25519_unwrap(uint8_t key[GT_AEAD_KEY_BYTES], const uint8_t *wrapped,
                                    size_t len, const uint8_t recipient_sec[GT_X25519_BYTES],
                                    const uint8_t *aad, size_t aad_len);

// ---- Ed25519 (RFC 8032) ---------------------------------------------------------------------
GT_MUST_USE gt_err gt_ed25519_keypair(uint8_t pub[GT_ED25519_PUBLIC_BYTES],
                                      uint8_t sec[GT_ED25519_SECRET_BYTES]);
GT_MUST_USE gt_err gt_ed25519_public(uint8_t pub[GT_ED25519_PUBLIC_BYTES],
                                     const uint8_t sec[GT_ED25519_SECRET_BYTES]);
GT_MUST_USE gt_err gt_ed25519_sign(uint8_t sig[GT_ED25519_SIG_BYTES], const void *msg,
                                   size_t len, const uint8_t sec[GT_ED25519_SECRET_BYTES]);
// GT_E_FORMAT for a key no signature should be checked under: a point of small order (under
// which a forged signature verifies for any message) or a non-canonical encoding.
GT_MUST_USE gt_err gt_ed25519_public_check(const uint8_t pub[GT_ED25519_PUBLIC_BYTES]);
// GT_E_AUTH when the signature does not verify, and always under a key public_check refuses or
// with an R of small order.
GT_MUST_USE gt_err gt_ed25519_verify(const uint8_t sig[GT_ED25519_SIG_BYTES], const void *msg,
                                     size_t len, const uint8_t pub[GT_ED25519_PUBLIC_BYTES]);

// ---- ECDSA over P-256 / P-384 ---------------------------------------------------------------
typedef enum { GT_EC_P256, GT_EC_P384 } gt_ec_curve;
size_t gt_ec_coord_bytes(gt_ec_curve curve);  // 32 or 48
#define GT_P384_XY_BYTES 96  // a P-384 public point x || y (sim roots, SNP VEK, NVIDIA device key)
// Public key as the raw affine point x || y (big-endian coordinates, as in SGX/TDX quotes).
// Signature raw r || s (big-endian, coord_bytes each) or DER. digest_alg hashes msg first.
GT_MUST_USE gt_err gt_ecdsa_verify_raw(gt_ec_curve curve, gt_hash_alg digest_alg,
                                       const uint8_t *sig_rs, size_t sig_len, const void *msg,
                                       size_t msg_len, const uint8_t *pub_xy, size_t pub_len);
GT_MUST_USE gt_err gt_ecdsa_verify_der(gt_ec_curve curve, gt_hash_alg digest_alg,
                                       const uint8_t *sig_der, size_t sig_len, const void *msg,
                                       size_t msg_len, const uint8_t *pub_xy, size_t pub_len);

// Opaque private/public keys of any OpenSSL type (EC P-256/P-384, Ed25519, RSA) for signing
// evidence and verifying against certificates.
typedef struct gt_pkey gt_pkey;
GT_MUST_USE gt_err gt_pkey_generate_ec(gt_pkey **key, gt_ec_curve curve);
// PEM (PKCS#8 private or SubjectPublicKeyInfo public); files written mode 0600 for private keys.
GT_MUST_USE gt_err gt_pkey_load_pem(gt_pkey **key, const char *path, bool private_key);
GT_MUST_USE gt_err gt_pkey_save_pem(const gt_pkey *key, const char *path, bool private_key);
// The same from bytes in memory (a public key only: untrusted bytes need no file to be read).
// GT_E_FORMAT when they hold no PEM public key; GT_E_LIMIT beyond GT_PKEY_PEM_MAX_BYTES.
#define GT_PKEY_PEM_MAX_BYTES (64u * 1024)
GT_MUST_USE gt_err gt_pkey_parse_pem_public(gt_pkey **key, const void *pem, size_t len);
// Raw uncompressed point x || y of an EC key.
GT_MUST_USE gt_err gt_pkey_ec_public_xy(const gt_pkey *key, uint8_t *out, size_t cap,
                                        size_t *len);
// ECDSA sign (DER signature) / verify with any key type's default scheme (Ed25519 ignores
// digest_alg). sign replaces sig's contents (sig->len = signature length).
GT_MUST_USE gt_err gt_pkey_sign(const gt_pkey *key, gt_hash_alg digest_alg, gt_buf *sig,
                                const void *msg, size_t len);
GT_MUST_USE gt_err gt_pkey_verify(const gt_pkey *key, gt_hash_alg digest_alg, const uint8_t *sig,
                                  size_t sig_len, const void *msg, size_t len);
void gt_pkey_free(gt_pkey *key);
// A private key as DER (PKCS#8 / traditional, what i2d_PrivateKey writes) in memory, for keys
// kept sealed rather than in a file: out is replaced (wipe it: gt_buf_free). Parse: the bytes
// must be exactly one key (GT_E_FORMAT otherwise).
GT_MUST_USE gt_err gt_pkey_private_der(const gt_pkey *key, gt_buf *out);
GT_MUST_USE gt_err gt_pkey_parse_private_der(gt_pkey **key, const uint8_t *der, size_t len);
// ECDSA signature as raw r || s, each coord_bytes big-endian (SGX quotes: P-256, 32).
GT_MUST_USE gt_err gt_ecdsa_sign_raw(const gt_pkey *key, gt_hash_alg digest_alg, uint8_t *sig_rs,
                                     size_t coord_bytes, const void *msg, size_t len);

// ---- RSA with little-endian integers (SGX SIGSTRUCTs) ---------------------------------------
// Moduli, signatures and quotients are len-byte little-endian integers, as a SIGSTRUCT stores
// them. PKCS#1 v1.5 with a SHA-256 DigestInfo; the digest is computed by the caller.
#define GT_RSA3072_BYTES 384
// GT_E_AUTH when sig is not a valid signature of digest under (n, e), including sig >= n.
GT_MUST_USE gt_err gt_rsa_le_verify_sha256(const uint8_t *sig_le, const uint8_t *n_le, size_t len,
                                           uint32_t e, const uint8_t digest[GT_SHA256_BYTES]);
// q1 = floor(s^2 / n) and q2 = floor((s^3 - q1*s*n) / n) (the SDM's EINIT helpers), len bytes
// each. GT_E_ARG unless 0 <= s < n.
GT_MUST_USE gt_err gt_rsa_le_q1q2(uint8_t *q1_le, uint8_t *q2_le, const uint8_t *sig_le,
                                  const uint8_t *n_le, size_t len);
// An RSA key's modulus (len bytes; GT_E_LIMIT if it does not fit), public exponent (UINT64_MAX
// if above 64 bits) and modulus size in bits. GT_E_ARG for a key of another type.
GT_MUST_USE gt_err gt_pkey_rsa_public_le(const gt_pkey *key, uint8_t *n_le, size_t len,
                                         uint64_t *e, unsigned *bits);
// Signs digest with an RSA private key; len must be the modulus size in bytes.
GT_MUST_USE gt_err gt_pkey_rsa_sign_sha256_le(const gt_pkey *key,
                                              const uint8_t digest[GT_SHA256_BYTES],
                                              uint8_t *sig_le, size_t len);

// ---- X.509 ----------------------------------------------------------------------------------
// A certificate chain check at a given time (evidence collateral expires; --at sets the time).
typedef struct gt_x509 gt_x509;
GT_MUST_USE gt_err gt_x509_parse_der(gt_x509 **cert, const uint8_t *der, size_t len);
// Parses every certificate of a PEM bundle, in order; *count set; caller frees each and the array.
GT_MUST_USE gt_err gt_x509_parse_pem_all(gt_x509 ***certs, size_t *count, const char *pem,
                                         size_t len);
void gt_x509_free(gt_x509 *cert);
// The subject public key (caller frees).
GT_MUST_USE gt_err gt_x509_public_key(const gt_x509 *cert, gt_pkey **key);
// Verifies leaf -> intermediates... -> a trusted root at time `at` (seconds since the epoch),
// optionally against CRLs (DER or PEM bytes). GT_E_AUTH with a reason on failure: bad signature,
// expired or not yet valid, revoked, or no path to a root. With CRLs, each certificate whose
// issuer has a CRL among them is checked (signature, lastUpdate/nextUpdate at `at`, serial); a
// certificate whose issuer has none is not (AMD's ARK CRL covers the ASK, nothing the VCEK);
// a CRL whose issuer is not a CA of the verified chain fails the call (GT_E_AUTH).
typedef struct {
    const gt_x509 *const *intermediates;
    size_t intermediate_count;
    const gt_x509 *const *roots;
    size_t root_count;
    const gt_span *crls;
    size_t crl_count;
    int64_t at;
} gt_x509_verify_params;
GT_MUST_USE gt_err gt_x509_verify_chain(const gt_x509 *leaf, const gt_x509_verify_params *p);
// The DER bytes of an extension's value (OCTET STRING contents) by dotted OID; GT_E_NOTFOUND.
GT_MUST_USE gt_err gt_x509_extension(const gt_x509 *cert, const char *oid, gt_span *value);
// Subject common name, for messages.
void gt_x509_subject_cn(const gt_x509 *cert, char *out, size_t cap);

#endif
