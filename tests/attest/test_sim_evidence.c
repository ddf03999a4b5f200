// attest/: the sim backend and the evidence envelope. Round trip, wrong root, every bit of the
// evidence flipped, every truncation, report_data and nonce binding, policy without
// allow_simulation, version checks, and the report_data builder.
#include "testlib.h"

#include <gputravel/attest.h>

#include "attest/claims.h"
#include "attest/sim_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    char dir[4096];
    char root_dir[4200];
    char pub[4300];
    gt_pkey *root;
    gt_buf pub_pem;
    gt_attest_file root_file;
    gt_policy *allow_sim;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    gt_test_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->root_dir, sizeof f->root_dir, "%s/root", f->dir);
    GT_ASSERT_OK(gt_sim_root_open(&f->root, f->pub, sizeof f->pub, f->root_dir, true));
    GT_ASSERT_OK(gt_file_read_all(f->pub, 1 << 16, &f->pub_pem));
    f->root_file = (gt_attest_file){.path = f->pub, .data = gt_buf_span(&f->pub_pem)};
    static const char pol[] = "{\"allow_simulation\": true}";
    GT_ASSERT_OK(gt_policy_parse(&f->allow_sim, pol, strlen(pol)));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gt_pkey_free(f->root);
    gt_buf_free(&f->pub_pem);
    gt_policy_free(f->allow_sim);
    gt_test_rmtree(f->dir);
    free(f);
    return 0;
}

static gt_sim_claims sample_claims(void)
{
    gt_sim_claims c = {.svn = 7, .issued_at = 1700000000};
    for (int i = 0; i < GT_MEASUREMENT_BYTES; i++) {
        c.measurement[i] = (uint8_t)(0xA0 + i);
    }
    for (int i = 0; i < GT_REPORT_DATA_BYTES; i++) {
        c.report_data[i] = (uint8_t)i;
    }
    return c;
}

static void make_evidence_bytes(const fixture *f, const gt_sim_claims *c, gt_buf *out)
{
    gt_evidence ev = {0};
    GT_ASSERT_OK(gt_sim_evidence_create(&ev, c, f->root));
    GT_ASSERT_OK(gt_evidence_encode(&ev, out));
    gt_evidence_free(&ev);
}

static const char *claim_str(const gt_appraisal *a, const char *name)
{
    const cJSON *c = gt_claims_get(a->claims, name);
    return cJSON_IsString(c) ? c->valuestring : "";
}

static void round_trip_accepted_with_claims(void **state)
{
    fixture *f = *state;
    gt_sim_claims c = sample_claims();
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);

    gt_evidence ev = {0};
    GT_ASSERT_OK(gt_evidence_parse(&ev, bytes.data, bytes.len, GT_TEE_AUTO));
    assert_int_equal(ev.type, GT_TEE_SIM);
    assert_int_equal(ev.version, 1);
    assert_true(ev.enveloped);

    gt_appraise_params p = {.roots = &f->root_file, .root_count = 1,
                            .expected_report_data = c.report_data};
    gt_appraisal a;
    GT_ASSERT_OK(gt_attest_appraise(&a, &ev, f->allow_sim, &p));
    assert_int_equal(a.verdict, GT_VERDICT_ACCEPTED);
    assert_int_equal(a.reason_count, 0);
    assert_true(a.signature_valid);
    assert_true(a.chain_valid);
    assert_true(a.insecure_simulation);
    assert_string_equal(claim_str(&a, "tee"), "sim");
    assert_string_equal(claim_str(&a, "security"), GT_INSECURE_SIMULATION);
    char hex[129];
    gt_hex_encode(hex, sizeof hex, c.measurement, sizeof c.measurement);
    assert_string_equal(claim_str(&a, "measurement"), hex);
    gt_hex_encode(hex, sizeof hex, c.report_data, sizeof c.report_data);
    assert_string_equal(claim_str(&a, "report_data"), hex);
    assert_int_equal(cJSON_GetObjectItem(a.claims, "svn")->valuedouble, 7);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(a.claims, "debug")));
    // Reported as insecure-simulation in the output too, even when accepted.
    cJSON *j = gt_appraisal_to_json(&a);
    assert_string_equal(cJSON_GetObjectItem(j, "security")->valuestring, GT_INSECURE_SIMULATION);
    assert_string_equal(cJSON_GetObjectItem(j, "verdict")->valuestring, "accepted");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "tcb_status")));
    assert_true(a.warning_count > 0);
    cJSON_Delete(j);
    gt_appraisal_free(&a);

    // The file round trip gives the same bytes.
    char path[4200];
    snprintf(path, sizeof path, "%s/ev.bin", f->dir);
    GT_ASSERT_OK(gt_evidence_save_file(&ev, path));
    gt_evidence ev2 = {0};
    GT_ASSERT_OK(gt_evidence_load_file(&ev2, path, GT_TEE_SIM));
    assert_int_equal(ev2.body.len, ev.body.len);
    assert_memory_equal(ev2.body.data, ev.body.data, ev.body.len);
    gt_evidence_free(&ev2);
    gt_evidence_free(&ev);
    gt_buf_free(&bytes);
}

