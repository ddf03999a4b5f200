// The sim device through the public device API, against a real devd child process: transfers of
// many sizes through the bounce slots, buffer policy, memory limit, device evidence.
#include "testlib.h"

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/device.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gputravel/devproto.h>

#define SLOT_BYTES (64u * 1024)
#define CHUNK (SLOT_BYTES - 16)
#define MEM_LIMIT (32u << 20)

typedef gt_test_devd fixture;

static int setup(void **state)
{
    static const char *const args[] = {"--mem-limit", "32MiB", "--slot-size", "64KiB", "--slots",
                                       "3", "--threads", "1", NULL};
    return gt_test_devd_setup(state, args);
}

static gt_device *open_dev(fixture *f)
{
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device *dev = NULL;
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    assert_int_equal(gt_device_get_kind(dev), GT_DEVICE_SIM);
    return dev;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (uint8_t)(x >> 24);
    }
}

static void test_round_trip_sizes(void **state)
{
    fixture *f = *state;
    gt_device *dev = open_dev(f);
    // around the chunk size, several chunks, more chunks than slots, odd sizes
    const size_t sizes[] = {0, 1, 15, 16, 17, 4096, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK,
                            3 * CHUNK, 3 * CHUNK + 1, 7 * CHUNK + 13, (1u << 20) + 3,
                            (5u << 20) + 777};
    size_t max = (5u << 20) + 777 + 100;
    uint8_t *src = malloc(max), *back = malloc(max);
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, max, 0, &b));
    uint64_t sz = 0;
    GT_ASSERT_OK(gt_device_buf_size(dev, b, &sz));
    assert_int_equal(sz, max);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], off = i * 7 % 64;
        fill(src, n, (uint32_t)i);
        memset(back, 0xee, max);
        GT_ASSERT_OK(gt_device_copy_in(dev, b, off, src, n));
        GT_ASSERT_OK(gt_device_copy_out(dev, back, b, off, n));
        assert_memory_equal(src, back, n);
        assert_int_equal(back[n], 0xee);  // nothing written past the end
    }
    // partial reads of what was written
    fill(src, 3 * CHUNK, 99);
    GT_ASSERT_OK(gt_device_copy_in(dev, b, 0, src, 3 * CHUNK));
    GT_ASSERT_OK(gt_device_copy_out(dev, back, b, CHUNK - 5, CHUNK + 10));
    assert_memory_equal(src + CHUNK - 5, back, CHUNK + 10);
    // memset
    GT_ASSERT_OK(gt_device_memset(dev, b, 10, 0xab, 1000));
    GT_ASSERT_OK(gt_device_copy_out(dev, back, b, 0, 1020));
    assert_memory_equal(back, src, 10);
    for (int i = 10; i < 1010; i++) {
        assert_int_equal(back[i], 0xab);
    }
    assert_memory_equal(back + 1010, src + 1010, 10);
    GT_ASSERT_OK(gt_device_sync(dev));
    GT_ASSERT_OK(gt_device_free(dev, b));
    free(src);
    free(back);
    gt_device_close(dev);
}

static void test_no_readback_refused(void **state)
{
    fixture *f = *state;
    gt_device *dev = open_dev(f);
    gt_dbuf b = 0, plain = 0;
    uint8_t data[1000], back[1000];
    fill(data, sizeof data, 7);
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof data, GT_DBUF_NO_READBACK, &b));
    GT_ASSERT_OK(gt_device_copy_in(dev, b, 0, data, sizeof data));
    memset(back, 0x5a, sizeof back);
    GT_ASSERT_CODE(gt_device_copy_out(dev, back, b, 0, sizeof back), GT_E_POLICY);
    GT_ASSERT_CODE(gt_device_copy_out(dev, back, b, 10, 1), GT_E_POLICY);
    for (size_t i = 0; i < sizeof back; i++) {
        assert_int_equal(back[i], 0x5a);  // nothing came back
    }
    // the session goes on
    GT_ASSERT_OK(gt_device_alloc(dev, 64, 0, &plain));
    GT_ASSERT_OK(gt_device_copy_in(dev, plain, 0, data, 64));
    GT_ASSERT_OK(gt_device_copy_out(dev, back, plain, 0, 64));
    assert_memory_equal(back, data, 64);
    GT_ASSERT_CODE(gt_device_alloc(dev, 64, 0x80, &plain), GT_E_ARG);  // unknown flag
    GT_ASSERT_OK(gt_device_free(dev, b));
    gt_device_close(dev);
}

