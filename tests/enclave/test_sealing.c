// enclave/: the platform root sealed to the host TEE, and sealing on EGETKEY's seal key. Each
// attack is its own test: a changed byte of the sealed platform, a platform file from another
// sim root, a blob opened by another MRENCLAVE (MRENCLAVE policy) or MRSIGNER (MRSIGNER policy),
// at a lower ISVSVN, on another platform, with any byte changed. SNP and TDX: the real paths,
// failing cleanly here (no /dev/sev-guest; TDX has no sealing key).
#include "enclave_testlib.h"

#include <stdlib.h>
#include <sys/stat.h>

typedef struct {
    char dir[4096];
    char root_a[4200], root_b[4200], pf_dir[4200];
    gt_sgx_platform pf;
    gt_sgx_secs_identity app;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->root_a, sizeof f->root_a, "%s/sim-a", f->dir);
    snprintf(f->root_b, sizeof f->root_b, "%s/sim-b", f->dir);
    snprintf(f->pf_dir, sizeof f->pf_dir, "%s/platform", f->dir);
    gt_sgx_platform_options o = {.host = GT_TEE_SIM, .sim_root = f->root_a};
    GT_ASSERT_OK(gt_sgx_platform_open(f->pf_dir, &o, &f->pf, NULL));
    memset(f->app.mrenclave, 0xe1, 32);
    memset(f->app.mrsigner, 0x51, 32);
    f->app.isvprodid = 7;
    f->app.isvsvn = 3;
    f->app.attributes.flags = GT_SGX_ATTR_INIT | GT_SGX_ATTR_MODE64BIT;
    f->app.attributes.xfrm = 3;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gt_secure_zero(&f->pf, sizeof f->pf);
    gt_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void platform_path(const fixture *f, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", f->pf_dir, GT_SGX_PLATFORM_FILE);
}

// First open creates a random root; a reopen reads back the same root, CPUSVN, OWNEREPOCH and
// fuses from the sealed file (0600), labelled insecure-simulation on sim.
static void platform_reopens_to_the_same_root(void **state)
{
    fixture *f = *state;
    gt_sgx_platform again;
    gt_sgx_platform_info info;
    gt_sgx_platform_options o = {.host = GT_TEE_SIM, .sim_root = f->root_a};
    GT_ASSERT_OK(gt_sgx_platform_open(f->pf_dir, &o, &again, &info));
    assert_false(info.created);
    assert_true(info.insecure_simulation);
    assert_memory_equal(&again, &f->pf, sizeof again);
    static const uint8_t zero[16];
    assert_memory_not_equal(f->pf.root, zero, 16);
    assert_memory_not_equal(f->pf.ownerepoch, zero, 16);
    uint8_t id[GT_SGX_PLATFORM_ID_BYTES];
    GT_ASSERT_OK(gt_sgx_platform_id(&f->pf, id));
    assert_memory_equal(id, info.platform_id, sizeof id);
    char path[4400];
    platform_path(f, path, sizeof path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    // A second platform elsewhere has its own root.
    char other[4400];
    snprintf(other, sizeof other, "%s/platform2", f->dir);
    GT_ASSERT_OK(gt_sgx_platform_open(other, &o, &again, &info));
    assert_true(info.created);
    assert_memory_not_equal(again.root, f->pf.root, 16);
}

// Every single byte of the sealed platform file changed: refused, never a different root.
static void platform_every_changed_byte_refused(void **state)
{
    fixture *f = *state;
    char path[4400];
    platform_path(f, path, sizeof path);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 1 << 16, &b));
    assert_true(b.len > 100);
    gt_sgx_platform_options o = {.host = GT_TEE_SIM, .sim_root = f->root_a};
    for (size_t i = 0; i < b.len; i++) {
        b.data[i] ^= 0x20;
        GT_ASSERT_OK(gt_file_write_atomic(path, b.data, b.len, 0600));
        gt_sgx_platform pf;
        gt_err e = gt_sgx_platform_open(f->pf_dir, &o, &pf, NULL);
        if (gt_is_ok(e)) {
            fail_msg("byte %zu changed and the platform still opened", i);
        }
        b.data[i] ^= 0x20;
    }
    GT_ASSERT_OK(gt_file_write_atomic(path, b.data, b.len, 0600));
    GT_ASSERT_CODE(gt_file_write_atomic(path, b.data, b.len - 1, 0600), GT_E_NONE);
    gt_sgx_platform pf;
    GT_ASSERT_CODE(gt_sgx_platform_open(f->pf_dir, &o, &pf, NULL), GT_E_FORMAT);
    gt_buf_free_nowipe(&b);
}