// A device says what holds its memory (devd, a GPU on a cuda trip, host memory): the claim
// round-trips signed, reads as "device_memory", and is a device claim only.
static void device_memory_claim(void **state)
{
    fixture *f = *state;
    const gt_sim_device_memory kinds[] = {GT_SIM_MEMORY_UNSTATED, GT_SIM_MEMORY_DEVD,
                                          GT_SIM_MEMORY_CUDA, GT_SIM_MEMORY_HOST};
    const char *names[] = {"unstated", "devd", "cuda", "host"};
    for (int i = 0; i < 4; i++) {
        gt_sim_claims c = sample_claims();
        c.device = true;
        c.cc_mode = true;
        c.memory = kinds[i];
        gt_buf bytes = {0};
        make_evidence_bytes(f, &c, &bytes);
        gt_evidence ev = {0};
        GT_ASSERT_OK(gt_evidence_parse(&ev, bytes.data, bytes.len, GT_TEE_AUTO));
        gt_appraise_params p = {.roots = &f->root_file, .root_count = 1,
                                .expected_report_data = c.report_data};
        gt_appraisal a;
        GT_ASSERT_OK(gt_attest_appraise(&a, &ev, f->allow_sim, &p));
        assert_int_equal(a.verdict, GT_VERDICT_ACCEPTED);
        assert_string_equal(claim_str(&a, "device_memory"), names[i]);
        assert_string_equal(gt_sim_device_memory_name(kinds[i]), names[i]);
        gt_appraisal_free(&a);
        gt_evidence_free(&ev);
        gt_buf_free(&bytes);
    }
    assert_string_equal(gt_sim_device_memory_name((gt_sim_device_memory)4), "unknown");
    // Not a device: no memory claim can be made, and none appears.
    gt_sim_claims c = sample_claims();
    c.memory = GT_SIM_MEMORY_HOST;
    gt_evidence ev = {0};
    gt_err e = gt_sim_evidence_create(&ev, &c, f->root);
    GT_ASSERT_CODE(e, GT_E_ARG);
    assert_non_null(strstr(e.msg, "device memory is a device claim"));
    c.device = true;
    c.memory = (gt_sim_device_memory)4;
    GT_ASSERT_CODE(gt_sim_evidence_create(&ev, &c, f->root), GT_E_ARG);
    // The memory bits without the device flag do not parse (the envelope body starts at 12,
    // the flags at body offset 2).
    c = sample_claims();
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);
    bytes.data[14] |= 0x18;
    GT_ASSERT_OK(gt_evidence_parse(&ev, bytes.data, bytes.len, GT_TEE_AUTO));  // the envelope
    gt_appraise_params p = {.roots = &f->root_file, .root_count = 1,
                            .expected_report_data = c.report_data};
    gt_appraisal a;
    GT_ASSERT_OK(gt_attest_appraise(&a, &ev, f->allow_sim, &p));  // the report: invalid
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    assert_true(gt_appraisal_has_reason(&a, "sim evidence: device memory without the device flag"));
    gt_appraisal_free(&a);
    gt_evidence_free(&ev);
    gt_buf_free(&bytes);
}

