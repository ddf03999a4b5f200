#include "intel_testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *gt_test_intel_load_json(const char *rel)
{
    char path[4096];
    gt_test_data_path(path, sizeof path, rel);
    cJSON *doc = NULL;
    GT_ASSERT_OK(gt_json_load_file(path, 1u << 20, &doc));
    return doc;
}

static void expect_hex(const char *what, const cJSON *want, const uint8_t *got, size_t n)
{
    if (!cJSON_IsString(want)) {
        fail_msg("%s: expected value is not a string", what);
    }
    char hex[2 * 512 + 1];
    assert_true(2 * n + 1 <= sizeof hex);
    gt_hex_encode(hex, sizeof hex, got, n);
    if (strcmp(hex, want->valuestring) != 0) {
        fail_msg("%s: got %s, expected %s", what, hex, want->valuestring);
    }
}

static void expect_uint(const char *what, const cJSON *want, uint64_t got)
{
    if (!cJSON_IsNumber(want) || (uint64_t)want->valuedouble != got) {
        fail_msg("%s: got %llu, expected %g", what, (unsigned long long)got,
                 cJSON_IsNumber(want) ? want->valuedouble : -1.0);
    }
}

static void expect_str(const char *what, const cJSON *want, const char *got)
{
    if (!cJSON_IsString(want) || strcmp(want->valuestring, got) != 0) {
        fail_msg("%s: got %s, expected %s", what, got,
                 cJSON_IsString(want) ? want->valuestring : "(not a string)");
    }
}

static void expect_bool(const char *what, const cJSON *want, bool got)
{
    if (!cJSON_IsBool(want) || cJSON_IsTrue(want) != got) {
        fail_msg("%s: got %d, expected the other", what, got);
    }
}

static int check_header(const gt_intel_quote_header *h, const cJSON *exp)
{
    int n = 0;
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, exp)
    {
        const char *k = f->string;
        char buf[16];
        if (strcmp(k, "version") == 0) {
            expect_uint(k, f, h->version);
        } else if (strcmp(k, "attestation_key_type") == 0) {
            expect_uint(k, f, h->att_key_type);
        } else if (strcmp(k, "tee_type") == 0) {
            snprintf(buf, sizeof buf, "0x%08x", h->tee_type);
            expect_str(k, f, buf);
        } else if (strcmp(k, "qe_svn") == 0) {
            expect_uint(k, f, h->qe_svn);
        } else if (strcmp(k, "pce_svn") == 0) {
            expect_uint(k, f, h->pce_svn);
        } else if (strcmp(k, "qe_vendor_id") == 0) {
            expect_hex(k, f, h->qe_vendor_id, sizeof h->qe_vendor_id);
        } else if (strcmp(k, "user_data") == 0) {
            expect_hex(k, f, h->user_data, sizeof h->user_data);
        } else if (strcmp(k, "attestation_key_type_name") == 0 ||
                   strcmp(k, "tee_type_name") == 0) {
            expect_str(k, f, strcmp(k, "tee_type_name") == 0
                                 ? (h->tee_type == GT_INTEL_TEE_TDX ? "TDX" : "SGX")
                                 : "ECDSA-256-with-P-256");
        } else {
            fail_msg("header: unknown expected field %s", k);
        }
        n++;
    }
    return n;
}

static bool sgx_flag(const gt_sgx_report *r, const char *name, bool *out)
{
    static const struct { const char *name; int bit; } bits[] = {
        {"init", 0}, {"debug", 1}, {"mode64bit", 2}, {"provisionkey", 4},
        {"einittokenkey", 5}, {"kss", 7},
    };
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        if (strcmp(name, bits[i].name) == 0) {
            *out = (r->attributes[0] >> bits[i].bit) & 1;
            return true;
        }
    }
    return false;
}

