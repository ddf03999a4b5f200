// enclave/: EGETKEY's derivation matrix. For every key name (and every one of the 64 KEYPOLICY
// combinations of the seal key), changing one input changes the key if and only if the SDM
// includes that input for that key name and policy; requests above the current SVNs, and keys
// the enclave's attributes do not allow, are refused with the key zeroed; one seal key is
// checked against KEYDEPENDENCIES assembled here by hand.
#include "enclave_testlib.h"

typedef struct {
    gt_sgx_platform pf;
    gt_sgx_secs_identity secs;
    gt_sgx_keyrequest req;
} inputs;

static void baseline(inputs *in, uint16_t keyname, uint16_t policy)
{
    memset(in, 0, sizeof *in);
    for (int i = 0; i < 16; i++) {
        in->pf.root[i] = (uint8_t)(0x10 + i);
        in->pf.cpusvn[i] = 5;
        in->pf.ownerepoch[i] = (uint8_t)(0x30 + i);
        in->pf.seal_key_fuses[i] = (uint8_t)(0x40 + i);
        in->secs.isvfamilyid[i] = (uint8_t)(0x50 + i);
        in->secs.isvextprodid[i] = (uint8_t)(0x60 + i);
    }
    memset(in->secs.mrenclave, 0xe1, 32);
    memset(in->secs.mrsigner, 0x51, 32);
    memset(in->secs.configid, 0xc0, 64);
    in->secs.isvprodid = 3;
    in->secs.isvsvn = 4;
    in->secs.configsvn = 2;
    in->secs.attributes.flags = GT_SGX_ATTR_INIT | GT_SGX_ATTR_MODE64BIT |
                                GT_SGX_ATTR_PROVISIONKEY | GT_SGX_ATTR_EINITTOKEN_KEY |
                                GT_SGX_ATTR_KSS;
    in->secs.attributes.xfrm = 0x3;
    in->secs.miscselect = 1;
    in->req.keyname = keyname;
    in->req.keypolicy = policy;
    in->req.isvsvn = 4;
    in->req.configsvn = 2;
    memcpy(in->req.cpusvn, in->pf.cpusvn, 16);
    in->req.attributemask.flags = ~0ull;
    in->req.attributemask.xfrm = ~0x8ull;  // XFRM bit 3 is outside the request's mask
    in->req.miscmask = 0xffffffffu;
    memset(in->req.keyid, 0x4b, 32);
}

enum { SEAL = GT_SGX_KEYNAME_SEAL, REPORT = GT_SGX_KEYNAME_REPORT, PROV = GT_SGX_KEYNAME_PROVISION,
       PSEAL = GT_SGX_KEYNAME_PROVISION_SEAL, TOKEN = GT_SGX_KEYNAME_EINITTOKEN };

#define P(bit) ((policy & GT_SGX_KEYPOLICY_##bit) != 0)

// One input changed, and whether the SDM derives this key name/policy from it.
typedef struct {
    const char *what;
    void (*change)(inputs *in);
    bool (*included)(uint16_t k, uint16_t policy);
} variation;