static void collect_measures_the_running_executable(void **state)
{
    fixture *f = *state;
    uint8_t rd[GT_REPORT_DATA_BYTES] = {1, 2, 3};
    gt_collect_params cp = {.type = GT_TEE_SIM, .sim_root = f->root_dir, .sim_svn = 3};
    gt_evidence ev = {0};
    GT_ASSERT_OK(gt_attest_collect(&ev, &cp, rd));
    uint8_t self[GT_MEASUREMENT_BYTES];
    GT_ASSERT_OK(gt_hash_file(GT_HASH_SHA384, self, "/proc/self/exe"));
    gt_sim_report r;
    GT_ASSERT_OK(gt_sim_report_parse(&r, ev.body.data, ev.body.len));
    assert_memory_equal(r.claims.measurement, self, sizeof self);
    assert_memory_equal(r.claims.report_data, rd, sizeof rd);
    assert_int_equal(r.claims.svn, 3);
    gt_evidence_free(&ev);
}

static void root_is_created_once_and_reused(void **state)
{
    fixture *f = *state;
    gt_pkey *again = NULL;
    char pub[4300];
    GT_ASSERT_OK(gt_sim_root_open(&again, pub, sizeof pub, f->root_dir, false));
    assert_string_equal(pub, f->pub);
    uint8_t a[200], b[200];
    size_t na = 0, nb = 0;
    GT_ASSERT_OK(gt_pkey_ec_public_xy(f->root, a, sizeof a, &na));
    GT_ASSERT_OK(gt_pkey_ec_public_xy(again, b, sizeof b, &nb));
    assert_int_equal(na, 96);  // P-384
    assert_memory_equal(a, b, na);
    gt_pkey_free(again);
    struct stat st;
    char key[4300];
    snprintf(key, sizeof key, "%s/root-key.pem", f->root_dir);
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0077, 0);  // private key readable by its owner only

    // Without create, a missing root is an error, and nothing is made.
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/none", f->dir);
    gt_pkey *k = NULL;
    GT_ASSERT_CODE(gt_sim_root_open(&k, NULL, 0, missing, false), GT_E_NOTFOUND);
    assert_null(k);
    assert_false(gt_path_exists(missing));
}