// A sealed platform copied to a host with another sim root does not open there.
static void platform_from_another_host_refused(void **state)
{
    fixture *f = *state;
    gt_sgx_platform pf;
    gt_sgx_platform_options b = {.host = GT_TEE_SIM, .sim_root = f->root_b};
    GT_ASSERT_ERR(gt_sgx_platform_open(f->pf_dir, &b, &pf, NULL), GT_E_AUTH,
                  "not sealed by this sim instance");
    static const uint8_t zero[sizeof pf];
    assert_memory_equal(&pf, zero, sizeof pf);  // nothing of a half-opened root left
    // ... nor as another host type.
    gt_sgx_platform_options snp = {.host = GT_TEE_SNP, .dev_path = "/nonexistent/sev-guest"};
    GT_ASSERT_CODE(gt_sgx_platform_open(f->pf_dir, &snp, &pf, NULL), GT_E_STATE);
}

// SEV-SNP: the root is sealed with SNP_GET_DERIVED_KEY; without the guest device that fails
// cleanly and writes nothing. TDX: no sealing key in TDX 1.x, refused with that reason.
static void snp_without_device_and_tdx_fail_cleanly(void **state)
{
    fixture *f = *state;
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/snp", f->dir);
    gt_sgx_platform pf;
    gt_sgx_platform_options snp = {.host = GT_TEE_SNP, .dev_path = "/nonexistent/sev-guest"};
    GT_ASSERT_ERR(gt_sgx_platform_open(dir, &snp, &pf, NULL), GT_E_NOTFOUND, "sev-guest");
    assert_int_equal(gt_test_count_files(dir), 0);
    uint8_t key[GT_SNP_DERIVED_KEY_BYTES];
    GT_ASSERT_CODE(gt_sev_guest_get_derived_key(key, "/nonexistent/sev-guest", 0,
                                                GT_SNP_KEY_FIELD_MEASUREMENT),
                   GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_sev_guest_get_derived_key(key, NULL, 4, 0), GT_E_ARG);
    GT_ASSERT_CODE(gt_sev_guest_get_derived_key(key, NULL, 0, 0x40), GT_E_ARG);
    gt_sgx_platform_options tdx = {.host = GT_TEE_TDX};
    GT_ASSERT_ERR(gt_sgx_platform_open(dir, &tdx, &pf, NULL), GT_E_UNSUPPORTED,
                  "no sealing key");
    assert_int_equal(gt_test_count_files(dir), 0);
}

static void seal_text(const fixture *f, uint16_t policy, const gt_sgx_secs_identity *who,
                      gt_buf *blob)
{
    gt_sgx_seal_params p = {.keypolicy = policy};
    static const char pt[] = "the dataset key", aad[] = "label";
    GT_ASSERT_OK(gt_sgx_seal(blob, &f->pf, who, &p, (const uint8_t *)pt, sizeof pt,
                             (const uint8_t *)aad, sizeof aad));
}

static gt_err unseal_as(const gt_sgx_platform *pf, const gt_sgx_secs_identity *who,
                        const gt_buf *blob)
{
    gt_buf pt = {0};
    gt_span aad = {0};
    gt_err e = gt_sgx_unseal(&pt, &aad, pf, who, blob->data, blob->len);
    if (gt_is_ok(e)) {
        assert_int_equal(pt.len, sizeof "the dataset key");
        assert_memory_equal(pt.data, "the dataset key", pt.len);
        assert_int_equal(aad.len, sizeof "label");
        assert_memory_equal(aad.data, "label", aad.len);
    }
    gt_buf_free(&pt);
    return e;
}