static void test_bad_handles_and_ranges(void **state)
{
    fixture *f = *state;
    gt_device *dev = open_dev(f);
    gt_dbuf b = 0;
    uint8_t data[256] = {0};
    GT_ASSERT_OK(gt_device_alloc(dev, 100, 0, &b));
    GT_ASSERT_CODE(gt_device_copy_in(dev, b, 0, data, 101), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_in(dev, b, 101, data, 0), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_in(dev, b, UINT64_MAX, data, 2), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_out(dev, data, b, 50, 51), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_memset(dev, b, 99, 0, 2), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_in(dev, b + 1000, 0, data, 1), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_free(dev, 0), GT_E_NOTFOUND);
    gt_dbuf z = 77;
    GT_ASSERT_CODE(gt_device_alloc(dev, 0, 0, &z), GT_E_ARG);
    assert_int_equal(z, 0);
    GT_ASSERT_OK(gt_device_free(dev, b));
    GT_ASSERT_CODE(gt_device_free(dev, b), GT_E_NOTFOUND);  // handles are never reused
    gt_device_close(dev);
}

static void test_memory_limit(void **state)
{
    fixture *f = *state;
    gt_device *dev = open_dev(f);
    gt_dbuf a = 0, b = 0, c = 0;
    gt_err e = gt_device_alloc(dev, (uint64_t)MEM_LIMIT + 1, 0, &a);
    assert_int_equal(e.code, GT_E_LIMIT);
    assert_non_null(strstr(e.msg, "mem-limit"));
    assert_int_equal(a, 0);
    GT_ASSERT_OK(gt_device_alloc(dev, MEM_LIMIT / 2, 0, &a));
    GT_ASSERT_OK(gt_device_alloc(dev, MEM_LIMIT / 4, 0, &b));
    e = gt_device_alloc(dev, MEM_LIMIT / 2, 0, &c);
    assert_int_equal(e.code, GT_E_LIMIT);
    assert_non_null(strstr(e.msg, "device memory exhausted"));
    GT_ASSERT_CODE(gt_device_alloc(dev, UINT64_MAX, 0, &c), GT_E_LIMIT);
    // freeing makes room again (first fit into the hole)
    GT_ASSERT_OK(gt_device_free(dev, a));
    GT_ASSERT_OK(gt_device_alloc(dev, MEM_LIMIT / 2, 0, &c));
    gt_device_sim_stat st;
    GT_ASSERT_OK(gt_device_sim_stat_get(dev, &st));
    assert_int_equal(st.mem_limit, MEM_LIMIT);
    assert_int_equal(st.bytes_in_use, MEM_LIMIT / 2 + MEM_LIMIT / 4);
    assert_int_equal(st.buffers_live, 2);
    gt_device_close(dev);
}

static void test_session_end_frees_and_wipes(void **state)
{
    fixture *f = *state;
    gt_device *dev = open_dev(f);
    gt_dbuf b = 0;
    uint8_t *data = malloc(MEM_LIMIT);
    fill(data, 1u << 20, 3);
    GT_ASSERT_OK(gt_device_alloc(dev, 1u << 20, GT_DBUF_NO_READBACK, &b));
    GT_ASSERT_OK(gt_device_copy_in(dev, b, 0, data, 1u << 20));
    gt_device_sim_stat before;
    GT_ASSERT_OK(gt_device_sim_stat_get(dev, &before));
    gt_device_close(dev);  // ends the session without freeing

    dev = open_dev(f);
    gt_device_sim_stat after;
    GT_ASSERT_OK(gt_device_sim_stat_get(dev, &after));
    assert_int_equal(after.bytes_in_use, 0);
    assert_int_equal(after.buffers_live, 0);
    assert_true(after.bytes_wiped >= before.bytes_wiped + (1u << 20));
    assert_int_equal(after.sessions, before.sessions + 1);
    // the whole device reads back as zero: nothing of the last session is left
    GT_ASSERT_OK(gt_device_alloc(dev, MEM_LIMIT, 0, &b));
    memset(data, 0xff, MEM_LIMIT);
    GT_ASSERT_OK(gt_device_copy_out(dev, data, b, 0, MEM_LIMIT));
    for (size_t i = 0; i < MEM_LIMIT; i++) {
        if (data[i] != 0) {
            fail_msg("device byte %zu is 0x%02x after the owner left", i, data[i]);
        }
    }
    free(data);
    gt_device_close(dev);
}

static void write_file(const char *path, const void *p, size_t n)
{
    GT_ASSERT_OK(gt_file_write_atomic(path, p, n, 0600));
}