static void c_mrenclave(inputs *in) { in->secs.mrenclave[7] ^= 1; }
static bool i_mrenclave(uint16_t k, uint16_t policy)
{
    return k == REPORT || (k == SEAL && P(MRENCLAVE));
}
static void c_mrsigner(inputs *in) { in->secs.mrsigner[0] ^= 0x80; }
static bool i_mrsigner(uint16_t k, uint16_t policy)
{
    return k == PROV || k == PSEAL || k == TOKEN || (k == SEAL && P(MRSIGNER));
}
static void c_isvprodid(inputs *in) { in->secs.isvprodid++; }
static bool i_isvprodid(uint16_t k, uint16_t policy)
{
    return k == PROV || k == PSEAL || k == TOKEN || (k == SEAL && !P(NOISVPRODID));
}
static void c_secs_isvsvn(inputs *in) { in->secs.isvsvn++; }
static bool i_secs_isvsvn(uint16_t k, uint16_t policy) { (void)policy; return k == TOKEN; }
static void c_req_isvsvn(inputs *in) { in->req.isvsvn--; }
static bool i_req_isvsvn(uint16_t k, uint16_t policy)
{
    (void)policy;
    return k == SEAL || k == PROV || k == PSEAL;
}
static void c_attr_in_mask(inputs *in) { in->secs.attributes.xfrm ^= 0x4; }
static bool i_attr_in_mask(uint16_t k, uint16_t policy)
{
    (void)policy;
    return k == SEAL || k == PROV || k == PSEAL || k == REPORT;
}
static void c_attr_out_of_mask(inputs *in) { in->secs.attributes.xfrm ^= 0x8; }
static bool i_attr_out_of_mask(uint16_t k, uint16_t policy) { (void)policy; return k == REPORT; }
static void c_attrmask(inputs *in) { in->req.attributemask.flags &= ~(1ull << 60); }
static bool i_attrmask(uint16_t k, uint16_t policy)
{
    (void)policy;
    return k == SEAL || k == PROV || k == PSEAL;
}
static void c_miscselect(inputs *in) { in->secs.miscselect ^= 1; }
static bool i_miscselect(uint16_t k, uint16_t policy)
{
    (void)policy;
    return k == SEAL || k == REPORT;
}
static void c_miscmask(inputs *in) { in->req.miscmask &= ~(1u << 31); }
static bool i_miscmask(uint16_t k, uint16_t policy) { (void)policy; return k == SEAL; }
static void c_keyid(inputs *in) { in->req.keyid[31] ^= 1; }
static bool i_keyid(uint16_t k, uint16_t policy)
{
    (void)policy;
    return k == SEAL || k == REPORT || k == TOKEN;
}
static void c_req_cpusvn(inputs *in) { in->req.cpusvn[3]--; }
static bool i_req_cpusvn(uint16_t k, uint16_t policy) { (void)policy; return k != REPORT; }
static void c_pf_cpusvn(inputs *in) { in->pf.cpusvn[3]++; }
static bool i_pf_cpusvn(uint16_t k, uint16_t policy) { (void)policy; return k == REPORT; }
static void c_ownerepoch(inputs *in) { in->pf.ownerepoch[15] ^= 1; }
static bool i_ownerepoch(uint16_t k, uint16_t policy)
{
    (void)policy;
    return k == SEAL || k == REPORT || k == TOKEN;
}
static void c_fuses(inputs *in) { in->pf.seal_key_fuses[0] ^= 1; }
static bool i_fuses(uint16_t k, uint16_t policy) { (void)policy; return k != PROV; }
static void c_root(inputs *in) { in->pf.root[9] ^= 1; }
static bool i_root(uint16_t k, uint16_t policy) { (void)k; (void)policy; return true; }
static void c_configid(inputs *in) { in->secs.configid[63] ^= 1; }
static bool i_configid(uint16_t k, uint16_t policy)
{
    return k == REPORT || (k == SEAL && P(CONFIGID));
}
static void c_secs_configsvn(inputs *in) { in->secs.configsvn++; }
static bool i_secs_configsvn(uint16_t k, uint16_t policy) { (void)policy; return k == REPORT; }
static void c_req_configsvn(inputs *in) { in->req.configsvn--; }
static bool i_req_configsvn(uint16_t k, uint16_t policy) { return k == SEAL && P(CONFIGID); }
static void c_family(inputs *in) { in->secs.isvfamilyid[2] ^= 1; }
static bool i_family(uint16_t k, uint16_t policy) { return k == SEAL && P(ISVFAMILYID); }
static void c_extprod(inputs *in) { in->secs.isvextprodid[2] ^= 1; }
static bool i_extprod(uint16_t k, uint16_t policy) { return k == SEAL && P(ISVEXTPRODID); }