// Sealed data survives the platform being closed and reopened from its sealed file.
static void sealed_data_survives_a_platform_reopen(void **state)
{
    fixture *f = *state;
    gt_buf blob = {0};
    seal_text(f, GT_SGX_KEYPOLICY_MRENCLAVE, &f->app, &blob);
    gt_sgx_platform again;
    gt_sgx_platform_options o = {.host = GT_TEE_SIM, .sim_root = f->root_a};
    GT_ASSERT_OK(gt_sgx_platform_open(f->pf_dir, &o, &again, NULL));
    GT_ASSERT_OK(unseal_as(&again, &f->app, &blob));
    // The plaintext is not in the blob.
    assert_null(memmem(blob.data, blob.len, "dataset", 7));
    gt_buf_free_nowipe(&blob);
}

static void mrenclave_policy_refuses_another_mrenclave(void **state)
{
    fixture *f = *state;
    gt_buf blob = {0};
    seal_text(f, GT_SGX_KEYPOLICY_MRENCLAVE, &f->app, &blob);
    gt_sgx_secs_identity other = f->app;
    other.mrenclave[31] ^= 1;
    GT_ASSERT_CODE(unseal_as(&f->pf, &other, &blob), GT_E_AUTH);
    GT_ASSERT_OK(unseal_as(&f->pf, &f->app, &blob));
    gt_buf_free_nowipe(&blob);
}

static void mrsigner_policy_follows_the_signer(void **state)
{
    fixture *f = *state;
    gt_buf blob = {0};
    seal_text(f, GT_SGX_KEYPOLICY_MRSIGNER, &f->app, &blob);
    gt_sgx_secs_identity update = f->app, stranger = f->app, product = f->app;
    update.mrenclave[0] ^= 0xff;   // a new build by the same signer: accepted
    update.isvsvn = 4;             // ... a later version too
    GT_ASSERT_OK(unseal_as(&f->pf, &update, &blob));
    stranger.mrsigner[5] ^= 1;     // another signer: refused
    GT_ASSERT_CODE(unseal_as(&f->pf, &stranger, &blob), GT_E_AUTH);
    product.isvprodid = 8;         // another product of the same signer: refused
    GT_ASSERT_CODE(unseal_as(&f->pf, &product, &blob), GT_E_AUTH);
    gt_buf_free_nowipe(&blob);
}

// A blob sealed at ISVSVN 3 is refused to the same enclave at ISVSVN 2 (EGETKEY: SVN above
// current), and a blob cannot be sealed with a KEYPOLICY no identity enters.
static void lower_isvsvn_refused(void **state)
{
    fixture *f = *state;
    gt_buf blob = {0};
    seal_text(f, GT_SGX_KEYPOLICY_MRSIGNER, &f->app, &blob);
    gt_sgx_secs_identity older = f->app;
    older.isvsvn = 2;
    GT_ASSERT_ERR(unseal_as(&f->pf, &older, &blob), GT_E_POLICY, "ISVSVN 3 above");
    gt_sgx_seal_params none = {.keypolicy = 0};
    gt_buf b2 = {0};
    GT_ASSERT_CODE(gt_sgx_seal(&b2, &f->pf, &f->app, &none, (const uint8_t *)"x", 1, NULL, 0),
                   GT_E_ARG);
    gt_buf_free_nowipe(&blob);
}

