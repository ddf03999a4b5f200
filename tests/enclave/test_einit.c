// enclave/: gt_enclave_einit_check. Every real image with its real SIGSTRUCT passes; every
// single-bit flip of a SIGSTRUCT (header, body, modulus, exponent, signature, reserved, q1, q2:
// all 14464 bits) is refused; each policy check refuses on its own.
#include "enclave_testlib.h"

#include <stdlib.h>

typedef struct {
    gt_sgx_sigstruct s;
    gt_sgx_measurement m;
} pair;

static void pair_load(pair *p, const char *sig, const char *image, gt_sgx_image_kind kind)
{
    gt_buf sb = {0}, ib = {0};
    sgxe_read(sig, &sb);
    sgxe_read(image, &ib);
    size_t offset = 0;
    GT_ASSERT_OK(gt_sgx_sigstruct_find(sb.data, sb.len, &p->s, &offset));
    GT_ASSERT_OK(gt_sgx_measure_image(ib.data, ib.len, kind, 0, 0, &p->m, NULL));
    gt_buf_free_nowipe(&sb);
    gt_buf_free_nowipe(&ib);
}

// The enclave as its SIGSTRUCT asks to be created.
static gt_sgx_einit_params params_for(const pair *p)
{
    return (gt_sgx_einit_params){.mrenclave = p->m.mrenclave, .secs_attributes = p->s.attributes,
                                 .secs_miscselect = p->s.miscselect,
                                 .secs_cet_attributes = p->s.cet_attributes,
                                 .allow_debug = false, .min_isvsvn = 0};
}

static void real_enclaves_pass(void **state)
{
    (void)state;
    static const struct {
        const char *sig, *image;
        gt_sgx_image_kind kind;
        const char *mrsigner;
    } real[] = {
        {"fortanix_test_enclave.sig", "fortanix_test_enclave.sgxs", GT_SGX_IMAGE_AUTO,
         "fb4bab3d6036ac1d730fa83d7366df1dd2dfeac194ef335d6854d8a6c6475542"},
        {"enarx_encl.ss", "enarx_encl.bin", GT_SGX_IMAGE_FLAT,
         "2f9f8fd4fe12d77232f1d87571ca8252ca27714efe7705e46222cffd5a22e8c4"},
        {"sdk_pingpong_2018.signed.so", "sdk_pingpong_2018.signed.so", GT_SGX_IMAGE_AUTO,
         "83d719e77deaca1470f6baf62a4d774303c899db69020f9c70ee1dfc08c7ce9e"},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        pair p;
        pair_load(&p, real[i].sig, real[i].image, real[i].kind);
        gt_sgx_einit_params ep = params_for(&p);
        gt_sgx_identity id;
        GT_ASSERT_OK(gt_enclave_einit_check(&p.s, &ep, &id));
        char hex[65];
        gt_hex_encode(hex, sizeof hex, id.mrsigner, sizeof id.mrsigner);
        assert_string_equal(hex, real[i].mrsigner);
        assert_memory_equal(id.mrenclave, p.m.mrenclave, 32);
        assert_true(id.attributes.flags & GT_SGX_ATTR_INIT);
    }
}