static const variation VARIATIONS[] = {
    {"MRENCLAVE", c_mrenclave, i_mrenclave},
    {"MRSIGNER", c_mrsigner, i_mrsigner},
    {"ISVPRODID", c_isvprodid, i_isvprodid},
    {"SECS.ISVSVN", c_secs_isvsvn, i_secs_isvsvn},
    {"KEYREQUEST.ISVSVN", c_req_isvsvn, i_req_isvsvn},
    {"ATTRIBUTES bit under the mask", c_attr_in_mask, i_attr_in_mask},
    {"ATTRIBUTES bit outside the mask", c_attr_out_of_mask, i_attr_out_of_mask},
    {"ATTRIBUTEMASK", c_attrmask, i_attrmask},
    {"MISCSELECT", c_miscselect, i_miscselect},
    {"MISCMASK", c_miscmask, i_miscmask},
    {"KEYID", c_keyid, i_keyid},
    {"KEYREQUEST.CPUSVN", c_req_cpusvn, i_req_cpusvn},
    {"platform CPUSVN", c_pf_cpusvn, i_pf_cpusvn},
    {"OWNEREPOCH", c_ownerepoch, i_ownerepoch},
    {"SEAL_KEY_FUSES", c_fuses, i_fuses},
    {"platform root", c_root, i_root},
    {"CONFIGID", c_configid, i_configid},
    {"SECS.CONFIGSVN", c_secs_configsvn, i_secs_configsvn},
    {"KEYREQUEST.CONFIGSVN", c_req_configsvn, i_req_configsvn},
    {"ISVFAMILYID", c_family, i_family},
    {"ISVEXTPRODID", c_extprod, i_extprod},
};

static void derive(const inputs *in, uint8_t key[16])
{
    GT_ASSERT_OK(gt_sgx_egetkey(key, &in->pf, &in->secs, &in->req));
}

static size_t matrix_for(uint16_t keyname, uint16_t policy)
{
    inputs base;
    baseline(&base, keyname, policy);
    uint8_t k0[16], k1[16];
    derive(&base, k0);
    derive(&base, k1);
    assert_memory_equal(k0, k1, 16);  // deterministic
    size_t cases = 0;
    for (size_t v = 0; v < sizeof VARIATIONS / sizeof VARIATIONS[0]; v++) {
        inputs in = base;
        VARIATIONS[v].change(&in);
        derive(&in, k1);
        bool changed = memcmp(k0, k1, 16) != 0;
        bool want = VARIATIONS[v].included(keyname, policy);
        if (changed != want) {
            fail_msg("key name %u policy 0x%02x: changing %s %s the key", keyname, policy,
                     VARIATIONS[v].what, changed ? "changes" : "does not change");
        }
        cases++;
    }
    return cases;
}

static void derivation_matrix(void **state)
{
    (void)state;
    size_t cases = 0;
    for (uint16_t policy = 0; policy < 64; policy++) {
        cases += matrix_for(SEAL, policy);
    }
    const uint16_t others[] = {REPORT, PROV, PSEAL, TOKEN};
    for (size_t i = 0; i < 4; i++) {
        cases += matrix_for(others[i], 0);
        // KEYPOLICY is the seal key's alone.
        inputs a, b;
        baseline(&a, others[i], 0);
        baseline(&b, others[i], GT_SGX_KEYPOLICY_MRENCLAVE | GT_SGX_KEYPOLICY_MRSIGNER);
        uint8_t ka[16], kb[16];
        derive(&a, ka);
        derive(&b, kb);
        assert_memory_equal(ka, kb, 16);
    }
    // Every seal policy gives its own key, and every key name its own.
    uint8_t keys[64 + 4][16];
    for (uint16_t policy = 0; policy < 64; policy++) {
        inputs in;
        baseline(&in, SEAL, policy);
        derive(&in, keys[policy]);
    }
    for (size_t i = 0; i < 4; i++) {
        inputs in;
        baseline(&in, others[i], 0);
        derive(&in, keys[64 + i]);
    }
    for (size_t i = 0; i < 68; i++) {
        for (size_t j = i + 1; j < 68; j++) {
            assert_memory_not_equal(keys[i], keys[j], 16);
        }
    }
    printf("egetkey: %zu (key name, policy, input) cases, each as docs/enclave.md tabulates\n",
           cases);
}

static void refused(const inputs *in, gt_code code, const char *needle)
{
    uint8_t key[16];
    memset(key, 0xaa, sizeof key);
    GT_ASSERT_ERR(gt_sgx_egetkey(key, &in->pf, &in->secs, &in->req), code, needle);
    static const uint8_t zero[16];
    assert_memory_equal(key, zero, 16);
}

