// crypto/: X.509 parsing and chain verification on real attestation certificates (Intel SGX/TDX
// ECDSA chains, AMD Milan RSA-PSS ASK/ARK) at fixed times, and CRL revocation with a tiny CA
// built on the fly.
#include "testlib.h"

#include <gputravel/crypto.h>

#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

// Seconds since the epoch (UTC midnight).
#define T_2020_01_01 1577836800
#define T_2023_07_01 1688169600
#define T_2023_08_01 1690848000
#define T_2025_06_01 1748736000
#define T_2026_01_01 1767225600
#define T_2033_01_01 1988150400
#define T_2046_01_01 2398291200

typedef struct {
    gt_x509 **certs;
    size_t count;
} bundle;

static bundle load_pem(const char *rel)
{
    gt_buf b = {0};
    gt_test_read_data(rel, &b);
    bundle out = {0};
    GT_ASSERT_OK(gt_x509_parse_pem_all(&out.certs, &out.count, (const char *)b.data, b.len));
    gt_buf_free_nowipe(&b);
    return out;
}

static void bundle_free(bundle *b)
{
    for (size_t i = 0; i < b->count; i++) {
        gt_x509_free(b->certs[i]);
    }
    free(b->certs);
    *b = (bundle){0};
}

// Verifies leaf against the given intermediates and one root at `at`.
static gt_err verify(const gt_x509 *leaf, gt_x509 *const *inter, size_t n_inter,
                     const gt_x509 *root, const gt_span *crls, size_t n_crls, int64_t at)
{
    const gt_x509 *roots[1] = {root};
    gt_x509_verify_params p = {
        .intermediates = (const gt_x509 *const *)inter,
        .intermediate_count = n_inter,
        .roots = roots,
        .root_count = 1,
        .crls = crls,
        .crl_count = n_crls,
        .at = at,
    };
    return gt_x509_verify_chain(leaf, &p);
}

static void expect_auth(gt_err e, const char *reason)
{
    if (e.code != GT_E_AUTH || strstr(e.msg, reason) == NULL) {
        fail_msg("expected AUTH \"%s\", got %s: %s", reason, gt_code_name(e.code), e.msg);
    }
}

static void intel_tcb_signing_chain(void **state)
{
    (void)state;
    bundle chain = load_pem("attestation/tdx/intel_sgx_tcb_signing_chain.pem");
    bundle root = load_pem("attestation/tdx/intel_sgx_root_ca.pem");
    bundle ark = load_pem("attestation/snp/amd_milan_ask_ark.pem");
    assert_int_equal(chain.count, 2);
    assert_int_equal(root.count, 1);
    char cn[64];
    gt_x509_subject_cn(chain.certs[0], cn, sizeof cn);
    assert_string_equal(cn, "Intel SGX TCB Signing");
    gt_x509_subject_cn(root.certs[0], cn, sizeof cn);
    assert_string_equal(cn, "Intel SGX Root CA");
    gt_x509_subject_cn(root.certs[0], cn, 6);
    assert_string_equal(cn, "Intel");

    // Valid 2025-05-06 .. 2032-05-06.
    GT_ASSERT_OK(verify(chain.certs[0], NULL, 0, root.certs[0], NULL, 0, T_2026_01_01));
    expect_auth(verify(chain.certs[0], NULL, 0, root.certs[0], NULL, 0, T_2033_01_01),
                "certificate has expired");
    expect_auth(verify(chain.certs[0], NULL, 0, root.certs[0], NULL, 0, T_2020_01_01),
                "certificate is not yet valid");
    // Against AMD's ARK: no path to a root.
    expect_auth(verify(chain.certs[0], NULL, 0, ark.certs[1], NULL, 0, T_2026_01_01),
                "unable to get local issuer certificate");
    // The root in the bundle is the same certificate as the trusted root file.
    GT_ASSERT_OK(verify(chain.certs[0], NULL, 0, chain.certs[1], NULL, 0, T_2026_01_01));

    // Basic constraints of the root: CA:TRUE, pathlen 1.
    gt_span v = {0};
    GT_ASSERT_OK(gt_x509_extension(root.certs[0], "2.5.29.19", &v));
    uint8_t want[8] = {0x30, 0x06, 0x01, 0x01, 0xff, 0x02, 0x01, 0x01};
    assert_int_equal(v.len, sizeof want);
    assert_memory_equal(v.data, want, sizeof want);
    GT_ASSERT_CODE(gt_x509_extension(root.certs[0], "1.2.840.113741.1.13.1", &v), GT_E_NOTFOUND);
    assert_null(v.data);
    GT_ASSERT_CODE(gt_x509_extension(root.certs[0], "not an oid", &v), GT_E_ARG);

    // The public key is the P-256 key the chain was signed with.
    gt_pkey *pk = NULL;
    uint8_t xy[64];
    size_t xy_len = 0;
    GT_ASSERT_OK(gt_x509_public_key(root.certs[0], &pk));
    GT_ASSERT_OK(gt_pkey_ec_public_xy(pk, xy, sizeof xy, &xy_len));
    assert_int_equal(xy_len, 64);
    gt_pkey_free(pk);

    bundle_free(&chain);
    bundle_free(&root);
    bundle_free(&ark);
}