static int check_sgx_flags(const gt_sgx_report *r, const cJSON *exp, const char *what)
{
    int n = 0;
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, exp)
    {
        bool got = false;
        char name[96];
        snprintf(name, sizeof name, "%s.%s", what, f->string);
        if (strcmp(f->string, "xfrm") == 0) {
            expect_hex(name, f, r->attributes + 8, 8);
        } else if (sgx_flag(r, f->string, &got)) {
            expect_bool(name, f, got);
        } else {
            fail_msg("%s: unknown flag", name);
        }
        n++;
    }
    return n;
}

// Every field of an SGX report (QE report or SGX body) by its expected.json name.
static int check_sgx_report(const gt_sgx_report *r, const cJSON *exp, const char *what)
{
    int n = 0;
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, exp)
    {
        const char *k = f->string;
        char name[96], buf[16];
        snprintf(name, sizeof name, "%s.%s", what, k);
        if (strcmp(k, "cpu_svn") == 0) {
            expect_hex(name, f, r->cpu_svn, 16);
        } else if (strcmp(k, "misc_select") == 0) {
            snprintf(buf, sizeof buf, "0x%08x", r->misc_select);
            expect_str(name, f, buf);
        } else if (strcmp(k, "isv_ext_prod_id") == 0) {
            expect_hex(name, f, r->isv_ext_prod_id, 16);
        } else if (strcmp(k, "attributes") == 0) {
            expect_hex(name, f, r->attributes, 16);
        } else if (strcmp(k, "mr_enclave") == 0) {
            expect_hex(name, f, r->mr_enclave, 32);
        } else if (strcmp(k, "mr_signer") == 0) {
            expect_hex(name, f, r->mr_signer, 32);
        } else if (strcmp(k, "config_id") == 0) {
            expect_hex(name, f, r->config_id, 64);
        } else if (strcmp(k, "isv_prod_id") == 0) {
            expect_uint(name, f, r->isv_prod_id);
        } else if (strcmp(k, "isv_svn") == 0) {
            expect_uint(name, f, r->isv_svn);
        } else if (strcmp(k, "config_svn") == 0) {
            expect_uint(name, f, r->config_svn);
        } else if (strcmp(k, "isv_family_id") == 0) {
            expect_hex(name, f, r->isv_family_id, 16);
        } else if (strcmp(k, "report_data") == 0) {
            expect_hex(name, f, r->report_data, 64);
        } else if (strcmp(k, "attributes_flags") == 0) {
            n += check_sgx_flags(r, f, name);
        } else {
            fail_msg("%s: unknown expected field", name);
        }
        n++;
    }
    return n;
}

// The body through the public claims API: each expected field must be a claim of the same
// value (lower-case hex, number or bool); flags map to the debug claim and the raw attributes.
static int check_body(const gt_intel_quote *q, const cJSON *exp)
{
    cJSON *claims = cJSON_CreateObject();
    GT_ASSERT_OK(gt_intel_quote_claims_json(q, claims));
    int n = 0;
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, exp)
    {
        const char *k = f->string;
        if (strcmp(k, "td_attributes_flags") == 0) {
            static const struct { const char *name; int byte, bit; } bits[] = {
                {"debug", 0, 0}, {"sept_ve_disable", 3, 4}, {"pks", 3, 6},
                {"key_locker", 3, 7}, {"perfmon", 7, 7},
            };
            const cJSON *flag = NULL;
            cJSON_ArrayForEach(flag, f)
            {
                bool known = false;
                for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
                    if (strcmp(flag->string, bits[i].name) == 0) {
                        expect_bool(flag->string, flag,
                                    (q->td.td_attributes[bits[i].byte] >> bits[i].bit) & 1);
                        known = true;
                    }
                }
                if (!known) {
                    fail_msg("td_attributes_flags: unknown flag %s", flag->string);
                }
                n++;
            }
            expect_bool("debug claim", cJSON_GetObjectItemCaseSensitive(claims, "debug"),
                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "debug")));
            continue;
        }
        if (strcmp(k, "attributes_flags") == 0) {
            n += check_sgx_flags(&q->sgx, f, "body.attributes_flags");
            expect_bool("debug claim", cJSON_GetObjectItemCaseSensitive(claims, "debug"),
                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "debug")));
            continue;
        }
        if (strcmp(k, "misc_select") == 0) {  // not a claim (a 0x-formatted number)
            char buf[16];
            snprintf(buf, sizeof buf, "0x%08x", q->sgx.misc_select);
            expect_str(k, f, buf);
            n++;
            continue;
        }
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(claims, k);
        if (c == NULL) {
            fail_msg("body field %s is not exposed as a claim", k);
        }
        if (cJSON_IsString(f)) {
            expect_str(k, f, cJSON_IsString(c) ? c->valuestring : "(not a string)");
        } else if (cJSON_IsNumber(f)) {
            if (!cJSON_IsNumber(c) || c->valuedouble != f->valuedouble) {
                fail_msg("claim %s differs", k);
            }
        } else {
            fail_msg("body field %s: unexpected JSON type", k);
        }
        n++;
    }
    cJSON_Delete(claims);
    return n;
}

