// crypto/: SHA-2, random bytes, ECDSA P-256/P-384 verification (raw and DER) and gt_pkey.
// Known answers: FIPS 180-2 "abc" digests; RFC 6979 appendix A.2.5 (P-256) and A.2.6 (P-384)
// deterministic signatures, typed in as published.
#include "testlib.h"

#include <gputravel/crypto.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static size_t unhex(uint8_t *out, size_t cap, const char *hex)
{
    size_t n = 0;
    GT_ASSERT_OK(gt_hex_decode(out, cap, &n, hex));
    return n;
}

// ---- hashes ---------------------------------------------------------------------------------

static void hash_known_answers(void **state)
{
    (void)state;
    static const struct {
        gt_hash_alg alg;
        const char *msg;
        const char *digest;
    } rows[] = {
        {GT_HASH_SHA256, "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {GT_HASH_SHA256, "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {GT_HASH_SHA384, "abc",
         "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed"
         "8086072ba1e7cc2358baeca134c825a7"},
        {GT_HASH_SHA512, "abc",
         "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
         "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint8_t want[64], got[64], inc[64];
        size_t n = unhex(want, sizeof want, rows[i].digest);
        assert_int_equal(n, gt_hash_size(rows[i].alg));
        GT_ASSERT_OK(gt_hash(rows[i].alg, got, rows[i].msg, strlen(rows[i].msg)));
        assert_memory_equal(got, want, n);

        // Incremental, one byte at a time, gives the same digest.
        gt_hash_ctx *ctx = NULL;
        GT_ASSERT_OK(gt_hash_new(&ctx, rows[i].alg));
        for (size_t j = 0; rows[i].msg[j] != '\0'; j++) {
            GT_ASSERT_OK(gt_hash_update(ctx, rows[i].msg + j, 1));
        }
        GT_ASSERT_OK(gt_hash_final(ctx, inc));
        gt_hash_free(ctx);
        assert_memory_equal(inc, want, n);
    }
    assert_int_equal(gt_hash_size((gt_hash_alg)99), 0);
    gt_hash_ctx *bad = NULL;
    GT_ASSERT_CODE(gt_hash_new(&bad, (gt_hash_alg)99), GT_E_ARG);
    assert_null(bad);
}

static void hash_file_matches_one_shot(void **state)
{
    (void)state;
    char dir[4096], path[4200];
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/blob", dir);
    // 2.5 MiB: more than one read chunk.
    size_t len = (5u << 20) / 2;
    uint8_t *data = malloc(len);
    assert_non_null(data);
    for (size_t i = 0; i < len; i++) {
        data[i] = (uint8_t)(i * 131 + (i >> 9));
    }
    GT_ASSERT_OK(gt_file_write_atomic(path, data, len, 0600));
    const gt_hash_alg algs[] = {GT_HASH_SHA256, GT_HASH_SHA384, GT_HASH_SHA512};
    for (size_t a = 0; a < 3; a++) {
        uint8_t want[64], got[64];
        GT_ASSERT_OK(gt_hash(algs[a], want, data, len));
        GT_ASSERT_OK(gt_hash_file(algs[a], got, path));
        assert_memory_equal(got, want, gt_hash_size(algs[a]));
    }
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/missing", dir);
    uint8_t out[32];
    GT_ASSERT_CODE(gt_hash_file(GT_HASH_SHA256, out, missing), GT_E_IO);
    free(data);
    gt_test_rmtree(dir);
}

static void random_bytes_differ(void **state)
{
    (void)state;
    uint8_t a[64] = {0}, b[64] = {0}, zero[64] = {0};
    GT_ASSERT_OK(gt_random_bytes(a, sizeof a));
    GT_ASSERT_OK(gt_random_bytes(b, sizeof b));
    assert_memory_not_equal(a, b, sizeof a);
    assert_memory_not_equal(a, zero, sizeof a);
    GT_ASSERT_OK(gt_random_bytes(a, 0));
}

// ---- ECDSA known answers (RFC 6979 A.2.5 / A.2.6) -------------------------------------------

typedef struct {
    gt_ec_curve curve;
    gt_hash_alg hash;
    const char *pub_xy;
    const char *msg;
    const char *r;
    const char *s;
} ecdsa_row;

#define P256_UX "60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6"
#define P256_UY "7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299"
#define P384_UX                                                                         \
    "EC3A4E415B4E19A4568618029F427FA5DA9A8BC4AE92E02E06AAE5286B300C64DEF8F0EA9055866064A2" \
    "54515480BC13"
#define P384_UY                                                                         \
    "8015D9B72D7D57244EA8EF9AC0C621896708A59367F9DFB9F54CA84B3F1C9DB1288B231C3AE0D4FE7344" \
    "FD2533264720"

static const ecdsa_row ecdsa_rows[] = {
    {GT_EC_P256, GT_HASH_SHA256, P256_UX P256_UY, "sample",
     "EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716",
     "F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"},
    {GT_EC_P256, GT_HASH_SHA256, P256_UX P256_UY, "test",
     "F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367",
     "019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083"},
    {GT_EC_P384, GT_HASH_SHA384, P384_UX P384_UY, "sample",
     "94EDBB92A5ECB8AAD4736E56C691916B3F88140666CE9FA73D64C4EA95AD133C81A648152E44ACF96E36DD1E80FABE46",
     "99EF4AEB15F178CEA1FE40DB2603138F130E740A19624526203B6351D0A3A94FA329C145786E679E7B82C71A38628AC8"},
    {GT_EC_P384, GT_HASH_SHA384, P384_UX P384_UY, "test",
     "8203B63D3C853E8D77227FB377BCF7B7B772E97892A80F36AB775D509D7A5FEB0542A7F0812998DA8F1DD3CA3CF023DB",
     "DDD0760448D42D8A43AF45AF836FCE4DE8BE06B485E9B61B827C2F13173923E06A739F040649A667BF3B828246BAA5A5"},
};

// DER INTEGER from a big-endian magnitude (minimal: strip zeros, 0x00 before a high bit).
static size_t der_int(uint8_t *out, const uint8_t *v, size_t n)
{
    while (n > 1 && v[0] == 0) {
        v++;
        n--;
    }
    size_t pad = (v[0] & 0x80) ? 1 : 0;
    out[0] = 0x02;
    out[1] = (uint8_t)(n + pad);
    out[2] = 0;
    memcpy(out + 2 + pad, v, n);
    return 2 + pad + n;
}

// ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } (short-form lengths suffice here).
static size_t der_sig(uint8_t *out, const uint8_t *rs, size_t coord)
{
    uint8_t body[2 * (3 + 48)];
    size_t n = der_int(body, rs, coord);
    n += der_int(body + n, rs + coord, coord);
    assert_true(n < 128);
    out[0] = 0x30;
    out[1] = (uint8_t)n;
    memcpy(out + 2, body, n);
    return 2 + n;
}

static size_t row_sig(const ecdsa_row *row, uint8_t rs[96])
{
    size_t c = gt_ec_coord_bytes(row->curve);
    assert_int_equal(unhex(rs, 48, row->r), c);
    assert_int_equal(unhex(rs + c, 48, row->s), c);
    return 2 * c;
}

static void ecdsa_rfc6979_vectors_verify(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ecdsa_rows / sizeof ecdsa_rows[0]; i++) {
        const ecdsa_row *row = &ecdsa_rows[i];
        uint8_t pub[96], rs[96], der[120];
        size_t pub_len = unhex(pub, sizeof pub, row->pub_xy);
        size_t rs_len = row_sig(row, rs);
        size_t der_len = der_sig(der, rs, rs_len / 2);
        size_t mlen = strlen(row->msg);
        GT_ASSERT_OK(gt_ecdsa_verify_raw(row->curve, row->hash, rs, rs_len, row->msg, mlen, pub,
                                         pub_len));
        GT_ASSERT_OK(gt_ecdsa_verify_der(row->curve, row->hash, der, der_len, row->msg, mlen, pub,
                                         pub_len));
    }
}

static void ecdsa_rejects_bad_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof ecdsa_rows / sizeof ecdsa_rows[0]; i++) {
        const ecdsa_row *row = &ecdsa_rows[i];
        uint8_t pub[96], rs[96], der[120];
        size_t pub_len = unhex(pub, sizeof pub, row->pub_xy);
        size_t rs_len = row_sig(row, rs);
        size_t c = rs_len / 2;
        const char *msg = row->msg;
        size_t mlen = strlen(msg);

        // The other message of the same key.
        const char *other = strcmp(msg, "sample") == 0 ? "test" : "sample";
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, rs, rs_len, other,
                                           strlen(other), pub, pub_len),
                       GT_E_AUTH);
        // The wrong digest.
        gt_hash_alg wrong = row->hash == GT_HASH_SHA256 ? GT_HASH_SHA512 : GT_HASH_SHA256;
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, wrong, rs, rs_len, msg, mlen, pub, pub_len),
                       GT_E_AUTH);
        // Every single flipped bit of r || s, in raw and in DER form.
        for (size_t bit = 0; bit < rs_len * 8; bit += 7) {
            uint8_t bad[96];
            memcpy(bad, rs, rs_len);
            bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, bad, rs_len, msg, mlen,
                                               pub, pub_len),
                           GT_E_AUTH);
            size_t dl = der_sig(der, bad, c);
            GT_ASSERT_CODE(gt_ecdsa_verify_der(row->curve, row->hash, der, dl, msg, mlen, pub,
                                               pub_len),
                           GT_E_AUTH);
        }
        // A flipped bit in the message.
        char m2[16];
        memcpy(m2, msg, mlen);
        m2[0] ^= 1;
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, rs, rs_len, m2, mlen, pub,
                                           pub_len),
                       GT_E_AUTH);
        // r = 0 and s = 0.
        uint8_t z[96];
        memcpy(z, rs, rs_len);
        memset(z, 0, c);
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, z, rs_len, msg, mlen, pub,
                                           pub_len),
                       GT_E_AUTH);
        memcpy(z, rs, rs_len);
        memset(z + c, 0, c);
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, z, rs_len, msg, mlen, pub,
                                           pub_len),
                       GT_E_AUTH);
        // r and s swapped.
        memcpy(z, rs + c, c);
        memcpy(z + c, rs, c);
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, z, rs_len, msg, mlen, pub,
                                           pub_len),
                       GT_E_AUTH);
        // Wrong lengths are format errors, not verification failures.
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, rs, rs_len - 1, msg, mlen, pub,
                                           pub_len),
                       GT_E_FORMAT);
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, rs, rs_len, msg, mlen, pub,
                                           pub_len - 1),
                       GT_E_FORMAT);
        // A point off the curve (y + 1).
        uint8_t off[96];
        memcpy(off, pub, pub_len);
        off[pub_len - 1] ^= 1;
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(row->curve, row->hash, rs, rs_len, msg, mlen, off,
                                           pub_len),
                       GT_E_FORMAT);
        // DER with trailing garbage, and a non-minimal DER integer, are rejected.
        size_t dl = der_sig(der, rs, c);
        der[dl] = 0;
        GT_ASSERT_CODE(gt_ecdsa_verify_der(row->curve, row->hash, der, dl + 1, msg, mlen, pub,
                                           pub_len),
                       GT_E_AUTH);
        GT_ASSERT_CODE(gt_ecdsa_verify_der(row->curve, row->hash, der, dl - 1, msg, mlen, pub,
                                           pub_len),
                       GT_E_AUTH);
        GT_ASSERT_CODE(gt_ecdsa_verify_der(row->curve, row->hash, der, 0, msg, mlen, pub,
                                           pub_len),
                       GT_E_AUTH);
    }
    // The P-256 key on the P-384 curve: wrong length.
    uint8_t pub[64], rs[96];
    unhex(pub, sizeof pub, P256_UX P256_UY);
    row_sig(&ecdsa_rows[0], rs);
    GT_ASSERT_CODE(gt_ecdsa_verify_raw(GT_EC_P384, GT_HASH_SHA256, rs, 64, "sample", 6, pub, 64),
                   GT_E_FORMAT);
    GT_ASSERT_CODE(gt_ecdsa_verify_raw((gt_ec_curve)7, GT_HASH_SHA256, rs, 64, "sample", 6, pub,
                                       64),
                   GT_E_ARG);
}

