// device/: one set of test bodies run against every built backend, each asserting the exact
// code device.h ("error codes: the same on every backend") promises: cpu; sim, against a devd
// this test starts; cuda, where the build has it and a GPU is present (else that group's cases
// are skipped, as the test_cuda_* tests skip theirs). Every device is opened with the same
// memory limit, so a case's limits mean the same on each.
#include "backend_fixture.h"

#include <gputravel/device.h>
#include <gputravel/kernels.h>

#include <stdlib.h>
#include <string.h>

#define LIMIT (1u << 20)

typedef gt_test_backend backend;

static gt_device *open_dev(void **state)
{
    backend *b = *state;
    gt_test_backend_skip_absent(state);
    gt_device_config cfg = {.kind = b->kind, .threads = 1, .mem_limit = LIMIT,
                            .socket_path = b->sock};
    gt_device *dev = NULL;
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    b->dev = dev;
    return dev;
}

static gt_dbuf alloc(gt_device *dev, uint64_t bytes, uint32_t flags)
{
    gt_dbuf h = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, bytes, flags, &h));
    assert_true(h != 0);
    return h;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)(seed + 31 * i);
    }
}

// ---- alloc and the memory limit ----------------------------------------------------------------

static void alloc_zero_and_too_many_bytes(void **state)
{
    gt_device *dev = open_dev(state);
    gt_dbuf h = 77;
    GT_ASSERT_CODE(gt_device_alloc(dev, 0, 0, &h), GT_E_ARG);
    assert_int_equal(h, 0);  // a failed alloc leaves no handle behind
    h = 77;
    GT_ASSERT_CODE(gt_device_alloc(dev, 64, 0x80, &h), GT_E_ARG);  // unknown flag
    assert_int_equal(h, 0);
    GT_ASSERT_CODE(gt_device_alloc(dev, (uint64_t)LIMIT + 1, 0, &h), GT_E_LIMIT);
    GT_ASSERT_CODE(gt_device_alloc(dev, UINT64_MAX, 0, &h), GT_E_LIMIT);
    GT_ASSERT_CODE(gt_device_alloc(dev, (uint64_t)1 << 62, GT_DBUF_NO_READBACK, &h), GT_E_LIMIT);
    assert_int_equal(h, 0);
    h = alloc(dev, LIMIT, 0);  // the whole device is fine
    GT_ASSERT_OK(gt_device_free(dev, h));
    gt_test_backend_case_teardown(state);
}

static void memory_limit(void **state)
{
    gt_device *dev = open_dev(state);
    gt_dbuf a = alloc(dev, LIMIT / 2, 0), b = alloc(dev, LIMIT / 4, GT_DBUF_NO_READBACK), c = 0;
    GT_ASSERT_CODE(gt_device_alloc(dev, LIMIT / 2, 0, &c), GT_E_LIMIT);
    assert_int_equal(c, 0);
    gt_dbuf d = alloc(dev, LIMIT / 4, 0);  // exactly full
    GT_ASSERT_CODE(gt_device_alloc(dev, 1, 0, &c), GT_E_LIMIT);
    GT_ASSERT_OK(gt_device_free(dev, a));  // room again
    c = alloc(dev, LIMIT / 2, 0);
    GT_ASSERT_OK(gt_device_free(dev, b));
    GT_ASSERT_OK(gt_device_free(dev, c));
    GT_ASSERT_OK(gt_device_free(dev, d));
    // Every buffer counts its size rounded up to 64 bytes (GT_BUFTAB_ALIGN), on every backend.
    a = alloc(dev, LIMIT - 64, 0);
    GT_ASSERT_CODE(gt_device_alloc(dev, 65, 0, &c), GT_E_LIMIT);  // 128 counted, 64 left
    b = alloc(dev, 64, 0);
    GT_ASSERT_OK(gt_device_free(dev, a));
    GT_ASSERT_OK(gt_device_free(dev, b));
    a = alloc(dev, 1, 0);  // counts 64
    uint64_t sz = 0;
    GT_ASSERT_OK(gt_device_buf_size(dev, a, &sz));
    assert_int_equal(sz, 1);  // ... but is the size asked for
    GT_ASSERT_CODE(gt_device_alloc(dev, LIMIT - 63, 0, &c), GT_E_LIMIT);
    b = alloc(dev, LIMIT - 64, 0);
    gt_test_backend_case_teardown(state);  // frees a and b
}

// ---- handles -----------------------------------------------------------------------------------