// The library reads no environment: with no root passed in and none set, every call that needs
// one fails saying what to set, although GT_SIM_ROOT, XDG_DATA_HOME and HOME all name usable
// places; nothing is created there. A root passed in (an argument, or gt_sim_root_set) is used.
static void sim_root_is_never_guessed(void **state)
{
    fixture *f = *state;
    char env_root[4300], home[4300], xdg[4300], dir[4096];
    snprintf(env_root, sizeof env_root, "%s/env-root", f->dir);
    snprintf(home, sizeof home, "%s/home", f->dir);
    snprintf(xdg, sizeof xdg, "%s/xdg", f->dir);
    char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("GT_SIM_ROOT", env_root, 1);
    setenv("HOME", home, 1);
    setenv("XDG_DATA_HOME", xdg, 1);
    GT_ASSERT_OK(gt_sim_root_set(NULL));

    gt_err e = gt_sim_root_dir(dir, sizeof dir, NULL);
    assert_int_equal(e.code, GT_E_STATE);
    assert_non_null(strstr(e.msg, "GT_SIM_ROOT"));      // what a CLI user sets
    assert_non_null(strstr(e.msg, "gt_sim_root_set"));  // what a library caller does
    gt_pkey *k = NULL;
    GT_ASSERT_CODE(gt_sim_root_open(&k, NULL, 0, NULL, true), GT_E_STATE);
    assert_null(k);
    uint8_t rd[GT_REPORT_DATA_BYTES] = {7, 7, 7};
    gt_collect_params cp = {.type = GT_TEE_SIM};
    gt_evidence ev = {0};
    GT_ASSERT_CODE(gt_attest_collect(&ev, &cp, rd), GT_E_STATE);
    assert_int_equal(ev.body.len, 0);

    // An explicit directory needs no configuration and wins over the process-wide root.
    GT_ASSERT_OK(gt_sim_root_dir(dir, sizeof dir, "/tmp/explicit"));
    assert_string_equal(dir, "/tmp/explicit");
    GT_ASSERT_OK(gt_sim_root_set(f->root_dir));
    GT_ASSERT_OK(gt_sim_root_dir(dir, sizeof dir, "/tmp/explicit"));
    assert_string_equal(dir, "/tmp/explicit");
    GT_ASSERT_OK(gt_sim_root_dir(dir, sizeof dir, NULL));
    assert_string_equal(dir, f->root_dir);

    // The set root signs: its public key (as bytes alone, no file) verifies the evidence.
    GT_ASSERT_OK(gt_attest_collect(&ev, &cp, rd));
    gt_attest_file bytes_only = {.path = NULL, .data = f->root_file.data};
    gt_appraise_params p = {.roots = &bytes_only, .root_count = 1, .expected_report_data = rd};
    gt_appraisal a;
    GT_ASSERT_OK(gt_attest_appraise(&a, &ev, f->allow_sim, &p));
    assert_int_equal(a.verdict, GT_VERDICT_ACCEPTED);
    gt_appraisal_free(&a);
    gt_evidence_free(&ev);
    assert_false(gt_path_exists(env_root));
    assert_false(gt_path_exists(home));
    assert_false(gt_path_exists(xdg));

    // A path too long is refused and changes nothing; "" clears the root again.
    static char too_long[4200];
    memset(too_long, 'a', sizeof too_long - 1);
    GT_ASSERT_CODE(gt_sim_root_set(too_long), GT_E_LIMIT);
    GT_ASSERT_OK(gt_sim_root_dir(dir, sizeof dir, NULL));
    assert_string_equal(dir, f->root_dir);
    GT_ASSERT_OK(gt_sim_root_set(""));
    GT_ASSERT_CODE(gt_sim_root_dir(dir, sizeof dir, NULL), GT_E_STATE);
    unsetenv("GT_SIM_ROOT");
    unsetenv("XDG_DATA_HOME");
    if (saved_home != NULL) {
        setenv("HOME", saved_home, 1);
    }
    free(saved_home);
}

static void wrong_root_is_invalid(void **state)
{
    fixture *f = *state;
    char other_dir[4200], other_pub[4300];
    snprintf(other_dir, sizeof other_dir, "%s/other", f->dir);
    gt_pkey *other = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&other, other_pub, sizeof other_pub, other_dir, true));
    gt_buf pem = {0};
    GT_ASSERT_OK(gt_file_read_all(other_pub, 1 << 16, &pem));
    gt_attest_file wrong = {.path = other_pub, .data = gt_buf_span(&pem)};

    gt_sim_claims c = sample_claims();
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);
    gt_appraise_params p = {.roots = &wrong, .root_count = 1};
    gt_appraisal a;
    GT_ASSERT_OK(gt_attest_appraise_bytes(&a, bytes.data, bytes.len, GT_TEE_AUTO, f->allow_sim, &p));
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    assert_false(a.signature_valid);
    assert_true(gt_appraisal_has_reason(&a, "signature does not verify with the given root"));
    assert_true(gt_appraisal_has_reason(&a, "evidence names root key id"));
    gt_appraisal_free(&a);

    // Evidence signed by the other root (the "attacker" embeds its own key id) is still invalid
    // for a verifier holding the real root.
    gt_buf forged = {0};
    gt_evidence ev = {0};
    GT_ASSERT_OK(gt_sim_evidence_create(&ev, &c, other));
    GT_ASSERT_OK(gt_evidence_encode(&ev, &forged));
    gt_appraise_params real = {.roots = &f->root_file, .root_count = 1};
    GT_ASSERT_OK(gt_attest_appraise_bytes(&a, forged.data, forged.len, GT_TEE_SIM, f->allow_sim,
                                          &real));
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    gt_appraisal_free(&a);

    // No root at all: invalid, and the message says what is missing.
    gt_appraise_params none = {0};
    GT_ASSERT_OK(gt_attest_appraise(&a, &ev, f->allow_sim, &none));
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    assert_true(gt_appraisal_has_reason(&a, "no root given"));
    gt_appraisal_free(&a);

    gt_evidence_free(&ev);
    gt_buf_free(&forged);
    gt_buf_free(&pem);
    gt_buf_free(&bytes);
    gt_pkey_free(other);
}