int gt_test_intel_check_parsed(const gt_intel_quote *q, size_t file_len, const cJSON *expected)
{
    const cJSON *parsed = cJSON_GetObjectItemCaseSensitive(expected, "parsed");
    assert_non_null(parsed);
    int n = 0;
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, parsed)
    {
        const char *k = f->string;
        if (strcmp(k, "header") == 0) {
            n += check_header(&q->header, f);
        } else if (strcmp(k, "body") == 0) {
            n += check_body(q, f);
        } else if (strcmp(k, "body_kind") == 0) {
            const char *want = q->body_type == GT_INTEL_BODY_SGX    ? "SGX enclave report"
                               : q->body_type == GT_INTEL_BODY_TD10 ? "TD report (TDX 1.0)"
                                                                    : "TD report (TDX 1.5)";
            expect_str(k, f, want);
        } else if (strcmp(k, "v5_body_type") == 0) {
            expect_uint(k, f, (uint64_t)q->body_type);
        } else if (strcmp(k, "v5_body_size") == 0) {
            expect_uint(k, f, q->body_size);
        } else if (strcmp(k, "signed_region") == 0) {
            expect_uint("signed_region[0]", cJSON_GetArrayItem(f, 0), 0);
            expect_uint("signed_region[1]", cJSON_GetArrayItem(f, 1), q->signed_region.len);
        } else if (strcmp(k, "signature_data_len") == 0) {
            expect_uint(k, f, q->signature_data_len);
        } else if (strcmp(k, "quote_size_used") == 0) {
            expect_uint(k, f, q->size);
        } else if (strcmp(k, "file_size") == 0) {
            expect_uint(k, f, file_len);
        } else if (strcmp(k, "trailing_bytes") == 0) {
            expect_uint(k, f, file_len - q->size);
        } else if (strcmp(k, "trailing_bytes_all_zero") == 0) {
            bool zero = true;
            for (size_t i = q->size; i < file_len; i++) {
                zero = zero && q->signed_region.data[i] == 0;
            }
            expect_bool(k, f, zero);
        } else if (strcmp(k, "quote_signature") == 0) {
            expect_hex(k, f, q->signature, sizeof q->signature);
        } else if (strcmp(k, "attestation_key") == 0) {
            expect_hex(k, f, q->attestation_key, sizeof q->attestation_key);
        } else if (strcmp(k, "certification_data_type") == 0) {
            expect_uint(k, f, q->cert_data_type);
        } else if (strcmp(k, "inner_certification_data_type") == 0) {
            assert_int_equal(q->cert_data_type, GT_INTEL_CERT_QE_REPORT);
            expect_uint(k, f, q->pck_cert_data_type);
        } else if (strcmp(k, "qe_report") == 0) {
            n += check_sgx_report(&q->qe_report, f, "qe_report");
        } else if (strcmp(k, "qe_report_signature") == 0) {
            expect_hex(k, f, q->qe_report_signature, sizeof q->qe_report_signature);
        } else if (strcmp(k, "qe_auth_data") == 0) {
            expect_hex(k, f, q->qe_auth_data.data, q->qe_auth_data.len);
        } else if (strcmp(k, "pck_chain_cert_count") == 0) {
            gt_x509 **certs = NULL;
            size_t count = 0;
            GT_ASSERT_OK(gt_x509_parse_pem_all(&certs, &count, (const char *)q->pck_chain_pem.data,
                                               q->pck_chain_pem.len));
            expect_uint(k, f, count);
            gt_test_intel_free_certs(certs, count);
        } else if (strcmp(k, "certification_data_type_name") == 0 ||
                   strcmp(k, "inner_certification_data_type_name") == 0 ||
                   strcmp(k, "qe_report_data_binds_attestation_key") == 0) {
            // names are decoration; the binding is checked by verification
        } else {
            fail_msg("parsed: unknown expected field %s", k);
        }
        n++;
    }
    return n;
}

