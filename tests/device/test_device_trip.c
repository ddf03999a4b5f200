// device.h's trainer-served trip (gt_device_trip_*), public API only: strict device addresses;
// a full trip on the cpu device (host-memory handoff) through lend / carry / wait / release /
// finish; a holder asked for a GPU handoff it cannot make (built without CUDA) ends the trip at
// once with its reason; the trainer stops waiting as soon as the holder answers on its channel.
#include "testlib.h"

#include <gputravel/crypto.h>
#include <gputravel/device.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NBYTES 4096u

static char g_dir[512], g_sock[600];
static uint8_t g_aad[GT_DEVICE_CHUNK_AAD_BYTES], g_agreement[GT_DEVICE_AGREEMENT_BYTES];

static void test_address_parse(void **state)
{
    (void)state;
    char path[GT_DEVICE_TRIP_ADDRESS_MAX];
    gt_device_kind k = GT_DEVICE_CPU;
    GT_ASSERT_OK(gt_device_trip_address_parse("/run/devd.sock", &k, path, sizeof path));
    assert_int_equal(k, GT_DEVICE_SIM);
    assert_string_equal(path, "/run/devd.sock");
    GT_ASSERT_OK(gt_device_trip_address_parse("ipc-cuda:/s/trip.sock", &k, path, sizeof path));
    assert_int_equal(k, GT_DEVICE_CUDA);
    assert_string_equal(path, "/s/trip.sock");
    GT_ASSERT_OK(gt_device_trip_address_parse("ipc-cpu:rel/trip.sock", &k, path, sizeof path));
    assert_int_equal(k, GT_DEVICE_CPU);
    assert_string_equal(path, "rel/trip.sock");
    GT_ASSERT_OK(gt_device_trip_address_parse("./a:b", &k, path, sizeof path));  // a path
    assert_int_equal(k, GT_DEVICE_SIM);
    const char *bad[] = {"", "ipc:/x", "ipc-cuda:", "ipc-cpu:", "IPC-CPU:/x", "tcp:1.2.3.4",
                         "ipc-gpu:/x", "ipc-cpu:/a\nb", NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        k = (gt_device_kind)77;
        strcpy(path, "untouched");
        GT_ASSERT_CODE(gt_device_trip_address_parse(bad[i], &k, path, sizeof path), GT_E_FORMAT);
        assert_int_equal(k, 77);
        assert_string_equal(path, "untouched");
    }
    char longp[300];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    GT_ASSERT_CODE(gt_device_trip_address_parse(longp, &k, path, sizeof path), GT_E_FORMAT);
}

// The holder (a forked child): carries its sealed chunk to address.
static int holder(const char *address, const uint8_t ticket[GT_DEVICE_TICKET_BYTES],
                  gt_code want)
{
    uint8_t key[32], iv[12], pt[NBYTES], ct[NBYTES + 16];
    size_t ct_len = 0;
    for (size_t i = 0; i < NBYTES; i++) {
        pt[i] = (uint8_t)(i * 7);
    }
    if (!gt_is_ok(gt_random_bytes(key, sizeof key)) || !gt_is_ok(gt_random_bytes(iv, sizeof iv)) ||
        !gt_is_ok(gt_aead_seal(ct, sizeof ct, &ct_len, pt, NBYTES, g_aad, sizeof g_aad, iv, key))) {
        return 2;
    }
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.timeout_ms = 10000;
    memcpy(opt.agreement_hash, g_agreement, sizeof opt.agreement_hash);
    gt_device_trip_carrier *c = NULL;
    gt_err e = gt_device_trip_carry(&c, address, &opt, ticket, ct, ct_len, iv, g_aad, key);
    if (e.code != want) {
        fprintf(stderr, "holder: carry: %s\n", e.msg);
        return 3;
    }
    if (want == GT_E_UNSUPPORTED) {
        return c == NULL && strstr(e.msg, "built without CUDA") != NULL ? 0 : 4;
    }
    if (want != GT_E_NONE) {
        return c == NULL ? 0 : 5;
    }
    e = gt_device_trip_carrier_finish(c, 10000);
    return e.code == GT_E_NONE ? 0 : 6;
}

static pid_t spawn(const char *address, const uint8_t ticket[GT_DEVICE_TICKET_BYTES],
                   gt_code want)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(holder(address, ticket, want));
    }
    return pid;
}

static int reap(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static gt_device *cpu(void)
{
    gt_device *dev = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_CPU, .threads = 1};
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    return dev;
}