// Every buffer call on h answers NOTFOUND.
static void assert_dead(gt_device *dev, gt_dbuf h)
{
    uint8_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8];
    memset(back, 0x5a, sizeof back);
    uint64_t sz = 99;
    GT_ASSERT_CODE(gt_device_free(dev, h), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_buf_size(dev, h, &sz), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_copy_in(dev, h, 0, x, sizeof x), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_copy_out(dev, back, h, 0, sizeof back), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_device_memset(dev, h, 0, 0, 8), GT_E_NOTFOUND);
    assert_int_equal(back[0], 0x5a);
}

static void free_twice_and_stale_handles(void **state)
{
    gt_device *dev = open_dev(state);
    assert_dead(dev, 0);                              // 0 is never a buffer
    assert_dead(dev, ((uint64_t)1 << 32) | 1000);     // never issued
    gt_dbuf a = alloc(dev, 32, 0);
    uint8_t pat[32];
    fill(pat, sizeof pat, 3);
    GT_ASSERT_OK(gt_device_copy_in(dev, a, 0, pat, sizeof pat));
    GT_ASSERT_OK(gt_device_free(dev, a));
    assert_dead(dev, a);  // the second free included
    // The next buffer reuses a's slot (same low half of the handle) under a new generation:
    // a still names nothing, and the new buffer is intact whatever was tried through a.
    gt_dbuf b = alloc(dev, 32, 0);
    assert_int_equal(b & 0xffffffffu, a & 0xffffffffu);
    assert_true(b != a);
    assert_dead(dev, a);
    uint8_t back[32];
    GT_ASSERT_OK(gt_device_copy_out(dev, back, b, 0, sizeof back));
    for (size_t i = 0; i < sizeof back; i++) {
        assert_int_equal(back[i], 0);  // fresh, and a's old bytes are gone
    }
    GT_ASSERT_OK(gt_device_free(dev, b));
    assert_dead(dev, b);
    gt_test_backend_case_teardown(state);
}

static void buf_size(void **state)
{
    gt_device *dev = open_dev(state);
    gt_dbuf a = alloc(dev, 1, 0), b = alloc(dev, 12345, GT_DBUF_NO_READBACK);
    uint64_t sz = 0;
    GT_ASSERT_OK(gt_device_buf_size(dev, a, &sz));
    assert_int_equal(sz, 1);
    GT_ASSERT_OK(gt_device_buf_size(dev, b, &sz));  // a NO_READBACK buffer's size is known
    assert_int_equal(sz, 12345);
    GT_ASSERT_OK(gt_device_free(dev, a));
    GT_ASSERT_OK(gt_device_free(dev, b));
    gt_test_backend_case_teardown(state);
}

// ---- ranges ------------------------------------------------------------------------------------

static void ranges(void **state)
{
    gt_device *dev = open_dev(state);
    gt_dbuf a = alloc(dev, 100, 0);
    uint8_t want[100], got[100], src[128];
    fill(want, sizeof want, 9);
    fill(src, sizeof src, 200);
    // in range, then at the end (a zero-length access at offset 100 is in range)
    GT_ASSERT_OK(gt_device_copy_in(dev, a, 0, want, 100));
    GT_ASSERT_OK(gt_device_copy_in(dev, a, 100, src, 0));
    GT_ASSERT_OK(gt_device_memset(dev, a, 100, 0xee, 0));
    GT_ASSERT_OK(gt_device_copy_out(dev, got, a, 100, 0));
    GT_ASSERT_OK(gt_device_copy_in(dev, a, 90, src, 10));
    memcpy(want + 90, src, 10);
    GT_ASSERT_OK(gt_device_memset(dev, a, 99, 0x11, 1));
    want[99] = 0x11;
    GT_ASSERT_OK(gt_device_memset(dev, a, 10, 0x22, 5));
    memset(want + 10, 0x22, 5);
    GT_ASSERT_OK(gt_device_copy_out(dev, got, a, 95, 5));
    assert_memory_equal(got, want + 95, 5);
    // past the end
    GT_ASSERT_CODE(gt_device_copy_in(dev, a, 91, src, 10), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_in(dev, a, 0, src, 101), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_in(dev, a, 101, src, 0), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_memset(dev, a, 100, 0, 1), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_memset(dev, a, 0, 0, 101), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_memset(dev, a, 101, 0, 0), GT_E_ARG);
    memset(got, 0x5a, sizeof got);
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, a, 0, 101), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, a, 99, 2), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, a, 101, 0), GT_E_ARG);
    // offset + len wraps around 2^64 (to 1, to 0, to 63): refused, never taken as small
    GT_ASSERT_CODE(gt_device_copy_in(dev, a, UINT64_MAX, src, 2), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_in(dev, a, 1, src, UINT64_MAX), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_memset(dev, a, 64, 0, UINT64_MAX - 63), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_memset(dev, a, UINT64_MAX, 0, 64), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, a, UINT64_MAX - 1, 65), GT_E_ARG);
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, a, 2, UINT64_MAX - 1), GT_E_ARG);
    for (size_t i = 0; i < sizeof got; i++) {
        assert_int_equal(got[i], 0x5a);  // a refused copy_out wrote nothing
    }
    // and no refused call changed the buffer
    GT_ASSERT_OK(gt_device_copy_out(dev, got, a, 0, 100));
    assert_memory_equal(got, want, 100);
    GT_ASSERT_OK(gt_device_free(dev, a));
    gt_test_backend_case_teardown(state);
}