int gt_test_intel_check_pck(const gt_intel_verdict *v, const cJSON *expected)
{
    const cJSON *pck = cJSON_GetObjectItemCaseSensitive(expected, "pck");
    assert_non_null(pck);
    assert_true(v->pck_ext_valid);
    int n = 0;
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, pck)
    {
        const char *k = f->string;
        if (strcmp(k, "ppid") == 0) {
            expect_hex(k, f, v->pck.ppid, 16);
        } else if (strcmp(k, "cpusvn") == 0) {
            expect_hex(k, f, v->pck.cpu_svn, 16);
        } else if (strcmp(k, "pcesvn") == 0) {
            expect_uint(k, f, v->pck.pce_svn);
        } else if (strcmp(k, "pceid") == 0) {
            expect_hex(k, f, v->pck.pce_id, 2);
        } else if (strcmp(k, "fmspc") == 0) {
            expect_hex(k, f, v->pck.fmspc, 6);
        } else if (strcmp(k, "sgx_tcb_comp_svns") == 0) {
            assert_int_equal(cJSON_GetArraySize(f), 16);
            for (int i = 0; i < 16; i++) {
                expect_uint(k, cJSON_GetArrayItem(f, i), v->pck.comp_svn[i]);
            }
        } else if (strcmp(k, "sgx_type") == 0) {
            static const char *const names[] = {"Standard", "Scalable",
                                                "ScalableWithIntegrity"};
            assert_true(v->pck.sgx_type >= 0 && v->pck.sgx_type <= 2);
            expect_str(k, f, names[v->pck.sgx_type]);
        } else {
            fail_msg("pck: unknown expected field %s", k);
        }
        n++;
    }
    return n;
}

void gt_test_intel_load_certs(const char *rel, gt_x509 ***certs, size_t *count)
{
    gt_buf b = {0};
    gt_test_read_data(rel, &b);
    GT_ASSERT_OK(gt_x509_parse_pem_all(certs, count, (const char *)b.data, b.len));
    assert_true(*count > 0);
    gt_buf_free_nowipe(&b);
}

void gt_test_intel_free_certs(gt_x509 **certs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        gt_x509_free(certs[i]);
    }
    free(certs);
}

int64_t gt_test_intel_time(const char *iso)
{
    int64_t t = 0;
    GT_ASSERT_OK(gt_intel_parse_time(iso, &t));
    return t;
}

void gt_test_intel_print_verdict(const gt_intel_verdict *v)
{
    printf("verdict: accepted=%d sig=%d chain=%d coll=%d tcb=%s platform=%s module=%s qe=%s\n",
           v->accepted, v->signature_valid, v->chain_valid, v->collateral_valid,
           v->tcb_status ? v->tcb_status : "-",
           v->platform_tcb_status ? v->platform_tcb_status : "-",
           v->tdx_module_status ? v->tdx_module_status : "-",
           v->qe_tcb_status ? v->qe_tcb_status : "-");
    size_t n = v->reason_count < GT_INTEL_MAX_REASONS ? v->reason_count : GT_INTEL_MAX_REASONS;
    for (size_t i = 0; i < n; i++) {
        printf("  reason: %s\n", v->reasons[i]);
    }
}