// The PCK chain (PEM) carried inside a real TDX quote, with Intel's PCK and root CRLs, at the
// time go-tdx-guest verifies it (2023-07-01). The PCK leaf carries the SGX extension.
static void intel_pck_chain_with_crls(void **state)
{
    (void)state;
    gt_buf quote = {0}, pckcrl = {0}, rootcrl = {0};
    gt_test_read_data("attestation/tdx/go-tdx-guest_tdx_prod_quote_SPR_E4.dat", &quote);
    gt_test_read_data("attestation/tdx/go-tdx-guest_pckcrl.der", &pckcrl);
    gt_test_read_data("attestation/tdx/go-tdx-guest_rootcrl.der", &rootcrl);
    const uint8_t *begin = memmem(quote.data, quote.len, "-----BEGIN", 10);
    assert_non_null(begin);
    bundle chain = {0};
    // Trailing non-PEM bytes after the last certificate are ignored.
    GT_ASSERT_OK(gt_x509_parse_pem_all(&chain.certs, &chain.count, (const char *)begin,
                                       quote.len - (size_t)(begin - quote.data)));
    assert_int_equal(chain.count, 3);
    bundle root = load_pem("attestation/tdx/intel_sgx_root_ca.pem");
    char cn[64];
    gt_x509_subject_cn(chain.certs[0], cn, sizeof cn);
    assert_string_equal(cn, "Intel SGX PCK Certificate");

    gt_span crls[2] = {gt_buf_span(&pckcrl), gt_buf_span(&rootcrl)};
    GT_ASSERT_OK(verify(chain.certs[0], &chain.certs[1], 1, root.certs[0], NULL, 0, T_2023_07_01));
    GT_ASSERT_OK(verify(chain.certs[0], &chain.certs[1], 1, root.certs[0], crls, 2, T_2023_07_01));
    // One CRL is enough where only that issuer publishes one.
    GT_ASSERT_OK(verify(chain.certs[0], &chain.certs[1], 1, root.certs[0], crls, 1, T_2023_07_01));
    // The PCK CRL's nextUpdate is 2023-07-08.
    expect_auth(verify(chain.certs[0], &chain.certs[1], 1, root.certs[0], crls, 2, T_2023_08_01),
                "CRL has expired");
    // Without the intermediate there is no path.
    expect_auth(verify(chain.certs[0], NULL, 0, root.certs[0], NULL, 0, T_2023_07_01),
                "unable to get local issuer certificate");
    // A CRL that is neither DER nor PEM.
    const uint8_t junk[] = "not a crl";
    gt_span bad = {junk, sizeof junk};
    GT_ASSERT_CODE(verify(chain.certs[0], &chain.certs[1], 1, root.certs[0], &bad, 1,
                          T_2023_07_01),
                   GT_E_FORMAT);

    gt_span ext = {0};
    GT_ASSERT_OK(gt_x509_extension(chain.certs[0], "1.2.840.113741.1.13.1", &ext));
    assert_true(ext.len > 100);
    assert_int_equal(ext.data[0], 0x30);  // SGX Extensions ::= SEQUENCE

    bundle_free(&chain);
    bundle_free(&root);
    gt_buf_free_nowipe(&quote);
    gt_buf_free_nowipe(&pckcrl);
    gt_buf_free_nowipe(&rootcrl);
}