static void test_device_evidence(void **state)
{
    fixture *f = *state;
    gt_device *dev = open_dev(f);
    gt_span ev = {0};
    uint8_t rd[GT_REPORT_DATA_BYTES];
    GT_ASSERT_OK(gt_device_sim_evidence(dev, &ev, rd));
    cJSON *claims = NULL;
    GT_ASSERT_OK(gt_sim_device_evidence_appraise(ev, rd, NULL, NULL, &claims));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(claims, "device")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(claims, "cc_mode")));
    assert_string_equal(cJSON_GetObjectItem(claims, "security")->valuestring,
                        GT_INSECURE_SIMULATION);
    // the measurement is devd's executable
    uint8_t exe[GT_SHA384_BYTES];
    char hex[2 * GT_SHA384_BYTES + 1];
    GT_ASSERT_OK(gt_hash_file(GT_HASH_SHA384, exe, GT_CLI_PATH));
    gt_hex_encode(hex, sizeof hex, exe, sizeof exe);
    assert_string_equal(cJSON_GetObjectItem(claims, "measurement")->valuestring, hex);
    cJSON_Delete(claims);
    // bound to this session: another report_data is refused
    uint8_t other[GT_REPORT_DATA_BYTES];
    memcpy(other, rd, sizeof other);
    other[5] ^= 1;
    assert_false(gt_is_ok(gt_sim_device_evidence_appraise(ev, other, NULL, NULL, NULL)));
    // certified by the vendor root only: another root does not certify it
    char other_root[1024], other_pub[1200];
    snprintf(other_root, sizeof other_root, "%s/other-root", f->dir);
    gt_pkey *k = NULL;
    GT_ASSERT_OK(gt_sim_root_open(&k, other_pub, sizeof other_pub, other_root, true));
    gt_pkey_free(k);
    gt_err e = gt_sim_device_evidence_appraise(ev, rd, other_pub, NULL, NULL);
    assert_int_equal(e.code, GT_E_AUTH);
    assert_non_null(strstr(e.msg, "not certified"));
    // every flipped byte outside the identity PEM is caught (format, signature, binding)
    gt_sim_device_bundle b;
    GT_ASSERT_OK(gt_sim_device_bundle_parse(ev, &b));
    size_t pem_at = (size_t)(b.identity_pem.data - ev.data);
    uint8_t *copy = malloc(ev.len);
    for (size_t i = 0; i < ev.len; i += 5) {
        if (i >= pem_at && i < pem_at + b.identity_pem.len) {
            continue;
        }
        memcpy(copy, ev.data, ev.len);
        copy[i] ^= 0x01;
        if (gt_is_ok(gt_sim_device_evidence_appraise((gt_span){copy, ev.len}, rd, NULL, NULL,
                                                     NULL))) {
            fail_msg("flipped byte %zu of device evidence was accepted", i);
        }
    }
    for (size_t n = 0; n < ev.len; n += 97) {
        assert_false(gt_is_ok(gt_sim_device_evidence_appraise((gt_span){ev.data, n}, rd, NULL,
                                                              NULL, NULL)));
    }
    free(copy);

    // `gputravel verify` appraises the device's evidence like any other evidence
    char evpath[700], polpath[700], idpub[1200], rdhex[2 * GT_REPORT_DATA_BYTES + 1];
    snprintf(evpath, sizeof evpath, "%s/device.gtev", f->dir);
    snprintf(polpath, sizeof polpath, "%s/device-policy.json", f->dir);
    snprintf(idpub, sizeof idpub, "%s/sim-root/devd-identity/root-pub.pem", f->dir);
    write_file(evpath, b.gtev.data, b.gtev.len);
    const char *pol = "{\"accepted_tee_types\": [\"sim\"], \"allow_simulation\": true, "
                      "\"gpu\": {\"cc_mode\": true}}";
    write_file(polpath, pol, strlen(pol));
    gt_hex_encode(rdhex, sizeof rdhex, rd, sizeof rd);
    const char *args[] = {"verify", "--evidence", evpath, "--root", idpub, "--policy", polpath,
                          "--report-data", rdhex, NULL};
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, args);
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    if (rc != 0) {
        fail_msg("gputravel verify exited %d: %s", rc, (char *)out.data);
    }
    gt_buf_free(&out);
    gt_hex_encode(rdhex, sizeof rdhex, other, sizeof other);
    assert_int_equal(gt_test_run_cli(NULL, args), 1);  // rejected: another session
    gt_device_close(dev);
}

static gt_err reject_device(void *ctx, gt_span evidence, const uint8_t *rd)
{
    (void)ctx;
    (void)evidence;
    (void)rd;
    return gt_errf(GT_E_POLICY, "test policy: no device is good enough");
}

static gt_err reject_client(void *ctx, const uint8_t *rd, gt_buf *evidence)
{
    (void)ctx;
    (void)rd;
    return gt_buf_append(evidence, "not evidence", 12);
}