void gt_test_intel_load_collateral(const char *dir, const cJSON *spec, gt_intel_collateral *c)
{
    static const struct { const char *field; gt_intel_coll_kind kind; } pcs[] = {
        {"tcb_info", GT_INTEL_COLL_TCB_INFO},
        {"qe_identity", GT_INTEL_COLL_QE_IDENTITY},
        {"pck_crl", GT_INTEL_COLL_PCK_CRL},
        {"root_ca_crl", GT_INTEL_COLL_ROOT_CA_CRL},
        {"tcb_signing_chain", GT_INTEL_COLL_TCB_SIGNING_CHAIN},
        {"file", GT_INTEL_COLL_DCAP_QVL_JSON},
    };
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(spec, "format");
    assert_true(cJSON_IsString(fmt));
    assert_true(strcmp(fmt->valuestring, "pcs-responses") == 0 ||
                strcmp(fmt->valuestring, "dcap-qvl-json") == 0);
    for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(spec, pcs[i].field);
        if (f == NULL) {
            continue;
        }
        char r[1024], path[4096];
        snprintf(r, sizeof r, "%s%s", dir, f->valuestring);
        gt_test_data_path(path, sizeof path, r);
        GT_ASSERT_OK(gt_intel_collateral_add_file(c, pcs[i].kind, path));
    }
}

// ---- synthetic PKI (OpenSSL directly: test fixtures only) -----------------------------------

#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

struct gt_test_pki {
    EVP_PKEY *root_key, *tcb_key, *ca_key, *leaf_key;
    X509 *root, *tcb, *ca, *leaf;
    gt_x509 *root_gt;
};

static const time_t pki_t0 = 1577836800;  // 2020-01-01
static const time_t pki_t1 = 2208988800;  // 2040-01-01

static void add_ext(X509 *c, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, c, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    assert_non_null(e);
    assert_int_equal(X509_add_ext(c, e, -1), 1);
    X509_EXTENSION_free(e);
}