// AMD Milan: ASK and ARK are RSA-4096 signed with RSASSA-PSS; the VCEK (DER) is signed by ASK.
static void amd_milan_rsa_pss_chain(void **state)
{
    (void)state;
    bundle askark = load_pem("attestation/snp/amd_milan_ask_ark.pem");
    bundle genoa = load_pem("attestation/snp/amd_genoa_ask_ark.pem");
    assert_int_equal(askark.count, 2);
    gt_x509 *ask = askark.certs[0], *ark = askark.certs[1];
    char cn[64];
    gt_x509_subject_cn(ask, cn, sizeof cn);
    assert_string_equal(cn, "SEV-Milan");
    gt_x509_subject_cn(ark, cn, sizeof cn);
    assert_string_equal(cn, "ARK-Milan");

    GT_ASSERT_OK(verify(ask, NULL, 0, ark, NULL, 0, T_2025_06_01));
    expect_auth(verify(ask, NULL, 0, ark, NULL, 0, T_2046_01_01), "certificate has expired");
    expect_auth(verify(ask, NULL, 0, genoa.certs[1], NULL, 0, T_2025_06_01),
                "unable to get local issuer certificate");

    gt_buf der = {0};
    gt_test_read_data("attestation/snp/go-sev-guest_vcek.der", &der);
    gt_x509 *vcek = NULL;
    GT_ASSERT_OK(gt_x509_parse_der(&vcek, der.data, der.len));
    gt_x509_subject_cn(vcek, cn, sizeof cn);
    assert_string_equal(cn, "SEV-VCEK");
    GT_ASSERT_OK(verify(vcek, &ask, 1, ark, NULL, 0, T_2025_06_01));
    gt_pkey *pk = NULL;
    uint8_t xy[96];
    size_t xy_len = 0;
    GT_ASSERT_OK(gt_x509_public_key(vcek, &pk));
    GT_ASSERT_OK(gt_pkey_ec_public_xy(pk, xy, sizeof xy, &xy_len));
    assert_int_equal(xy_len, 96);  // P-384
    gt_pkey_free(pk);
    gt_x509_free(vcek);

    // A flipped bit in the VCEK's signature (its last byte) breaks the chain.
    der.data[der.len - 1] ^= 0x01;
    GT_ASSERT_OK(gt_x509_parse_der(&vcek, der.data, der.len));
    expect_auth(verify(vcek, &ask, 1, ark, NULL, 0, T_2025_06_01),
                "certificate signature failure");
    gt_x509_free(vcek);

    // DER parse negatives: trailing byte, truncation, empty.
    der.data[der.len - 1] ^= 0x01;
    GT_ASSERT_OK(gt_buf_append(&der, "", 1));
    GT_ASSERT_CODE(gt_x509_parse_der(&vcek, der.data, der.len), GT_E_FORMAT);
    assert_null(vcek);
    GT_ASSERT_CODE(gt_x509_parse_der(&vcek, der.data, der.len - 10), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_x509_parse_der(&vcek, der.data, 0), GT_E_TRUNCATED);
    assert_null(vcek);

    gt_buf_free_nowipe(&der);
    bundle_free(&askark);
    bundle_free(&genoa);
}

static void pem_bundle_negatives(void **state)
{
    (void)state;
    gt_x509 **certs = (gt_x509 **)1;
    size_t count = 7;
    GT_ASSERT_CODE(gt_x509_parse_pem_all(&certs, &count, "", 0), GT_E_FORMAT);
    assert_null(certs);
    assert_int_equal(count, 0);
    GT_ASSERT_CODE(gt_x509_parse_pem_all(&certs, &count, "hello", 5), GT_E_FORMAT);

    // The second certificate's base64 is damaged: the whole bundle fails, nothing leaks.
    gt_buf b = {0};
    gt_test_read_data("attestation/tdx/intel_sgx_tcb_signing_chain.pem", &b);
    GT_ASSERT_OK(gt_buf_append(&b, "", 1));  // NUL-terminate for strstr
    b.len--;
    char *second = strstr(strstr((char *)b.data, "-----END") + 1, "-----BEGIN");
    assert_non_null(second);
    char *body = strchr(second, '\n') + 1;
    body[10] = '!';
    GT_ASSERT_CODE(gt_x509_parse_pem_all(&certs, &count, (const char *)b.data, b.len),
                   GT_E_FORMAT);
    assert_null(certs);
    assert_int_equal(count, 0);
    gt_buf_free_nowipe(&b);
}