// CPUSVN: a platform whose TCB was raised still opens blobs of its older TCB; a platform whose
// CPUSVN is below the blob's refuses (EGETKEY), and so does another platform root.
static void cpusvn_and_another_platform(void **state)
{
    fixture *f = *state;
    gt_buf blob = {0};
    seal_text(f, GT_SGX_KEYPOLICY_MRENCLAVE, &f->app, &blob);
    gt_sgx_platform raised = f->pf, lowered = f->pf, other = f->pf;
    raised.cpusvn[3]++;
    GT_ASSERT_OK(unseal_as(&raised, &f->app, &blob));
    lowered.cpusvn[3]--;
    GT_ASSERT_ERR(unseal_as(&lowered, &f->app, &blob), GT_E_POLICY, "CPUSVN");
    other.root[0] ^= 1;
    GT_ASSERT_CODE(unseal_as(&other, &f->app, &blob), GT_E_AUTH);
    other = f->pf;
    other.ownerepoch[0] ^= 1;
    GT_ASSERT_CODE(unseal_as(&other, &f->app, &blob), GT_E_AUTH);
    gt_buf_free_nowipe(&blob);
}

// Every byte of a blob (KEYREQUEST fields, IV, lengths, AAD, ciphertext, tag) changed: refused.
static void every_changed_blob_byte_refused(void **state)
{
    fixture *f = *state;
    gt_buf blob = {0};
    seal_text(f, GT_SGX_KEYPOLICY_MRENCLAVE, &f->app, &blob);
    for (size_t i = 0; i < blob.len; i++) {
        blob.data[i] ^= 0x01;
        if (gt_is_ok(unseal_as(&f->pf, &f->app, &blob))) {
            fail_msg("byte %zu changed and the blob still opened", i);
        }
        blob.data[i] ^= 0x01;
    }
    GT_ASSERT_OK(unseal_as(&f->pf, &f->app, &blob));
    GT_ASSERT_CODE(unseal_as(&f->pf, &f->app, &(gt_buf){blob.data, blob.len - 1, blob.len}),
                   GT_E_TRUNCATED);
    gt_buf_free_nowipe(&blob);
}

// Each blob has its own KEYID and IV (so its own AES key); the parsed KEYREQUEST is what was
// asked (keyname SEAL, the SDK's default masks, the enclave's ISVSVN, the platform's CPUSVN).
static void blobs_have_their_own_keyid(void **state)
{
    fixture *f = *state;
    gt_buf a = {0}, b = {0};
    seal_text(f, GT_SGX_KEYPOLICY_MRSIGNER, &f->app, &a);
    seal_text(f, GT_SGX_KEYPOLICY_MRSIGNER, &f->app, &b);
    gt_sgx_sealed sa, sb;
    GT_ASSERT_OK(gt_sgx_sealed_parse(&sa, a.data, a.len));
    GT_ASSERT_OK(gt_sgx_sealed_parse(&sb, b.data, b.len));
    assert_memory_not_equal(sa.req.keyid, sb.req.keyid, 32);
    assert_memory_not_equal(sa.iv, sb.iv, sizeof sa.iv);
    assert_int_equal(sa.req.keyname, GT_SGX_KEYNAME_SEAL);
    assert_int_equal(sa.req.keypolicy, GT_SGX_KEYPOLICY_MRSIGNER);
    assert_int_equal(sa.req.isvsvn, 3);
    assert_memory_equal(sa.req.cpusvn, f->pf.cpusvn, 16);
    assert_true(sa.req.attributemask.flags == 0xff0000000000000bull);
    assert_int_equal(sa.req.miscmask, 0xf0000000u);
    assert_int_equal(sa.header.len, GT_SGX_SEALED_HEADER_BYTES);
    assert_int_equal(sa.ciphertext.len, sizeof "the dataset key" + GT_AEAD_TAG_BYTES);
    gt_buf_free_nowipe(&a);
    gt_buf_free_nowipe(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(platform_reopens_to_the_same_root, setup, teardown),
        cmocka_unit_test_setup_teardown(platform_every_changed_byte_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(platform_from_another_host_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(snp_without_device_and_tdx_fail_cleanly, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(sealed_data_survives_a_platform_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(mrenclave_policy_refuses_another_mrenclave, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(mrsigner_policy_follows_the_signer, setup, teardown),
        cmocka_unit_test_setup_teardown(lower_isvsvn_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(cpusvn_and_another_platform, setup, teardown),
        cmocka_unit_test_setup_teardown(every_changed_blob_byte_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(blobs_have_their_own_keyid, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