static void every_flipped_bit_is_refused(void **state)
{
    fixture *f = *state;
    gt_sim_claims c = sample_claims();
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);
    gt_appraise_params p = {.roots = &f->root_file, .root_count = 1};
    size_t invalid = 0;
    gt_log_set_level(GT_LOG_ERROR);  // one insecure-simulation warning per appraisal otherwise
    for (size_t i = 0; i < bytes.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            bytes.data[i] ^= (uint8_t)(1u << bit);
            gt_appraisal a;
            GT_ASSERT_OK(gt_attest_appraise_bytes(&a, bytes.data, bytes.len, GT_TEE_AUTO,
                                                  f->allow_sim, &p));
            if (a.verdict == GT_VERDICT_ACCEPTED) {
                fail_msg("flipping byte %zu bit %d was accepted", i, bit);
            }
            assert_true(a.reason_count > 0);
            invalid += a.verdict == GT_VERDICT_INVALID;
            gt_appraisal_free(&a);
            bytes.data[i] ^= (uint8_t)(1u << bit);
        }
    }
    gt_log_set_level(GT_LOG_INFO);
    // Every flip breaks parsing or the signature: none is a merely "rejected" evidence.
    assert_int_equal(invalid, bytes.len * 8);
    gt_buf_free(&bytes);
}

static void every_truncation_and_extension_is_invalid(void **state)
{
    fixture *f = *state;
    gt_sim_claims c = sample_claims();
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);
    gt_appraise_params p = {.roots = &f->root_file, .root_count = 1};
    for (size_t n = 0; n < bytes.len; n++) {
        gt_appraisal a;
        GT_ASSERT_OK(gt_attest_appraise_bytes(&a, bytes.data, n, GT_TEE_AUTO, f->allow_sim, &p));
        assert_int_equal(a.verdict, GT_VERDICT_INVALID);
        assert_true(a.reason_count > 0);
        gt_appraisal_free(&a);
    }
    // One byte too many: the envelope is exact.
    GT_ASSERT_OK(gt_buf_append(&bytes, "", 1));
    gt_evidence ev = {0};
    GT_ASSERT_CODE(gt_evidence_parse(&ev, bytes.data, bytes.len, GT_TEE_AUTO), GT_E_FORMAT);
    assert_int_equal(ev.type, GT_TEE_AUTO);
    assert_null(ev.body.data);
    // Oversized input is refused before parsing.
    GT_ASSERT_CODE(gt_evidence_parse(&ev, bytes.data, GT_EVIDENCE_MAX_BYTES + 1, GT_TEE_AUTO),
                   GT_E_LIMIT);
    gt_buf_free(&bytes);
}

