// enclave/: SIGSTRUCT parsing, checks and signing against the real SIGSTRUCTs of
// tests/testdata/sgx-enclave/ (each .expected.json was computed by an independent checker), the
// Fortanix RSA/Q1/Q2 known answers, and re-signing known SIGSTRUCTs byte for byte.
#include "enclave_testlib.h"

#include <stdlib.h>

static const char *const SIGSTRUCTS[] = {"enarx_encl.ss", "fortanix_sig1.sigstruct.bin",
                                         "fortanix_test_enclave.sig",
                                         "gramine_redis-server_2024.sig",
                                         "intel_le_prod_css_2016-06-23.bin"};

static void load(const char *file, gt_sgx_sigstruct *s, gt_sgx_sigstruct_checks *c,
                 size_t *offset)
{
    gt_buf b = {0};
    sgxe_read(file, &b);
    GT_ASSERT_OK(gt_sgx_sigstruct_find(b.data, b.len, s, offset));
    GT_ASSERT_OK(gt_sgx_sigstruct_verify(s, c));
    gt_buf_free_nowipe(&b);
}

// Every field the checker lists, in both its "expected" and "parsed" views.
static void sigstructs_parse_to_expected(void **state)
{
    (void)state;
    static const char *const ignore_expected[] = {"mrenclave_recomputed_from_image",
                                                  "mrsigner_published_by_intel", NULL};
    // "checks" lists the same checks in the checker's own words; all_ok is compared.
    static const char *const ignore_parsed[] = {"checks", "offset", "sigstruct_sha256", NULL};
    for (size_t i = 0; i < sizeof SIGSTRUCTS / sizeof SIGSTRUCTS[0]; i++) {
        gt_sgx_sigstruct s;
        gt_sgx_sigstruct_checks c;
        size_t offset = 99;
        load(SIGSTRUCTS[i], &s, &c, &offset);
        assert_int_equal(offset, 0);
        assert_true(c.all_ok);
        cJSON *got = NULL;
        GT_ASSERT_OK(gt_sgx_sigstruct_json(&s, &c, offset, &got));
        cJSON *want = sgxe_expected(SIGSTRUCTS[i]);
        sgxe_expect_members(got, cJSON_GetObjectItem(want, "expected"), ignore_expected,
                            SIGSTRUCTS[i]);
        sgxe_expect_members(got, cJSON_GetObjectItem(want, "parsed"), ignore_parsed,
                            SIGSTRUCTS[i]);
        // The brief's keys for the CLI are there too.
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(got, "signature_valid")));
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(got, "q1_q2_valid")));
        cJSON_Delete(want);
        cJSON_Delete(got);
    }
}

// The SIGSTRUCT inside a real SDK signed enclave, found through its metadata.
static void sigstruct_in_signed_so(void **state)
{
    (void)state;
    gt_sgx_sigstruct s;
    gt_sgx_sigstruct_checks c;
    size_t offset = 0;
    load("sdk_pingpong_2018.signed.so", &s, &c, &offset);
    assert_true(c.all_ok);
    cJSON *want = sgxe_expected("sdk_pingpong_2018.signed.so");
    cJSON *got = NULL;
    GT_ASSERT_OK(gt_sgx_sigstruct_json(&s, &c, offset, &got));
    static const char *const ignore[] = {"metadata_offset", "metadata", NULL};
    sgxe_expect_members(got, cJSON_GetObjectItem(want, "expected"), ignore, "signed.so");
    cJSON_Delete(got);
    cJSON_Delete(want);
}