// ---- gt_pkey --------------------------------------------------------------------------------

// DER ECDSA-Sig-Value -> raw r || s, for the equivalence check (short-form lengths only).
static void der_to_raw(uint8_t *rs, size_t coord, const uint8_t *der, size_t len)
{
    gt_reader r = gt_reader_init(der, len);
    uint8_t tag = 0, l = 0;
    GT_ASSERT_OK(gt_reader_u8(&r, &tag));
    assert_int_equal(tag, 0x30);
    GT_ASSERT_OK(gt_reader_u8(&r, &l));
    if (l & 0x80) {  // P-384 signatures can reach 104 bytes: still short form; 0x81 for safety
        assert_int_equal(l, 0x81);
        GT_ASSERT_OK(gt_reader_u8(&r, &l));
    }
    for (int k = 0; k < 2; k++) {
        uint8_t ilen = 0;
        GT_ASSERT_OK(gt_reader_u8(&r, &tag));
        assert_int_equal(tag, 0x02);
        GT_ASSERT_OK(gt_reader_u8(&r, &ilen));
        uint8_t v[64] = {0};
        GT_ASSERT_OK(gt_reader_bytes(&r, v, ilen));
        const uint8_t *p = v;
        while (ilen > coord) {
            assert_int_equal(*p, 0);
            p++;
            ilen--;
        }
        memset(rs + k * coord, 0, coord);
        memcpy(rs + k * coord + (coord - ilen), p, ilen);
    }
    GT_ASSERT_OK(gt_reader_expect_end(&r, "sig"));
}