// ---- CRLs with a CA built on the fly --------------------------------------------------------

static EVP_PKEY *new_key(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    return k;
}

static X509 *make_cert(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key,
                       long serial, bool ca)
{
    X509 *x = X509_new();
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_time_adj_ex(X509_getm_notBefore(x), 0, 0, &(time_t){T_2020_01_01});
    X509_time_adj_ex(X509_getm_notAfter(x), 7300, 0, &(time_t){T_2020_01_01});
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
    X509_set_pubkey(x, key);
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer ? issuer : x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints,
                                              ca ? "critical,CA:TRUE" : "CA:FALSE");
    assert_non_null(ext);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    if (ca) {
        ext = X509V3_EXT_conf_nid(NULL, &v3, NID_key_usage, "critical,keyCertSign,cRLSign");
        X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
    }
    assert_true(X509_sign(x, issuer_key, EVP_sha256()) > 0);
    return x;
}

// A CRL by ca revoking `revoked` serials (may be 0), valid 2020-01-01 + 10 years; DER bytes.
static gt_buf make_crl(X509 *ca, EVP_PKEY *ca_key, const long *revoked, size_t n, bool pem)
{
    X509_CRL *crl = X509_CRL_new();
    assert_non_null(crl);
    X509_CRL_set_version(crl, 1);
    X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca));
    ASN1_TIME *t = ASN1_TIME_adj(NULL, T_2020_01_01, 0, 0);
    X509_CRL_set1_lastUpdate(crl, t);
    ASN1_TIME_adj(t, T_2020_01_01, 3650, 0);
    X509_CRL_set1_nextUpdate(crl, t);
    for (size_t i = 0; i < n; i++) {
        X509_REVOKED *r = X509_REVOKED_new();
        ASN1_INTEGER *s = ASN1_INTEGER_new();
        ASN1_INTEGER_set(s, revoked[i]);
        X509_REVOKED_set_serialNumber(r, s);
        ASN1_TIME_adj(t, T_2020_01_01, 1, 0);
        X509_REVOKED_set_revocationDate(r, t);
        X509_CRL_add0_revoked(crl, r);
        ASN1_INTEGER_free(s);
    }
    ASN1_TIME_free(t);
    X509_CRL_sort(crl);
    assert_true(X509_CRL_sign(crl, ca_key, EVP_sha256()) > 0);
    gt_buf out = {0};
    if (pem) {
        BIO *bio = BIO_new(BIO_s_mem());
        assert_true(PEM_write_bio_X509_CRL(bio, crl) == 1);
        char *p = NULL;
        long len = BIO_get_mem_data(bio, &p);
        GT_ASSERT_OK(gt_buf_append(&out, p, (size_t)len));
        BIO_free(bio);
    } else {
        unsigned char *der = NULL;
        int len = i2d_X509_CRL(crl, &der);
        assert_true(len > 0);
        GT_ASSERT_OK(gt_buf_append(&out, der, (size_t)len));
        OPENSSL_free(der);
    }
    X509_CRL_free(crl);
    return out;
}

static gt_x509 *to_gt(X509 *x)
{
    unsigned char *der = NULL;
    int len = i2d_X509(x, &der);
    assert_true(len > 0);
    gt_x509 *c = NULL;
    GT_ASSERT_OK(gt_x509_parse_der(&c, der, (size_t)len));
    OPENSSL_free(der);
    return c;
}