static void refusals(void **state)
{
    (void)state;
    inputs in;
    const uint16_t svn_keys[] = {SEAL, PROV, PSEAL};
    for (size_t i = 0; i < 3; i++) {
        baseline(&in, svn_keys[i], GT_SGX_KEYPOLICY_MRSIGNER);
        in.req.isvsvn = (uint16_t)(in.secs.isvsvn + 1);
        refused(&in, GT_E_POLICY, "ISVSVN");
        baseline(&in, svn_keys[i], GT_SGX_KEYPOLICY_MRSIGNER);
        in.req.cpusvn[15] = 6;  // one component above the platform's
        refused(&in, GT_E_POLICY, "CPUSVN");
    }
    baseline(&in, TOKEN, 0);
    in.req.cpusvn[0] = 6;
    refused(&in, GT_E_POLICY, "CPUSVN");
    baseline(&in, REPORT, 0);  // the report key takes the platform's CPUSVN, not the request's
    in.req.cpusvn[0] = 6;
    uint8_t key[16];
    GT_ASSERT_OK(gt_sgx_egetkey(key, &in.pf, &in.secs, &in.req));
    baseline(&in, SEAL, GT_SGX_KEYPOLICY_CONFIGID);
    in.req.configsvn = 3;
    refused(&in, GT_E_POLICY, "CONFIGSVN");
    baseline(&in, PROV, 0);
    in.secs.attributes.flags &= ~GT_SGX_ATTR_PROVISIONKEY;
    refused(&in, GT_E_POLICY, "PROVISIONKEY");
    in.req.keyname = PSEAL;
    refused(&in, GT_E_POLICY, "PROVISIONKEY");
    baseline(&in, TOKEN, 0);
    in.secs.attributes.flags &= ~GT_SGX_ATTR_EINITTOKEN_KEY;
    refused(&in, GT_E_POLICY, "EINITTOKEN_KEY");
    baseline(&in, SEAL, GT_SGX_KEYPOLICY_ISVFAMILYID);
    in.secs.attributes.flags &= ~GT_SGX_ATTR_KSS;
    refused(&in, GT_E_POLICY, "KSS");
    baseline(&in, SEAL, 0x40);
    refused(&in, GT_E_ARG, "reserved");
    baseline(&in, 5, 0);
    refused(&in, GT_E_ARG, "KEYNAME");
}

// The seal key under MRSIGNER, from KEYDEPENDENCIES written out here field by field.
static void seal_key_by_hand(void **state)
{
    (void)state;
    inputs in;
    baseline(&in, SEAL, GT_SGX_KEYPOLICY_MRSIGNER);
    uint8_t d[642] = {0}, *p = d;
    gt_store_u32le(p, SEAL);              // KEYNAME (u16) ...
    p[2] = 3;                             // ... ISVPRODID
    p[4] = 4;                             // ISVSVN (the request's)
    p += 6;
    memcpy(p, in.pf.ownerepoch, 16);
    p += 16;
    gt_store_u64le(p, in.secs.attributes.flags);         // ATTRIBUTES & mask (flags: all)
    gt_store_u64le(p + 8, 0x3 & ~0x8ull);
    p += 16;
    gt_store_u64le(p, ~0ull);                            // ATTRIBUTESMASK
    gt_store_u64le(p + 8, ~0x8ull);
    p += 16;
    p += 32;                                             // MRENCLAVE: not in the policy
    memcpy(p, in.secs.mrsigner, 32);
    p += 32;
    memcpy(p, in.req.keyid, 32);
    p += 32;
    memcpy(p, in.pf.seal_key_fuses, 16);
    p += 16;
    memcpy(p, in.req.cpusvn, 16);
    p += 16 + 352;                                       // CPUSVN, PADDING
    gt_store_u32le(p, 1);                                // MISCSELECT & MISCMASK
    gt_store_u32le(p + 4, 0xffffffffu);
    p += 8;
    p[0] = GT_SGX_KEYPOLICY_MRSIGNER;                    // KEYPOLICY; KSS fields stay zero
    uint8_t want[16], got[16];
    GT_ASSERT_OK(gt_aes128_cmac(want, d, sizeof d, in.pf.root));
    GT_ASSERT_OK(gt_sgx_egetkey(got, &in.pf, &in.secs, &in.req));
    assert_memory_equal(got, want, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(derivation_matrix),
        cmocka_unit_test(refusals),
        cmocka_unit_test(seal_key_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