static void no_readback(void **state)
{
    gt_device *dev = open_dev(state);
    const uint64_t n = 16;  // floats
    gt_dbuf s = alloc(dev, n * 4, GT_DBUF_NO_READBACK), out = alloc(dev, n * 4, 0);
    float x[16], got[16];
    for (int i = 0; i < 16; i++) {
        x[i] = (float)i - 3.5f;
    }
    GT_ASSERT_OK(gt_device_copy_in(dev, s, 0, x, sizeof x));  // written ...
    memset(got, 0x5a, sizeof got);
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, s, 0, sizeof got), GT_E_POLICY);  // ... not read
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, s, 8, 4), GT_E_POLICY);
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, s, 0, 0), GT_E_POLICY);
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, s, 1000, 1), GT_E_POLICY);  // before the range
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, s, UINT64_MAX, 2), GT_E_POLICY);
    const uint8_t *raw = (const uint8_t *)got;
    for (size_t i = 0; i < sizeof got; i++) {
        assert_int_equal(raw[i], 0x5a);
    }
    // ... but used by ops, whose outputs are the caller's (docs/device-sim.md)
    gt_op add = {.kind = GT_OP_RESIDUAL_FWD, .refs = {{out, 0}, {s, 0}, {s, 0}}, .ints = {16}};
    GT_ASSERT_OK(gt_device_launch(dev, &add));
    GT_ASSERT_OK(gt_device_sync(dev));
    GT_ASSERT_OK(gt_device_copy_out(dev, got, out, 0, sizeof got));
    for (int i = 0; i < 16; i++) {
        assert_true(got[i] == 2 * x[i]);
    }
    GT_ASSERT_OK(gt_device_memset(dev, s, 0, 0, n * 4));
    GT_ASSERT_OK(gt_device_free(dev, s));
    GT_ASSERT_CODE(gt_device_copy_out(dev, got, s, 0, 4), GT_E_NOTFOUND);  // handle before policy
    GT_ASSERT_OK(gt_device_free(dev, out));
    gt_test_backend_case_teardown(state);
}

// ---- launch ------------------------------------------------------------------------------------

static void launch_bad_refs(void **state)
{
    gt_device *dev = open_dev(state);
    const int N = 64;  // gelu_forward: out (N floats), inp (N floats)
    gt_dbuf inp = alloc(dev, (uint64_t)N * 4, 0), out = alloc(dev, (uint64_t)N * 4, 0);
    gt_dbuf gone = alloc(dev, (uint64_t)N * 4, 0);
    GT_ASSERT_OK(gt_device_free(dev, gone));
    float x[64], got[64];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 7) - 3.0f;
    }
    GT_ASSERT_OK(gt_device_copy_in(dev, inp, 0, x, sizeof x));
    gt_op ok = {.kind = GT_OP_GELU_FWD, .refs = {{out, 0}, {inp, 0}}, .ints = {N}};
    GT_ASSERT_OK(gt_device_launch(dev, &ok));
    GT_ASSERT_OK(gt_device_sync(dev));
    GT_ASSERT_OK(gt_device_memset(dev, out, 0, 0, (uint64_t)N * 4));
    gt_op op = ok;
    op.refs[1].offset = 4;  // one float short
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.refs[1].offset = (uint64_t)N * 4;  // at the end: nothing left
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op.refs[1].offset = UINT64_MAX - 3;  // offset + bytes wraps (4-aligned, as cuda wants)
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op = ok;
    op.ints[0] = N + 1;  // shapes larger than the buffers
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op = ok;
    op.refs[1].buf = gone;  // a freed buffer
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_NOTFOUND);
    op.refs[1].buf = ((uint64_t)1 << 32) | 1000;  // never issued
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_NOTFOUND);
    op.refs[0].buf = gone;  // the output, too
    op.refs[1].buf = inp;
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_NOTFOUND);
    op.refs[0].buf = 0;  // a required ref left empty: a malformed op
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    op = ok;
    op.kind = 999;
    GT_ASSERT_CODE(gt_device_launch(dev, &op), GT_E_ARG);
    // no refused launch ran: out is still all zero
    GT_ASSERT_OK(gt_device_sync(dev));
    GT_ASSERT_OK(gt_device_copy_out(dev, got, out, 0, sizeof got));
    for (int i = 0; i < N; i++) {
        assert_true(got[i] == 0.0f);
    }
    GT_ASSERT_OK(gt_device_free(dev, inp));
    GT_ASSERT_OK(gt_device_free(dev, out));
    gt_test_backend_case_teardown(state);
}