static void crl_revocation(void **state)
{
    (void)state;
    EVP_PKEY *root_key = new_key(), *ca_key = new_key(), *leaf_key = new_key(),
             *other_key = new_key();
    X509 *root = make_cert("Test Root", root_key, NULL, root_key, 1, true);
    X509 *ca = make_cert("Test CA", ca_key, root, root_key, 2, true);
    X509 *good = make_cert("Good Leaf", leaf_key, ca, ca_key, 100, false);
    X509 *bad = make_cert("Revoked Leaf", leaf_key, ca, ca_key, 101, false);
    X509 *other = make_cert("Other Root", other_key, NULL, other_key, 1, true);
    long revoked[] = {101, 555};
    gt_buf crl_der = make_crl(ca, ca_key, revoked, 2, false);
    gt_buf crl_pem = make_crl(ca, ca_key, revoked, 2, true);
    gt_buf root_crl = make_crl(root, root_key, NULL, 0, false);
    gt_buf root_crl_revoking_ca = make_crl(root, root_key, (long[]){2}, 1, false);
    gt_buf other_crl = make_crl(other, other_key, NULL, 0, false);
    gt_buf forged = make_crl(ca, other_key, revoked, 0, false);  // CA's name, wrong key
    gt_x509 *g_root = to_gt(root), *g_ca = to_gt(ca), *g_good = to_gt(good),
            *g_bad = to_gt(bad);
    const int64_t at = T_2023_07_01;

    gt_span crls[2] = {gt_buf_span(&crl_der), gt_buf_span(&root_crl)};
    GT_ASSERT_OK(verify(g_good, &g_ca, 1, g_root, NULL, 0, at));
    GT_ASSERT_OK(verify(g_bad, &g_ca, 1, g_root, NULL, 0, at));  // no CRL, no revocation check
    GT_ASSERT_OK(verify(g_good, &g_ca, 1, g_root, crls, 2, at));
    GT_ASSERT_OK(verify(g_good, &g_ca, 1, g_root, crls, 1, at));
    expect_auth(verify(g_bad, &g_ca, 1, g_root, crls, 2, at), "certificate revoked");
    expect_auth(verify(g_bad, &g_ca, 1, g_root, crls, 1, at), "certificate revoked");
    gt_span pem = gt_buf_span(&crl_pem);
    expect_auth(verify(g_bad, &g_ca, 1, g_root, &pem, 1, at), "certificate revoked");
    GT_ASSERT_OK(verify(g_good, &g_ca, 1, g_root, &pem, 1, at));
    // The root revokes the intermediate: every leaf under it fails.
    gt_span ca_rev[2] = {gt_buf_span(&crl_der), gt_buf_span(&root_crl_revoking_ca)};
    expect_auth(verify(g_good, &g_ca, 1, g_root, ca_rev, 2, at), "certificate revoked");
    // A CRL of an unrelated CA is not silently accepted.
    gt_span unrelated = gt_buf_span(&other_crl);
    expect_auth(verify(g_good, &g_ca, 1, g_root, &unrelated, 1, at), "not for this chain");
    // A CRL under the CA's name but signed by another key.
    gt_span f = gt_buf_span(&forged);
    expect_auth(verify(g_good, &g_ca, 1, g_root, &f, 1, at), "CRL signature failure");
    // The certificates are valid 2020-01-01 + 20 years, the CRLs + 10 years (to 2029-12-29).
    GT_ASSERT_OK(verify(g_good, &g_ca, 1, g_root, NULL, 0, T_2033_01_01));
    expect_auth(verify(g_good, &g_ca, 1, g_root, crls, 1, T_2033_01_01), "CRL has expired");

    gt_x509_free(g_root);
    gt_x509_free(g_ca);
    gt_x509_free(g_good);
    gt_x509_free(g_bad);
    gt_buf_free_nowipe(&crl_der);
    gt_buf_free_nowipe(&crl_pem);
    gt_buf_free_nowipe(&root_crl);
    gt_buf_free_nowipe(&root_crl_revoking_ca);
    gt_buf_free_nowipe(&other_crl);
    gt_buf_free_nowipe(&forged);
    X509_free(root);
    X509_free(ca);
    X509_free(good);
    X509_free(bad);
    X509_free(other);
    EVP_PKEY_free(root_key);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(leaf_key);
    EVP_PKEY_free(other_key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(intel_tcb_signing_chain),
        cmocka_unit_test(intel_pck_chain_with_crls),
        cmocka_unit_test(amd_milan_rsa_pss_chain),
        cmocka_unit_test(pem_bundle_negatives),
        cmocka_unit_test(crl_revocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