static gt_err debug_client(void *ctx, const uint8_t *rd, gt_buf *evidence)
{
    (void)ctx;
    gt_collect_params p;
    memset(&p, 0, sizeof p);
    p.type = GT_TEE_SIM;
    p.sim_debug = true;
    gt_evidence ev;
    GT_TRY(gt_attest_collect(&ev, &p, rd));
    gt_err e = gt_evidence_encode(&ev, evidence);
    gt_evidence_free(&ev);
    return e;
}

static void test_attestation_hooks(void **state)
{
    fixture *f = *state;
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device *dev = NULL;
    // the client's appraisal rejects the device
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.attester.appraise = reject_device;
    GT_ASSERT_CODE(gt_device_open_sim(&dev, &cfg, &opt), GT_E_POLICY);
    assert_null(dev);
    // devd's admission rejects evidence it cannot appraise
    memset(&opt, 0, sizeof opt);
    opt.attester.produce = reject_client;
    gt_err e = GT_OK;
    for (int i = 0; i < 200; i++) {  // devd may still be ending the session the client dropped
        e = gt_device_open_sim(&dev, &cfg, &opt);
        if (e.code != GT_E_STATE) {
            break;
        }
        usleep(10000);
    }
    assert_int_equal(e.code, GT_E_AUTH);
    assert_non_null(strstr(e.msg, "refused"));
    assert_null(dev);
    // ... and authentic evidence its policy refuses (a debug TEE)
    opt.attester.produce = debug_client;
    e = gt_device_open_sim(&dev, &cfg, &opt);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "debug"));
    assert_null(dev);
    // and the device still serves a good client
    for (int i = 0; i < 200 && !gt_is_ok(gt_device_open(&dev, &cfg)); i++) {
        usleep(10000);
    }
    assert_non_null(dev);
    gt_device_close(dev);
}

// devd's evidence says its memory is devd's; a client that expects a trip into another memory
// (a GPU, host memory) refuses it at the handshake, and the expectation cannot be waved
// through a caller's own appraise hook.
static gt_err open_retrying(gt_device **dev, const gt_device_config *cfg,
                            const gt_device_sim_options *opt)
{
    gt_err e = GT_OK;
    for (int i = 0; i < 200; i++) {  // devd may still be ending the session the client dropped
        e = gt_device_open_sim(dev, cfg, opt);
        if (e.code != GT_E_STATE) {
            break;
        }
        usleep(10000);
    }
    return e;
}

static void test_device_memory_expected(void **state)
{
    fixture *f = *state;
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = f->sock};
    gt_device *dev = NULL;
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.expect_memory = GT_SIM_MEMORY_DEVD;
    GT_ASSERT_OK(open_retrying(&dev, &cfg, &opt));
    gt_device_close(dev);
    dev = NULL;
    const gt_sim_device_memory other[] = {GT_SIM_MEMORY_HOST, GT_SIM_MEMORY_CUDA};
    const char *says[] = {"its memory is 'devd', this trip is to 'host'",
                          "its memory is 'devd', this trip is to 'cuda'"};
    for (int i = 0; i < 2; i++) {
        opt.expect_memory = other[i];
        gt_err e = open_retrying(&dev, &cfg, &opt);
        GT_ASSERT_CODE(e, GT_E_POLICY);
        assert_non_null(strstr(e.msg, says[i]));
        assert_null(dev);
    }
    opt.attester.appraise = reject_device;  // a caller's hook cannot check the claim
    opt.expect_memory = GT_SIM_MEMORY_DEVD;
    gt_err e = open_retrying(&dev, &cfg, &opt);
    GT_ASSERT_CODE(e, GT_E_ARG);
    assert_non_null(strstr(e.msg, "default appraisal only"));
    assert_null(dev);
}

static void test_no_devd(void **state)
{
    (void)state;
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = "/nonexistent/devd.sock"};
    gt_device *dev = NULL;
    gt_err e = gt_device_open(&dev, &cfg);
    assert_int_equal(e.code, GT_E_IO);
    assert_non_null(strstr(e.msg, "gputravel devd"));
    cfg.socket_path = NULL;
    GT_ASSERT_CODE(gt_device_open(&dev, &cfg), GT_E_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_sizes),
        cmocka_unit_test(test_no_readback_refused),
        cmocka_unit_test(test_bad_handles_and_ranges),
        cmocka_unit_test(test_memory_limit),
        cmocka_unit_test(test_session_end_frees_and_wipes),
        cmocka_unit_test(test_device_evidence),
        cmocka_unit_test(test_attestation_hooks),
        cmocka_unit_test(test_device_memory_expected),
        cmocka_unit_test(test_no_devd),
    };
    return cmocka_run_group_tests(tests, setup, gt_test_devd_teardown);
}