// ---- close -------------------------------------------------------------------------------------

static void close_wipes_everything(void **state)
{
    backend *be = *state;
    gt_device *dev = open_dev(state);
    uint8_t *pat = malloc(LIMIT / 4);
    memset(pat, 0xa5, LIMIT / 4);
    for (int i = 0; i < 4; i++) {  // the whole device, half of it NO_READBACK
        gt_dbuf h = alloc(dev, LIMIT / 4, i % 2 ? GT_DBUF_NO_READBACK : 0);
        GT_ASSERT_OK(gt_device_copy_in(dev, h, 0, pat, LIMIT / 4));
    }
    gt_device_sim_stat before = {0}, after = {0};
    if (be->kind == GT_DEVICE_SIM) {
        GT_ASSERT_OK(gt_device_sim_stat_get(dev, &before));
        assert_int_equal(before.bytes_in_use, LIMIT);
        assert_int_equal(before.buffers_live, 4);
    }
    gt_test_backend_case_teardown(state);  // never freed one by one
    // Everything was released: the whole device can be had again, and it reads as zero. On sim
    // that is the wipe itself (devd hands out arena memory without clearing it: its free space
    // is zero because free and session end wipe); cpu and cuda zero every new buffer as well.
    dev = open_dev(state);
    if (be->kind == GT_DEVICE_SIM) {
        GT_ASSERT_OK(gt_device_sim_stat_get(dev, &after));
        assert_int_equal(after.bytes_in_use, 0);
        assert_int_equal(after.buffers_live, 0);
        assert_true(after.bytes_wiped - before.bytes_wiped >= LIMIT);
    }
    gt_dbuf all = alloc(dev, LIMIT, 0);
    uint8_t *back = malloc(LIMIT);
    memset(back, 0x77, LIMIT);
    GT_ASSERT_OK(gt_device_copy_out(dev, back, all, 0, LIMIT));
    for (size_t i = 0; i < LIMIT; i++) {
        if (back[i] != 0) {
            fail_msg("byte %zu of the reopened device is 0x%02x", i, back[i]);
        }
    }
    free(back);
    free(pat);
    gt_test_backend_case_teardown(state);
}

int main(void)
{
    static const char *const devd_args[] = {"--mem-limit", "1MiB", "--slot-size", "64KiB", "--slots", "2",
                                       "--threads", "1", NULL};
    gt_test_backend_devd_args = devd_args;
    const struct CMUnitTest cases[] = {
        cmocka_unit_test_teardown(alloc_zero_and_too_many_bytes, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(memory_limit, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(free_twice_and_stale_handles, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(buf_size, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(ranges, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(no_readback, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(launch_bad_refs, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(close_wipes_everything, gt_test_backend_case_teardown),
    };
    int rc = cmocka_run_group_tests_name("cpu", cases, gt_test_backend_setup_cpu,
                                       gt_test_backend_teardown);
    rc |= cmocka_run_group_tests_name("sim", cases, gt_test_backend_setup_sim,
                                        gt_test_backend_teardown);
#ifdef GT_HAVE_CUDA
    rc |= cmocka_run_group_tests_name("cuda", cases, gt_test_backend_setup_cuda,
                                        gt_test_backend_teardown);
#endif
    return rc;
}