static void pkey_sign_verify_and_pem_roundtrip(void **state)
{
    (void)state;
    char dir[4096], priv_path[4200], pub_path[4200];
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(priv_path, sizeof priv_path, "%s/key.pem", dir);
    snprintf(pub_path, sizeof pub_path, "%s/pub.pem", dir);
    const gt_ec_curve curves[] = {GT_EC_P256, GT_EC_P384};
    const gt_hash_alg hashes[] = {GT_HASH_SHA256, GT_HASH_SHA384};
    for (size_t i = 0; i < 2; i++) {
        gt_pkey *key = NULL;
        GT_ASSERT_OK(gt_pkey_generate_ec(&key, curves[i]));
        uint8_t xy[96];
        size_t xy_len = 0, c = gt_ec_coord_bytes(curves[i]);
        GT_ASSERT_CODE(gt_pkey_ec_public_xy(key, xy, 2 * c - 1, &xy_len), GT_E_LIMIT);
        GT_ASSERT_OK(gt_pkey_ec_public_xy(key, xy, sizeof xy, &xy_len));
        assert_int_equal(xy_len, 2 * c);

        const char msg[] = "evidence to sign";
        gt_buf sig = {0};
        GT_ASSERT_OK(gt_pkey_sign(key, hashes[i], &sig, msg, sizeof msg));
        GT_ASSERT_OK(gt_pkey_verify(key, hashes[i], sig.data, sig.len, msg, sizeof msg));
        GT_ASSERT_OK(gt_ecdsa_verify_der(curves[i], hashes[i], sig.data, sig.len, msg,
                                         sizeof msg, xy, xy_len));
        // DER and raw forms of the same signature agree.
        uint8_t rs[96];
        der_to_raw(rs, c, sig.data, sig.len);
        GT_ASSERT_OK(gt_ecdsa_verify_raw(curves[i], hashes[i], rs, 2 * c, msg, sizeof msg, xy,
                                         xy_len));
        rs[5] ^= 0x10;
        GT_ASSERT_CODE(gt_ecdsa_verify_raw(curves[i], hashes[i], rs, 2 * c, msg, sizeof msg, xy,
                                           xy_len),
                       GT_E_AUTH);
        GT_ASSERT_CODE(gt_pkey_verify(key, hashes[i], sig.data, sig.len, msg, sizeof msg - 1),
                       GT_E_AUTH);

        // PEM: private key file is 0600, public 0644; both load back and agree.
        GT_ASSERT_OK(gt_pkey_save_pem(key, priv_path, true));
        GT_ASSERT_OK(gt_pkey_save_pem(key, pub_path, false));
        struct stat st;
        assert_int_equal(stat(priv_path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        gt_buf text = {0};
        GT_ASSERT_OK(gt_file_read_all(priv_path, 1 << 16, &text));
        assert_non_null(memmem(text.data, text.len, "-----BEGIN PRIVATE KEY-----", 27));
        gt_buf_free(&text);

        gt_pkey *priv = NULL, *pub = NULL;
        GT_ASSERT_OK(gt_pkey_load_pem(&priv, priv_path, true));
        GT_ASSERT_OK(gt_pkey_load_pem(&pub, pub_path, false));
        uint8_t xy2[96];
        size_t xy2_len = 0;
        GT_ASSERT_OK(gt_pkey_ec_public_xy(pub, xy2, sizeof xy2, &xy2_len));
        assert_int_equal(xy2_len, xy_len);
        assert_memory_equal(xy2, xy, xy_len);
        GT_ASSERT_OK(gt_pkey_verify(pub, hashes[i], sig.data, sig.len, msg, sizeof msg));
        gt_buf sig2 = {0};
        GT_ASSERT_OK(gt_pkey_sign(priv, hashes[i], &sig2, msg, sizeof msg));
        GT_ASSERT_OK(gt_pkey_verify(key, hashes[i], sig2.data, sig2.len, msg, sizeof msg));
        // A public PEM is not a private key, and vice versa.
        gt_pkey *none = NULL;
        GT_ASSERT_CODE(gt_pkey_load_pem(&none, pub_path, true), GT_E_FORMAT);
        assert_null(none);
        gt_buf_free_nowipe(&sig2);
        gt_buf_free_nowipe(&sig);
        gt_pkey_free(priv);
        gt_pkey_free(pub);
        gt_pkey_free(key);
    }
    gt_pkey *none = NULL;
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/missing.pem", dir);
    GT_ASSERT_CODE(gt_pkey_load_pem(&none, missing, false), GT_E_IO);
    GT_ASSERT_CODE(gt_pkey_generate_ec(&none, (gt_ec_curve)9), GT_E_ARG);
    assert_null(none);
    gt_test_rmtree(dir);
}

// A public key from PEM bytes in memory: the same key as from its file; read within len only
// (the PEM sits at the very end of an exact-size allocation, no NUL after it); a private key,
// a cut PEM or noise is GT_E_FORMAT, more than GT_PKEY_PEM_MAX_BYTES is GT_E_LIMIT.
static void pkey_public_pem_from_bytes(void **state)
{
    (void)state;
    char dir[4096], priv_path[4200], pub_path[4200];
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(priv_path, sizeof priv_path, "%s/key.pem", dir);
    snprintf(pub_path, sizeof pub_path, "%s/pub.pem", dir);
    gt_pkey *key = NULL, *got = NULL;
    GT_ASSERT_OK(gt_pkey_generate_ec(&key, GT_EC_P384));
    GT_ASSERT_OK(gt_pkey_save_pem(key, priv_path, true));
    GT_ASSERT_OK(gt_pkey_save_pem(key, pub_path, false));
    gt_buf pub = {0}, priv = {0};
    GT_ASSERT_OK(gt_file_read_all(pub_path, 1 << 16, &pub));
    GT_ASSERT_OK(gt_file_read_all(priv_path, 1 << 16, &priv));
    uint8_t *exact = malloc(pub.len);
    assert_non_null(exact);
    memcpy(exact, pub.data, pub.len);
    GT_ASSERT_OK(gt_pkey_parse_pem_public(&got, exact, pub.len));
    uint8_t a[96], b[96];
    size_t na = 0, nb = 0;
    GT_ASSERT_OK(gt_pkey_ec_public_xy(key, a, sizeof a, &na));
    GT_ASSERT_OK(gt_pkey_ec_public_xy(got, b, sizeof b, &nb));
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    gt_pkey_free(got);
    got = NULL;
    GT_ASSERT_CODE(gt_pkey_parse_pem_public(&got, priv.data, priv.len), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_pkey_parse_pem_public(&got, exact, pub.len - 40), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_pkey_parse_pem_public(&got, "not a key", 9), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_pkey_parse_pem_public(&got, exact, 0), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_pkey_parse_pem_public(&got, exact, GT_PKEY_PEM_MAX_BYTES + 1), GT_E_LIMIT);
    assert_null(got);
    free(exact);
    gt_buf_free(&priv);
    gt_buf_free_nowipe(&pub);
    gt_pkey_free(key);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hash_known_answers),
        cmocka_unit_test(hash_file_matches_one_shot),
        cmocka_unit_test(random_bytes_differ),
        cmocka_unit_test(ecdsa_rfc6979_vectors_verify),
        cmocka_unit_test(ecdsa_rejects_bad_rows),
        cmocka_unit_test(pkey_sign_verify_and_pem_roundtrip),
        cmocka_unit_test(pkey_public_pem_from_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