static void test_cpu_trip(void **state)
{
    (void)state;
    gt_device *dev = cpu();
    gt_device_trip *t = NULL;
    uint8_t ticket[GT_DEVICE_TICKET_BYTES];
    char address[GT_DEVICE_TRIP_ADDRESS_MAX];
    GT_ASSERT_OK(gt_device_trip_lend(&t, dev, g_sock, 10000, -1, g_agreement, ticket, address,
                                     sizeof address));
    char want[700];
    snprintf(want, sizeof want, "ipc-cpu:%s", g_sock);
    assert_string_equal(address, want);
    pid_t pid = spawn(address, ticket, GT_E_NONE);
    gt_dbuf buf = 0;
    GT_ASSERT_OK(gt_device_trip_wait(t, g_aad, NBYTES, &buf));
    uint64_t n = 0;
    GT_ASSERT_OK(gt_device_buf_size(dev, buf, &n));
    assert_int_equal(n, NBYTES);
    uint8_t x = 0;
    GT_ASSERT_CODE(gt_device_copy_out(dev, &x, buf, 0, 1), GT_E_POLICY);  // NO_READBACK
    GT_ASSERT_OK(gt_device_trip_check(t));
    GT_ASSERT_OK(gt_device_trip_release(t));
    GT_ASSERT_CODE(gt_device_buf_size(dev, buf, &n), GT_E_ARG);  // wiped and gone
    assert_int_equal(reap(pid), 0);  // the holder saw RELEASED
    gt_device_trip_close(t);
    gt_device_close(dev);
}

// A cuda trainer's address: a holder without CUDA says so, and the trip ends at once (the
// holder attached, then left) rather than at the lease's end. With CUDA but no GPU (or a GPU
// whose handoff a cpu trainer cannot import) it fails as well, nothing imported.
static void test_holder_without_cuda(void **state)
{
    (void)state;
    gt_device *dev = cpu();
    gt_device_trip *t = NULL;
    uint8_t ticket[GT_DEVICE_TICKET_BYTES];
    char address[GT_DEVICE_TRIP_ADDRESS_MAX], cuda_address[700];
    GT_ASSERT_OK(gt_device_trip_lend(&t, dev, g_sock, 20000, -1, g_agreement, ticket, address,
                                     sizeof address));
    snprintf(cuda_address, sizeof cuda_address, "ipc-cuda:%s", g_sock);
#ifdef GT_HAVE_CUDA
    const bool cuda = true;
#else
    const bool cuda = false;
#endif
    pid_t pid = spawn(cuda_address, ticket, cuda ? GT_E_NONE : GT_E_UNSUPPORTED);
    double t0 = gt_now_seconds();
    gt_dbuf buf = 0;
    gt_err e = gt_device_trip_wait(t, g_aad, NBYTES, &buf);
    assert_false(gt_is_ok(e));
    assert_int_equal(buf, 0);
    assert_true(gt_now_seconds() - t0 < 10.0);
    int rc = reap(pid);
    if (!cuda) {
        GT_ASSERT_CODE(e, GT_E_PEER);
        assert_int_equal(rc, 0);
    }
    gt_device_trip_close(t);
    gt_device_close(dev);
}

// The holder answers on its channel (here: a pipe) instead of attaching: the wait ends now.
static void test_peer_answers_instead(void **state)
{
    (void)state;
    gt_device *dev = cpu();
    int p[2];
    assert_int_equal(pipe(p), 0);
    gt_device_trip *t = NULL;
    uint8_t ticket[GT_DEVICE_TICKET_BYTES];
    char address[GT_DEVICE_TRIP_ADDRESS_MAX];
    GT_ASSERT_OK(gt_device_trip_lend(&t, dev, g_sock, 20000, p[0], g_agreement, ticket, address,
                                     sizeof address));
    assert_int_equal(write(p[1], "x", 1), 1);
    double t0 = gt_now_seconds();
    gt_dbuf buf = 0;
    GT_ASSERT_CODE(gt_device_trip_wait(t, g_aad, NBYTES, &buf), GT_E_PEER);
    assert_true(gt_now_seconds() - t0 < 2.0);
    assert_int_equal(buf, 0);
    GT_ASSERT_CODE(gt_device_trip_check(t), GT_E_PEER);
    gt_device_trip_close(t);
    close(p[0]);
    close(p[1]);
    gt_device_trip_close(NULL);  // nothing to close
    gt_device_close(dev);
}

static int group_setup(void **state)
{
    (void)state;
    gt_test_tmpdir(g_dir, sizeof g_dir);
    char root[700];
    snprintf(root, sizeof root, "%s/simroot", g_dir);
    setenv("GT_SIM_ROOT", root, 1);
    snprintf(g_sock, sizeof g_sock, "%s/trip.sock", g_dir);
    memset(g_aad, 0x3c, sizeof g_aad);
    memset(g_agreement, 0x24, sizeof g_agreement);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    gt_test_rmtree(g_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_parse),
        cmocka_unit_test(test_cpu_trip),
        cmocka_unit_test(test_holder_without_cuda),
        cmocka_unit_test(test_peer_answers_instead),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