static void versions_and_types_are_checked(void **state)
{
    fixture *f = *state;
    gt_sim_claims c = sample_claims();
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);
    gt_evidence ev = {0};

    bytes.data[4] = 2;  // envelope version 2
    GT_ASSERT_CODE(gt_evidence_parse(&ev, bytes.data, bytes.len, GT_TEE_AUTO), GT_E_UNSUPPORTED);
    bytes.data[4] = 1;
    bytes.data[12] = 9;  // sim report version 9 (the body starts at byte 12)
    GT_ASSERT_CODE(gt_evidence_parse(&ev, bytes.data, bytes.len, GT_TEE_AUTO), GT_E_UNSUPPORTED);
    bytes.data[12] = 1;
    bytes.data[6] = 77;  // unknown type tag
    GT_ASSERT_CODE(gt_evidence_parse(&ev, bytes.data, bytes.len, GT_TEE_AUTO), GT_E_FORMAT);
    bytes.data[6] = GT_TEE_SIM;
    // Expecting another type: a clear error, not a misparse.
    gt_err e = gt_evidence_parse(&ev, bytes.data, bytes.len, GT_TEE_TDX);
    assert_int_equal(e.code, GT_E_FORMAT);
    assert_non_null(strstr(e.msg, "evidence is sim, but tdx was expected"));
    gt_appraisal a;
    gt_appraise_params p = {.roots = &f->root_file, .root_count = 1};
    GT_ASSERT_OK(gt_attest_appraise_bytes(&a, bytes.data, bytes.len, GT_TEE_SNP, f->allow_sim, &p));
    assert_int_equal(a.verdict, GT_VERDICT_INVALID);
    assert_true(gt_appraisal_has_reason(&a, "but snp was expected"));
    gt_appraisal_free(&a);
    // Unknown bytes: unrecognised format.
    static const uint8_t junk[64] = {0xde, 0xad, 0xbe, 0xef};
    e = gt_evidence_parse(&ev, junk, sizeof junk, GT_TEE_AUTO);
    assert_int_equal(e.code, GT_E_FORMAT);
    assert_non_null(strstr(e.msg, "unrecognised format"));
    gt_buf_free(&bytes);
}

static void report_data_and_nonce_binding(void **state)
{
    fixture *f = *state;
    gt_sim_claims c = sample_claims();
    uint8_t nonce[16] = {0xAB, 0xCD};
    memset(c.report_data, 0, sizeof c.report_data);
    memcpy(c.report_data, nonce, sizeof nonce);  // report_data = nonce || zeros
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);
    gt_appraisal a;

    gt_appraise_params p = {.roots = &f->root_file, .root_count = 1, .nonce = nonce,
                            .nonce_len = sizeof nonce};
    GT_ASSERT_OK(gt_attest_appraise_bytes(&a, bytes.data, bytes.len, GT_TEE_SIM, f->allow_sim, &p));
    assert_int_equal(a.verdict, GT_VERDICT_ACCEPTED);
    gt_appraisal_free(&a);

    uint8_t other[GT_REPORT_DATA_BYTES];
    memcpy(other, c.report_data, sizeof other);
    other[63] ^= 1;
    uint8_t wrong_nonce[16] = {0xAB, 0xCE};
    p.expected_report_data = other;
    p.nonce = wrong_nonce;
    GT_ASSERT_OK(gt_attest_appraise_bytes(&a, bytes.data, bytes.len, GT_TEE_SIM, f->allow_sim, &p));
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
    assert_true(a.signature_valid);
    assert_int_equal(a.reason_count, 2);
    assert_true(gt_appraisal_has_reason(&a, "does not match the expected report_data"));
    assert_true(gt_appraisal_has_reason(&a, "does not match the nonce"));
    gt_appraisal_free(&a);
    gt_buf_free(&bytes);
}