static X509 *pki_cert(const char *cn, long serial, EVP_PKEY *key, X509 *issuer,
                      EVP_PKEY *issuer_key, bool ca, const uint8_t *sgx_ext, size_t sgx_len)
{
    X509 *c = X509_new();
    assert_non_null(c);
    X509_set_version(c, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c), serial);
    X509_NAME *n = X509_NAME_new();
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_subject_name(c, n);
    X509_set_issuer_name(c, issuer != NULL ? X509_get_subject_name(issuer) : n);
    X509_NAME_free(n);
    ASN1_TIME_set(X509_getm_notBefore(c), pki_t0);
    ASN1_TIME_set(X509_getm_notAfter(c), pki_t1);
    X509_set_pubkey(c, key);
    X509 *iss = issuer != NULL ? issuer : c;
    add_ext(c, iss, NID_subject_key_identifier, "hash");
    add_ext(c, iss, NID_authority_key_identifier, "keyid:always");
    if (ca) {
        add_ext(c, iss, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(c, iss, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(c, iss, NID_key_usage, "critical,digitalSignature,nonRepudiation");
    }
    if (sgx_ext != NULL) {
        ASN1_OBJECT *o = OBJ_txt2obj(GT_INTEL_SGX_EXT_OID, 1);
        ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
        ASN1_OCTET_STRING_set(os, sgx_ext, (int)sgx_len);
        X509_EXTENSION *e = X509_EXTENSION_create_by_OBJ(NULL, o, 0, os);
        assert_non_null(e);
        X509_add_ext(c, e, -1);
        X509_EXTENSION_free(e);
        ASN1_OCTET_STRING_free(os);
        ASN1_OBJECT_free(o);
    }
    assert_true(X509_sign(c, issuer_key, EVP_sha256()) > 0);
    return c;
}

gt_test_pki *gt_test_pki_new(const uint8_t *sgx_ext, size_t sgx_ext_len)
{
    gt_test_pki *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->root_key = EVP_EC_gen("P-256");
    p->tcb_key = EVP_EC_gen("P-256");
    p->ca_key = EVP_EC_gen("P-256");
    p->leaf_key = EVP_EC_gen("P-256");
    assert_true(p->root_key && p->tcb_key && p->ca_key && p->leaf_key);
    p->root = pki_cert("Test SGX Root CA", 1, p->root_key, NULL, p->root_key, true, NULL, 0);
    p->tcb = pki_cert("Test SGX TCB Signing", 2, p->tcb_key, p->root, p->root_key, false, NULL, 0);
    p->ca = pki_cert("Test SGX PCK Platform CA", 3, p->ca_key, p->root, p->root_key, true, NULL, 0);
    p->leaf = pki_cert("Test SGX PCK Certificate", 4, p->leaf_key, p->ca, p->ca_key, false,
                       sgx_ext, sgx_ext_len);
    unsigned char *der = NULL;
    int n = i2d_X509(p->root, &der);
    assert_true(n > 0);
    GT_ASSERT_OK(gt_x509_parse_der(&p->root_gt, der, (size_t)n));
    OPENSSL_free(der);
    return p;
}

void gt_test_pki_free(gt_test_pki *p)
{
    if (p == NULL) {
        return;
    }
    EVP_PKEY_free(p->root_key);
    EVP_PKEY_free(p->tcb_key);
    EVP_PKEY_free(p->ca_key);
    EVP_PKEY_free(p->leaf_key);
    X509_free(p->root);
    X509_free(p->tcb);
    X509_free(p->ca);
    X509_free(p->leaf);
    gt_x509_free(p->root_gt);
    free(p);
}

const gt_x509 *gt_test_pki_root(const gt_test_pki *p) { return p->root_gt; }

static void pem_append(gt_buf *out, X509 *c)
{
    BIO *bio = BIO_new(BIO_s_mem());
    assert_non_null(bio);
    assert_int_equal(PEM_write_bio_X509(bio, c), 1);
    char *data = NULL;
    long n = BIO_get_mem_data(bio, &data);
    GT_ASSERT_OK(gt_buf_append(out, data, (size_t)n));
    BIO_free(bio);
}

void gt_test_pki_tcb_chain_pem(const gt_test_pki *p, gt_buf *out)
{
    pem_append(out, p->tcb);
    pem_append(out, p->root);
}

static void sign_raw(EVP_PKEY *key, const void *msg, size_t len, uint8_t sig[64])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char der[80];
    size_t der_len = sizeof der;
    assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key), 1);
    assert_int_equal(EVP_DigestSign(ctx, der, &der_len, msg, len), 1);
    EVP_MD_CTX_free(ctx);
    const unsigned char *pp = der;
    ECDSA_SIG *s = d2i_ECDSA_SIG(NULL, &pp, (long)der_len);
    assert_non_null(s);
    assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(s), sig, 32), 32);
    assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(s), sig + 32, 32), 32);
    ECDSA_SIG_free(s);
}

void gt_test_pki_tcb_sign(const gt_test_pki *p, const void *msg, size_t len, uint8_t sig[64])
{
    sign_raw(p->tcb_key, msg, len, sig);
}

void gt_test_pki_rebuild_quote(const gt_test_pki *p, const gt_intel_quote *q, gt_buf *out)
{
    assert_true(q->header.version >= 4);
    gt_buf pem = {0};
    pem_append(&pem, p->leaf);
    pem_append(&pem, p->ca);
    pem_append(&pem, p->root);
    uint8_t qe_sig[64];
    sign_raw(p->leaf_key, q->qe_report_raw.data, q->qe_report_raw.len, qe_sig);
    size_t inner = 384 + 64 + 2 + q->qe_auth_data.len + 2 + 4 + pem.len;
    gt_writer w = gt_writer_init_dynamic();
    GT_ASSERT_OK(gt_writer_bytes(&w, q->signed_region.data, q->signed_region.len));
    GT_ASSERT_OK(gt_writer_u32le(&w, (uint32_t)(64 + 64 + 2 + 4 + inner)));
    GT_ASSERT_OK(gt_writer_bytes(&w, q->signature, 64));
    GT_ASSERT_OK(gt_writer_bytes(&w, q->attestation_key, 64));
    GT_ASSERT_OK(gt_writer_u16le(&w, GT_INTEL_CERT_QE_REPORT));
    GT_ASSERT_OK(gt_writer_u32le(&w, (uint32_t)inner));
    GT_ASSERT_OK(gt_writer_bytes(&w, q->qe_report_raw.data, q->qe_report_raw.len));
    GT_ASSERT_OK(gt_writer_bytes(&w, qe_sig, 64));
    GT_ASSERT_OK(gt_writer_u16le(&w, (uint16_t)q->qe_auth_data.len));
    GT_ASSERT_OK(gt_writer_bytes(&w, q->qe_auth_data.data, q->qe_auth_data.len));
    GT_ASSERT_OK(gt_writer_u16le(&w, GT_INTEL_CERT_PCK_CHAIN_PEM));
    GT_ASSERT_OK(gt_writer_u32le(&w, (uint32_t)pem.len));
    GT_ASSERT_OK(gt_writer_bytes(&w, pem.data, pem.len));
    GT_ASSERT_OK(gt_buf_append(out, w.data, w.len));
    gt_writer_free(&w);
    gt_buf_free_nowipe(&pem);
}