// Every single-bit flip anywhere in the 1808 bytes is refused, and so is every flip of the
// measured MRENCLAVE.
static void sweep(const char *sig, const char *image, gt_sgx_image_kind kind)
{
    pair p;
    pair_load(&p, sig, image, kind);
    gt_sgx_einit_params ep = params_for(&p);
    gt_sgx_identity id;
    GT_ASSERT_OK(gt_enclave_einit_check(&p.s, &ep, &id));
    size_t refused = 0, total = 0, by_code[GT_E_COUNT_] = {0};
    for (size_t bit = 0; bit < 8 * GT_SGX_SIGSTRUCT_BYTES; bit++) {
        uint8_t raw[GT_SGX_SIGSTRUCT_BYTES];
        memcpy(raw, p.s.raw, sizeof raw);
        raw[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        gt_sgx_sigstruct s;
        GT_ASSERT_OK(gt_sgx_sigstruct_parse(raw, sizeof raw, &s));
        gt_err e = gt_enclave_einit_check(&s, &ep, &id);
        total++;
        if (e.code == GT_E_NONE) {
            fail_msg("%s: flipping bit %zu (byte %zu) is accepted", sig, bit, bit / 8);
        }
        assert_true(e.code == GT_E_FORMAT || e.code == GT_E_AUTH || e.code == GT_E_POLICY);
        by_code[e.code]++;
        refused++;
    }
    assert_int_equal(refused, total);
    assert_int_equal(total, 14464);
    // Flips outside the signed bytes that no constant covers reach the signature check.
    assert_true(by_code[GT_E_AUTH] > 0 && by_code[GT_E_FORMAT] > 0);
    for (size_t bit = 0; bit < 256; bit++) {
        uint8_t mre[32];
        memcpy(mre, p.m.mrenclave, 32);
        mre[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        ep.mrenclave = mre;
        GT_ASSERT_ERR(gt_enclave_einit_check(&p.s, &ep, &id), GT_E_AUTH, "MRENCLAVE");
    }
    printf("%s: %zu of %zu single-bit flips refused (format %zu, auth %zu, policy %zu)\n", sig,
           refused, total, by_code[GT_E_FORMAT], by_code[GT_E_AUTH], by_code[GT_E_POLICY]);
}

static void bitflip_sweep_fortanix(void **state)
{
    (void)state;
    sweep("fortanix_test_enclave.sig", "fortanix_test_enclave.sgxs", GT_SGX_IMAGE_AUTO);
}

static void bitflip_sweep_enarx(void **state)
{
    (void)state;
    sweep("enarx_encl.ss", "enarx_encl.bin", GT_SGX_IMAGE_FLAT);
}

// Each policy line refuses on its own, with GT_E_POLICY and what was wrong.
static void policy_checks(void **state)
{
    (void)state;
    pair p;
    pair_load(&p, "fortanix_test_enclave.sig", "fortanix_test_enclave.sgxs", GT_SGX_IMAGE_AUTO);
    gt_sgx_identity id;
    gt_sgx_einit_params ep = params_for(&p);
    ep.secs_attributes.xfrm |= 0x4;  // AVX: XFRM bit 2 is outside the mask 0x...1b
    GT_ASSERT_OK(gt_enclave_einit_check(&p.s, &ep, &id));
    ep.secs_attributes.xfrm ^= 0x4 | 0x1;                   // x87 off: inside the mask
    GT_ASSERT_ERR(gt_enclave_einit_check(&p.s, &ep, &id), GT_E_POLICY, "ATTRIBUTES");
    ep = params_for(&p);
    ep.secs_attributes.flags &= ~GT_SGX_ATTR_MODE64BIT;
    GT_ASSERT_ERR(gt_enclave_einit_check(&p.s, &ep, &id), GT_E_POLICY, "ATTRIBUTES");
    ep = params_for(&p);
    ep.secs_attributes.flags |= GT_SGX_ATTR_INIT;  // ignored: EINIT sets it
    GT_ASSERT_OK(gt_enclave_einit_check(&p.s, &ep, &id));
    // Fortanix masks DEBUG out, so this SIGSTRUCT launches a DEBUG enclave too, but only where
    // the policy allows debug enclaves.
    ep.secs_attributes.flags |= GT_SGX_ATTR_DEBUG;
    GT_ASSERT_ERR(gt_enclave_einit_check(&p.s, &ep, &id), GT_E_POLICY, "DEBUG");
    ep.allow_debug = true;
    GT_ASSERT_OK(gt_enclave_einit_check(&p.s, &ep, &id));
    assert_true(id.debug);
    ep = params_for(&p);
    ep.secs_miscselect = 1;  // MISCMASK all ones
    GT_ASSERT_ERR(gt_enclave_einit_check(&p.s, &ep, &id), GT_E_POLICY, "MISCSELECT");
    ep = params_for(&p);
    ep.min_isvsvn = 1;
    GT_ASSERT_ERR(gt_enclave_einit_check(&p.s, &ep, &id), GT_E_POLICY, "ISVSVN");
    ep = params_for(&p);
    ep.mrenclave = NULL;
    GT_ASSERT_CODE(gt_enclave_einit_check(&p.s, &ep, &id), GT_E_ARG);
}

// Signed here: a DEBUG-masked production signature cannot launch a DEBUG enclave; a
// debug-signed header launches only a DEBUG one.
static void signed_here(void **state)
{
    (void)state;
    char path[512];
    gt_test_data_path(path, sizeof path, SGXE_DIR "enarx_encl.pem");
    gt_pkey *key = NULL;
    GT_ASSERT_OK(gt_pkey_load_pem(&key, path, true));
    pair p;
    pair_load(&p, "enarx_encl.ss", "enarx_encl.bin", GT_SGX_IMAGE_FLAT);
    gt_sgx_sign_params sp;
    gt_sgx_sign_params_default(&sp, 0);
    memcpy(sp.enclavehash, p.m.mrenclave, 32);
    gt_sgx_sigstruct s;
    GT_ASSERT_OK(gt_sgx_sigstruct_sign(&s, &sp, key));
    gt_sgx_einit_params ep = {.mrenclave = p.m.mrenclave, .secs_attributes = s.attributes,
                              .allow_debug = true};
    gt_sgx_identity id;
    GT_ASSERT_OK(gt_enclave_einit_check(&s, &ep, &id));
    ep.secs_attributes.flags |= GT_SGX_ATTR_DEBUG;
    GT_ASSERT_ERR(gt_enclave_einit_check(&s, &ep, &id), GT_E_POLICY, "ATTRIBUTES");
    sp.header_type = GT_SGX_HEADER_TYPE_DEBUG;
    GT_ASSERT_OK(gt_sgx_sigstruct_sign(&s, &sp, key));
    ep.secs_attributes = s.attributes;
    GT_ASSERT_ERR(gt_enclave_einit_check(&s, &ep, &id), GT_E_POLICY, "debug-signed");
    sp.attributes.flags |= GT_SGX_ATTR_DEBUG;
    GT_ASSERT_OK(gt_sgx_sigstruct_sign(&s, &sp, key));
    ep.secs_attributes = s.attributes;
    GT_ASSERT_OK(gt_enclave_einit_check(&s, &ep, &id));
    ep.allow_debug = false;
    GT_ASSERT_ERR(gt_enclave_einit_check(&s, &ep, &id), GT_E_POLICY, "DEBUG");
    gt_pkey_free(key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_enclaves_pass),
        cmocka_unit_test(bitflip_sweep_fortanix),
        cmocka_unit_test(bitflip_sweep_enarx),
        cmocka_unit_test(policy_checks),
        cmocka_unit_test(signed_here),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