// Fortanix's sgxs crate vectors: N, S = sign(DATA), Q1, Q2.
static void fortanix_rsa_q1_q2_known_answers(void **state)
{
    (void)state;
    gt_buf n = {0}, sig = {0}, q1 = {0}, q2 = {0}, data = {0};
    sgxe_read("fortanix_sig1.key_n.bin", &n);
    sgxe_read("fortanix_sig1.sig.bin", &sig);
    sgxe_read("fortanix_sig1.q1.bin", &q1);
    sgxe_read("fortanix_sig1.q2.bin", &q2);
    sgxe_read("fortanix_sig1.data.bin", &data);
    assert_int_equal(n.len, GT_SGX_KEY_BYTES);
    assert_int_equal(data.len, GT_SHA256_BYTES);
    uint8_t g1[GT_SGX_KEY_BYTES], g2[GT_SGX_KEY_BYTES];
    GT_ASSERT_OK(gt_rsa_le_q1q2(g1, g2, sig.data, n.data, n.len));
    assert_memory_equal(g1, q1.data, sizeof g1);
    assert_memory_equal(g2, q2.data, sizeof g2);
    GT_ASSERT_OK(gt_rsa_le_verify_sha256(sig.data, n.data, n.len, 3, data.data));
    data.data[0] ^= 1;
    GT_ASSERT_CODE(gt_rsa_le_verify_sha256(sig.data, n.data, n.len, 3, data.data), GT_E_AUTH);
    data.data[0] ^= 1;
    GT_ASSERT_CODE(gt_rsa_le_verify_sha256(sig.data, n.data, n.len, 65537, data.data), GT_E_AUTH);
    // s >= n has no q1/q2 and no signature
    GT_ASSERT_CODE(gt_rsa_le_q1q2(g1, g2, n.data, n.data, n.len), GT_E_ARG);
    GT_ASSERT_CODE(gt_rsa_le_verify_sha256(n.data, n.data, n.len, 3, data.data), GT_E_AUTH);
    uint8_t hash[GT_SHA256_BYTES], want[GT_SHA256_BYTES];
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, hash, n.data, n.len));
    GT_ASSERT_OK(gt_hex_decode_exact(want, sizeof want,
        "83d719e77deaca1470f6baf62a4d774303c899db69020f9c70ee1dfc08c7ce9e"));
    assert_memory_equal(hash, want, sizeof hash);
    gt_buf_free_nowipe(&n);
    gt_buf_free_nowipe(&sig);
    gt_buf_free_nowipe(&q1);
    gt_buf_free_nowipe(&q2);
    gt_buf_free_nowipe(&data);
}

static gt_pkey *load_key(const char *file)
{
    char path[512];
    gt_test_data_path(path, sizeof path, file);
    gt_pkey *key = NULL;
    GT_ASSERT_OK(gt_pkey_load_pem(&key, path, true));
    return key;
}

// MRSIGNER of each signing key, as its expected.json says.
static void key_mrsigner(void **state)
{
    (void)state;
    static const char *const keys[] = {"enarx_encl.pem", "fortanix_sig1.key.pem"};
    for (size_t i = 0; i < 2; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, SGXE_DIR "%s", keys[i]);
        gt_pkey *key = load_key(rel);
        uint8_t n[GT_SGX_KEY_BYTES], mrsigner[GT_SHA256_BYTES], want[GT_SHA256_BYTES];
        uint64_t e = 0;
        unsigned bits = 0;
        GT_ASSERT_OK(gt_pkey_rsa_public_le(key, n, sizeof n, &e, &bits));
        assert_int_equal(e, 3);
        assert_int_equal(bits, 3072);
        GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, mrsigner, n, sizeof n));
        cJSON *ex = sgxe_expected(keys[i]);
        const char *hex = NULL;
        GT_ASSERT_OK(gt_json_get_string(cJSON_GetObjectItem(ex, "expected"), "mrsigner_of_key",
                                        &hex));
        GT_ASSERT_OK(gt_hex_decode_exact(want, sizeof want, hex));
        assert_memory_equal(mrsigner, want, sizeof want);
        cJSON_Delete(ex);
        gt_pkey_free(key);
    }
}