void gt_test_pki_crl(const gt_test_pki *p, bool pck_ca, bool revoke, gt_buf *out)
{
    X509 *issuer = pck_ca ? p->ca : p->root;
    EVP_PKEY *key = pck_ca ? p->ca_key : p->root_key;
    X509 *victim = pck_ca ? p->leaf : p->ca;
    X509_CRL *crl = X509_CRL_new();
    assert_non_null(crl);
    X509_CRL_set_version(crl, 1);
    X509_CRL_set_issuer_name(crl, X509_get_subject_name(issuer));
    ASN1_TIME *t = ASN1_TIME_set(NULL, 1735689600);  // 2025-01-01
    X509_CRL_set1_lastUpdate(crl, t);
    ASN1_TIME_set(t, 1767225600);                    // 2026-01-01
    X509_CRL_set1_nextUpdate(crl, t);
    if (revoke) {
        X509_REVOKED *r = X509_REVOKED_new();
        X509_REVOKED_set_serialNumber(r, X509_get_serialNumber(victim));
        ASN1_TIME_set(t, 1740000000);
        X509_REVOKED_set_revocationDate(r, t);
        X509_CRL_add0_revoked(crl, r);
        X509_CRL_sort(crl);
    }
    ASN1_TIME_free(t);
    assert_true(X509_CRL_sign(crl, key, EVP_sha256()) > 0);
    unsigned char *der = NULL;
    int n = i2d_X509_CRL(crl, &der);
    assert_true(n > 0);
    GT_ASSERT_OK(gt_buf_append(out, der, (size_t)n));
    OPENSSL_free(der);
    X509_CRL_free(crl);
}

void gt_test_intel_sample_load(gt_test_intel_sample *s, const char *dir, const char *evidence)
{
    char r[512], e[600];
    memset(s, 0, sizeof *s);
    snprintf(r, sizeof r, "%s%s", dir, evidence);
    gt_test_read_data(r, &s->file);
    GT_ASSERT_OK(gt_intel_quote_parse(&s->q, s->file.data, s->file.len));
    snprintf(e, sizeof e, "%s.expected.json", r);
    s->expected = gt_test_intel_load_json(e);
}

void gt_test_intel_sample_free(gt_test_intel_sample *s)
{
    gt_buf_free_nowipe(&s->file);
    cJSON_Delete(s->expected);
}

gt_x509 **gt_test_intel_root;
static size_t root_count;

void gt_test_intel_roots_load(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%sintel_sgx_root_ca.pem", dir);
    gt_test_intel_load_certs(p, &gt_test_intel_root, &root_count);
}

void gt_test_intel_roots_free(void)
{
    gt_test_intel_free_certs(gt_test_intel_root, root_count);
    gt_test_intel_root = NULL;
    root_count = 0;
}

gt_intel_verify_params gt_test_intel_params(int64_t at, const gt_intel_collateral *c)
{
    return (gt_intel_verify_params){.roots = (const gt_x509 *const *)gt_test_intel_root,
                                    .root_count = root_count, .at = at, .collateral = c};
}