static void policy_without_allow_simulation_rejects(void **state)
{
    fixture *f = *state;
    gt_sim_claims c = sample_claims();
    c.debug = true;
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);
    gt_appraise_params p = {.roots = &f->root_file, .root_count = 1};
    gt_appraisal a;
    // The default policy (NULL) refuses sim, and this debug sim TEE for its debug flag too.
    GT_ASSERT_OK(gt_attest_appraise_bytes(&a, bytes.data, bytes.len, GT_TEE_AUTO, NULL, &p));
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
    assert_true(a.signature_valid && a.chain_valid);
    assert_int_equal(a.reason_count, 2);
    assert_true(gt_appraisal_has_reason(&a, "does not set allow_simulation"));
    assert_true(gt_appraisal_has_reason(&a, "debug TEE refused: the policy does not set "
                                            "allow_debug (the sim evidence has debug enabled)"));
    gt_appraisal_free(&a);

    // A policy accepting only hardware, forbidding debug, requiring svn 9: every reason at once.
    static const char pol[] = "{\"accepted_tee_types\": [\"tdx\", \"snp\"], \"debug_forbidden\": "
                              "true, \"min_svn\": {\"sim\": {\"svn\": 9}}}";
    gt_policy *strict = NULL;
    GT_ASSERT_OK(gt_policy_parse(&strict, pol, strlen(pol)));
    GT_ASSERT_OK(gt_attest_appraise_bytes(&a, bytes.data, bytes.len, GT_TEE_AUTO, strict, &p));
    assert_int_equal(a.verdict, GT_VERDICT_REJECTED);
    assert_int_equal(a.reason_count, 4);
    assert_true(gt_appraisal_has_reason(&a, "TEE type sim is not accepted (accepted: tdx, snp)"));
    assert_true(gt_appraisal_has_reason(&a, "does not set allow_simulation"));
    assert_true(gt_appraisal_has_reason(&a, "debug TEE refused: the policy does not set allow_debug"));
    assert_true(gt_appraisal_has_reason(&a, "svn 7 is below the minimum 9"));
    gt_appraisal_free(&a);
    gt_policy_free(strict);
    gt_buf_free(&bytes);
}

static gt_verdict appraise_under(const fixture *f, const gt_buf *bytes, const char *pol,
                                 gt_appraisal *a)
{
    gt_policy *policy = NULL;
    GT_ASSERT_OK(gt_policy_parse(&policy, pol, strlen(pol)));
    gt_appraise_params p = {.roots = &f->root_file, .root_count = 1};
    GT_ASSERT_OK(gt_attest_appraise_bytes(a, bytes->data, bytes->len, GT_TEE_SIM, policy, &p));
    gt_policy_free(policy);
    return a->verdict;
}

// Authentic debug sim evidence: refused under every policy that does not set allow_debug (the
// demo's {"allow_simulation": true}, and an old policy's "debug_forbidden": false), accepted
// only with allow_debug, and then with a warning saying so.
static void debug_sim_refused_unless_allow_debug(void **state)
{
    fixture *f = *state;
    gt_sim_claims c = sample_claims();
    c.debug = true;
    gt_buf bytes = {0};
    make_evidence_bytes(f, &c, &bytes);
    static const char *const refusing[] = {
        "{\"allow_simulation\": true}",
        "{\"allow_simulation\": true, \"debug_forbidden\": false}",
        "{\"allow_simulation\": true, \"debug_forbidden\": true}",
        "{\"allow_simulation\": true, \"allow_debug\": false}",
    };
    gt_appraisal a;
    for (size_t i = 0; i < sizeof refusing / sizeof refusing[0]; i++) {
        assert_int_equal(appraise_under(f, &bytes, refusing[i], &a), GT_VERDICT_REJECTED);
        assert_true(a.signature_valid && a.chain_valid);  // authentic, refused for debug only
        assert_int_equal(a.reason_count, 1);
        assert_true(gt_appraisal_has_reason(&a, "debug TEE refused: the policy does not set "
                                                "allow_debug (the sim evidence has debug "
                                                "enabled)"));
        gt_appraisal_free(&a);
    }
    static const char allow[] = "{\"allow_simulation\": true, \"allow_debug\": true}";
    assert_int_equal(appraise_under(f, &bytes, allow, &a), GT_VERDICT_ACCEPTED);
    gt_strlist w = {a.warnings, a.warning_count};
    assert_true(gt_strlist_contains(&w, "the sim evidence has debug enabled: accepted because the "
                                        "policy sets allow_debug"));
    gt_appraisal_free(&a);
    gt_buf_free(&bytes);

    // The same claims without debug: accepted by the demo's policy, no debug warning.
    c.debug = false;
    make_evidence_bytes(f, &c, &bytes);
    assert_int_equal(appraise_under(f, &bytes, refusing[0], &a), GT_VERDICT_ACCEPTED);
    assert_false(gt_appraisal_has_reason(&a, "debug"));
    w = (gt_strlist){a.warnings, a.warning_count};
    assert_false(gt_strlist_contains(&w, "allow_debug"));
    gt_appraisal_free(&a);
    gt_buf_free(&bytes);
}