static void params_from(const gt_sgx_sigstruct *s, gt_sgx_sign_params *p)
{
    gt_sgx_sign_params_default(p, 0);
    memcpy(p->enclavehash, s->enclavehash, sizeof p->enclavehash);
    p->vendor = s->vendor;
    p->date = s->date;
    p->header_type = s->header_type;
    p->swdefined = s->swdefined;
    p->miscselect = s->miscselect;
    p->miscmask = s->miscmask;
    p->attributes = s->attributes;
    p->attributemask = s->attributemask;
    memcpy(p->isvfamilyid, s->isvfamilyid, 16);
    memcpy(p->isvextprodid, s->isvextprodid, 16);
    p->isvprodid = s->isvprodid;
    p->isvsvn = s->isvsvn;
}

// PKCS#1 v1.5 is deterministic: signing a real SIGSTRUCT's fields with its own key gives back
// the real SIGSTRUCT, every byte (signature, q1, q2 included).
static void resign_reproduces_real_sigstructs(void **state)
{
    (void)state;
    static const struct {
        const char *sig, *key;
    } pairs[] = {{"enarx_encl.ss", "enarx_encl.pem"},
                 {"fortanix_sig1.sigstruct.bin", "fortanix_sig1.key.pem"},
                 {"sdk_pingpong_2018.signed.so", "fortanix_sig1.key.pem"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        gt_sgx_sigstruct real, made;
        gt_sgx_sigstruct_checks c;
        size_t offset = 0;
        load(pairs[i].sig, &real, &c, &offset);
        char rel[128];
        snprintf(rel, sizeof rel, SGXE_DIR "%s", pairs[i].key);
        gt_pkey *key = load_key(rel);
        gt_sgx_sign_params p;
        params_from(&real, &p);
        GT_ASSERT_OK(gt_sgx_sigstruct_sign(&made, &p, key));
        if (memcmp(made.raw, real.raw, sizeof made.raw) != 0) {
            for (size_t b = 0; b < sizeof made.raw; b++) {
                if (made.raw[b] != real.raw[b]) {
                    fail_msg("%s: re-signed SIGSTRUCT differs first at byte %zu", pairs[i].sig, b);
                }
            }
        }
        gt_pkey_free(key);
    }
}

// A signature made here verifies, under a debug-signed header too; an EC key is refused.
static void sign_and_verify(void **state)
{
    (void)state;
    gt_pkey *key = load_key(SGXE_DIR "enarx_encl.pem");
    gt_sgx_sign_params p;
    gt_sgx_sign_params_default(&p, 1764633600);  // 2025-12-02 00:00 UTC
    assert_int_equal(p.date, 0x20251202);
    memset(p.enclavehash, 0xab, sizeof p.enclavehash);
    p.header_type = GT_SGX_HEADER_TYPE_DEBUG;
    p.attributes.flags |= GT_SGX_ATTR_DEBUG;
    p.isvprodid = 7;
    p.isvsvn = 3;
    gt_sgx_sigstruct s, back;
    gt_sgx_sigstruct_checks c;
    GT_ASSERT_OK(gt_sgx_sigstruct_sign(&s, &p, key));
    GT_ASSERT_OK(gt_sgx_sigstruct_parse(s.raw, sizeof s.raw, &back));
    GT_ASSERT_OK(gt_sgx_sigstruct_verify(&back, &c));
    assert_true(c.all_ok);
    assert_int_equal(back.header_type, GT_SGX_HEADER_TYPE_DEBUG);
    assert_int_equal(back.isvprodid, 7);
    assert_int_equal(back.isvsvn, 3);
    cJSON *j = NULL;
    GT_ASSERT_OK(gt_sgx_sigstruct_json(&back, &c, 0, &j));
    assert_string_equal(cJSON_GetObjectItem(j, "header_type_name")->valuestring, "debug");
    assert_string_equal(cJSON_GetObjectItem(j, "header_type")->valuestring, "0x80000000");
    assert_string_equal(cJSON_GetObjectItem(j, "date_iso")->valuestring, "2025-12-02");
    cJSON_Delete(j);
    gt_pkey_free(key);
    gt_pkey *ec = NULL;
    GT_ASSERT_OK(gt_pkey_generate_ec(&ec, GT_EC_P256));
    GT_ASSERT_ERR(gt_sgx_sigstruct_sign(&s, &p, ec), GT_E_ARG, "not an RSA key");
    gt_pkey_free(ec);
}

static void dates(void **state)
{
    (void)state;
    char iso[16];
    assert_int_equal(gt_sgx_date_decode(0x20241226, iso, sizeof iso), GT_SGX_DATE_BCD);
    assert_string_equal(iso, "2024-12-26");
    assert_int_equal(gt_sgx_date_decode(0, iso, sizeof iso), GT_SGX_DATE_BCD);
    assert_string_equal(iso, "0000-00-00");
    // Gramine until 2022: bytes E6 07 05 11 = year 2022 (u16), month 5, day 17.
    uint8_t bytes[4] = {0xe6, 0x07, 0x05, 0x11};
    gt_reader r = gt_reader_init(bytes, 4);
    uint32_t v = 0;
    GT_ASSERT_OK(gt_reader_u32le(&r, &v));
    assert_int_equal(gt_sgx_date_decode(v, iso, sizeof iso), GT_SGX_DATE_BINARY);
    assert_string_equal(iso, "2022-05-17");
    assert_int_equal(gt_sgx_date_decode(0x20241332, iso, sizeof iso), GT_SGX_DATE_INVALID);
    assert_int_equal(gt_sgx_date_decode(0xffffffff, iso, sizeof iso), GT_SGX_DATE_INVALID);
}

static void lengths_and_damage(void **state)
{
    (void)state;
    gt_buf b = {0};
    sgxe_read("fortanix_test_enclave.sig", &b);
    gt_sgx_sigstruct s;
    gt_sgx_sigstruct_checks c;
    for (size_t n = 0; n < b.len; n += 97) {
        GT_ASSERT_CODE(gt_sgx_sigstruct_parse(b.data, n, &s), GT_E_TRUNCATED);
    }
    GT_ASSERT_CODE(gt_sgx_sigstruct_parse(b.data, b.len - 1, &s), GT_E_TRUNCATED);
    uint8_t big[GT_SGX_SIGSTRUCT_BYTES + 1] = {0};
    memcpy(big, b.data, b.len);
    GT_ASSERT_CODE(gt_sgx_sigstruct_parse(big, sizeof big, &s), GT_E_FORMAT);
    // Each named check fails on its own field.
    static const struct {
        size_t at;
        size_t check;  // index into the bools below
    } damage[] = {{0, 0}, {30, 1}, {17, 2}, {512, 3}, {128 + 383, 4}, {60, 6}, {911, 7},
                  {1000, 8}, {1030, 9}, {960, 10}, {1041, 11}, {1425, 12}};
    for (size_t i = 0; i < sizeof damage / sizeof damage[0]; i++) {
        uint8_t copy[GT_SGX_SIGSTRUCT_BYTES];
        memcpy(copy, b.data, sizeof copy);
        copy[damage[i].at] ^= 0x80;
        GT_ASSERT_OK(gt_sgx_sigstruct_parse(copy, sizeof copy, &s));
        GT_ASSERT_OK(gt_sgx_sigstruct_verify(&s, &c));
        const bool oks[] = {c.header_ok, c.header2_ok, c.vendor_ok, c.exponent_ok, c.modulus_ok,
                            c.signature_lt_modulus, c.reserved_ok[0], c.reserved_ok[1],
                            c.reserved_ok[2], c.reserved_ok[3], c.signature_ok, c.q1_ok,
                            c.q2_ok};
        if (oks[damage[i].check]) {
            fail_msg("byte %zu flipped: check %zu still passes", damage[i].at, damage[i].check);
        }
        assert_false(c.all_ok);
    }
    gt_buf_free_nowipe(&b);
}

// An Open Enclave signed ELF: oe_sgx_enclave_properties_t in .oeinfo, its size first and the
// SIGSTRUCT last (before an 8-byte end marker since 2019, at the very end before that).
static size_t oe_elf(uint8_t *f, size_t cap, const uint8_t *css, uint32_t props_size,
                     bool end_marker)
{
    const size_t sec = 0x100, shoff = 0x1000;
    memset(f, 0, cap);
    memcpy(f, "\x7f" "ELF\x02\x01\x01", 7);
    f[16] = 3;    // ET_DYN
    f[18] = 62;   // EM_X86_64
    f[20] = 1;
    gt_store_u64le(f + 32, 64);     // e_phoff (no program headers)
    gt_store_u64le(f + 40, shoff);  // e_shoff
    f[52] = 64;
    f[54] = 56;
    f[58] = 64;
    f[60] = 3;                      // e_shnum
    f[62] = 2;                      // e_shstrndx
    gt_store_u32le(f + sec, props_size);
    gt_store_u32le(f + sec + 4, 2);  // enclave type: SGX
    if (css != NULL) {
        memcpy(f + sec + props_size - GT_SGX_SIGSTRUCT_BYTES - (end_marker ? 8 : 0), css,
               GT_SGX_SIGSTRUCT_BYTES);
    }
    static const char names[] = "\0.oeinfo\0.shstrtab";
    memcpy(f + 0xf00, names, sizeof names);
    uint8_t *s1 = f + shoff + 64, *s2 = f + shoff + 128;
    gt_store_u32le(s1, 1);
    gt_store_u32le(s1 + 4, 1);
    gt_store_u64le(s1 + 24, sec);
    gt_store_u64le(s1 + 32, props_size);
    gt_store_u32le(s2, 9);
    gt_store_u32le(s2 + 4, 3);
    gt_store_u64le(s2 + 24, 0xf00);
    gt_store_u64le(s2 + 32, sizeof names);
    return shoff + 3 * 64;
}

static void sigstruct_in_open_enclave_elf(void **state)
{
    (void)state;
    gt_buf css = {0};
    sgxe_read("enarx_encl.ss", &css);
    static uint8_t f[0x1100];
    const struct {
        uint32_t size;
        bool marker;
        size_t at;
    } layouts[] = {{1968, true, 0x100 + 152}, {1856, false, 0x100 + 48}};
    for (size_t i = 0; i < 2; i++) {
        size_t len = oe_elf(f, sizeof f, css.data, layouts[i].size, layouts[i].marker);
        gt_sgx_sigstruct s;
        gt_sgx_sigstruct_checks c;
        size_t offset = 0;
        GT_ASSERT_OK(gt_sgx_sigstruct_find(f, len, &s, &offset));
        assert_int_equal(offset, layouts[i].at);
        assert_memory_equal(s.raw, css.data, GT_SGX_SIGSTRUCT_BYTES);
        GT_ASSERT_OK(gt_sgx_sigstruct_verify(&s, &c));
        assert_true(c.all_ok);
    }
    size_t len = oe_elf(f, sizeof f, NULL, 1968, true);  // not signed yet: all zero
    gt_sgx_sigstruct s;
    size_t offset = 0;
    GT_ASSERT_ERR(gt_sgx_sigstruct_find(f, len, &s, &offset), GT_E_NOTFOUND, "oesign");
    len = oe_elf(f, sizeof f, css.data, 4000, true);  // properties larger than the section
    gt_store_u64le(f + 0x1000 + 64 + 32, 1968);
    GT_ASSERT_CODE(gt_sgx_sigstruct_find(f, len, &s, &offset), GT_E_FORMAT);
    f[0x1000 + 64] = 0;  // no section named .oeinfo (nor .note.sgxmeta)
    GT_ASSERT_ERR(gt_sgx_sigstruct_find(f, len, &s, &offset), GT_E_NOTFOUND, "no .oeinfo");
    gt_buf_free_nowipe(&css);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sigstructs_parse_to_expected),
        cmocka_unit_test(sigstruct_in_signed_so),
        cmocka_unit_test(sigstruct_in_open_enclave_elf),
        cmocka_unit_test(fortanix_rsa_q1_q2_known_answers),
        cmocka_unit_test(key_mrsigner),
        cmocka_unit_test(resign_reproduces_real_sigstructs),
        cmocka_unit_test(sign_and_verify),
        cmocka_unit_test(dates),
        cmocka_unit_test(lengths_and_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