static void report_data_builder_is_length_prefixed(void **state)
{
    (void)state;
    uint8_t a[64], b[64], want[64];
    const uint8_t n1[] = {'a', 'b'}, n2[] = {'a'}, k1[] = {'c'}, k2[] = {'b', 'c'};
    GT_ASSERT_OK(gt_attest_report_data_build(a, "tag", n1, 2, k1, 1, NULL, 0));
    GT_ASSERT_OK(gt_attest_report_data_build(b, "tag", n2, 1, k2, 2, NULL, 0));
    assert_memory_not_equal(a, b, 64);  // moving a byte between parts changes the result

    // The exact construction: SHA-512 over (u32be len || bytes) for tag, nonce, key, agreement.
    uint8_t msg[64] = {0};
    size_t m = 0;
    const char *parts[4] = {"tag", "ab", "c", ""};
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(parts[i]);
        gt_store_u32be(msg + m, (uint32_t)n);
        memcpy(msg + m + 4, parts[i], n);
        m += 4 + n;
    }
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA512, want, msg, m));
    assert_memory_equal(a, want, 64);

    GT_ASSERT_CODE(gt_attest_report_data_build(a, "", n1, 2, NULL, 0, NULL, 0), GT_E_ARG);
    GT_ASSERT_CODE(gt_attest_report_data_build(a, "t", NULL, 2, NULL, 0, NULL, 0), GT_E_ARG);
}

static void type_names(void **state)
{
    (void)state;
    gt_tee_type t = GT_TEE_AUTO;
    GT_ASSERT_OK(gt_tee_type_parse("nvgpu", &t));
    assert_int_equal(t, GT_TEE_NVGPU);
    GT_ASSERT_CODE(gt_tee_type_parse("TDX", &t), GT_E_ARG);
    assert_int_equal(t, GT_TEE_NVGPU);  // unchanged on failure
    assert_string_equal(gt_tee_type_name(GT_TEE_SGX), "sgx");
    assert_string_equal(gt_tee_type_name((gt_tee_type)42), "unknown");
    assert_string_equal(gt_verdict_name(GT_VERDICT_REJECTED), "rejected");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_accepted_with_claims),
        cmocka_unit_test(device_memory_claim),
        cmocka_unit_test(collect_measures_the_running_executable),
        cmocka_unit_test(root_is_created_once_and_reused),
        cmocka_unit_test(sim_root_is_never_guessed),
        cmocka_unit_test(wrong_root_is_invalid),
        cmocka_unit_test(every_flipped_bit_is_refused),
        cmocka_unit_test(every_truncation_and_extension_is_invalid),
        cmocka_unit_test(versions_and_types_are_checked),
        cmocka_unit_test(report_data_and_nonce_binding),
        cmocka_unit_test(policy_without_allow_simulation_rejects),
        cmocka_unit_test(debug_sim_refused_unless_allow_debug),
        cmocka_unit_test(report_data_builder_is_length_prefixed),
        cmocka_unit_test(type_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
