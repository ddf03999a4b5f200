// device/: travelling with a real GPU (docs/cuda.md "Travelling with a real GPU"). The trainer
// (this process, owning a CUDA context) lends through ipc_trip; the holder (this program
// re-executed: its own process and CUDA context) attaches with the ticket over the attested
// handshake, copies its sealed chunk to its GPU, decrypts it there with the AES-256-GCM kernels
// (tag first), exports the buffer and hands it over (RETURN_IPC). The trainer imports it
// NO_READBACK, finds copy_out refused, computes a sum of squares on the device that matches the
// host's plaintext, releases it (wipe) and says RELEASED; the holder then finds its buffer
// zeroed and frees it. Tampered: a flipped ciphertext bit is GT_E_AUTH in the holder and nothing
// is handed over (the trip fails, nothing imported). Skipped (exit 77) without a usable GPU.
#include "testlib.h"
#include "float_chunk.h"

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/device.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "travel/cuda_trip.h"
#include <gputravel/kernels.h>

#define NFLOATS (16u << 20)  // a 64 MiB chunk
#define PLAIN_BYTES ((uint64_t)NFLOATS * 4)

static bool have_gpu;
static char gpu_why[256];
static char g_dir[512];
static char g_sock[600];
static uint8_t g_aad[GT_SIM_LOAD_AAD_BYTES];
static uint8_t g_agreement[GT_SHA256_BYTES];

static gt_err device_sumsq(gt_device *d, gt_dbuf buf, double *s)
{
    gt_dbuf sum = 0;
    GT_TRY(gt_device_alloc(d, 8, 0, &sum));
    gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {{sum, 0}, {buf, 0}}, .ints = {NFLOATS}};
    gt_err e = gt_device_launch(d, &ss);
    if (gt_is_ok(e)) {
        e = gt_device_copy_out(d, s, sum, 0, 8);
    }
    gt_err f = gt_device_free(d, sum);
    return gt_is_ok(e) ? f : e;
}

// ---- the holder: a separate process with its own CUDA context ---------------------------------

static int holder(bool tamper, const char *ticket_hex)
{
    uint8_t ticket[GT_SIM_TICKET_BYTES], key[GT_AEAD_KEY_BYTES], iv[GT_AEAD_IV_BYTES];
    size_t tn = 0;
    if (!gt_is_ok(gt_hex_decode(ticket, sizeof ticket, &tn, ticket_hex)) || tn != sizeof ticket) {
        return 2;
    }
    uint8_t *ct = NULL;
    size_t ct_len = 0;
    if (!gt_test_seal_pattern(NFLOATS, g_aad, sizeof g_aad, key, iv, &ct, &ct_len)) {
        return 3;
    }
    if (tamper) {
        ct[PLAIN_BYTES / 2] ^= 0x01;
    }
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.timeout_ms = 30000;
    memcpy(opt.agreement_hash, g_agreement, sizeof opt.agreement_hash);
    gt_sim_conn c;
    gt_err e = gt_ipc_trip_attach(&c, g_sock, &opt, ticket);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "holder: attach: %s\n", e.msg);
        return 4;
    }
    gt_device *d = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_CUDA};
    e = gt_device_open(&d, &cfg);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "holder: open: %s\n", e.msg);
        return 5;
    }
    gt_dbuf buf = 0;
    uint8_t ipc[GT_SIM_IPC_DESC_BYTES];
    double t0 = gt_now_seconds();
    e = gt_cuda_trip_load(d, ct, ct_len, iv, g_aad, key, 0, &buf, ipc);
    double t1 = gt_now_seconds();
    gt_secure_zero(key, sizeof key);
    free(ct);
    int rc = 0;
    if (tamper) {
        uint8_t zero[GT_SIM_IPC_DESC_BYTES] = {0};
        rc = e.code == GT_E_AUTH && buf == 0 && memcmp(ipc, zero, sizeof zero) == 0 ? 0 : 6;
        if (rc != 0) {
            fprintf(stderr, "holder: tampered chunk: %s (%s)\n", gt_code_name(e.code), e.msg);
        }
        gt_sim_conn_close(&c);  // nothing handed over
        gt_device_close(d);
        return rc;
    }
    if (!gt_is_ok(e)) {
        fprintf(stderr, "holder: load: %s\n", e.msg);
        gt_device_close(d);
        return 7;
    }
    printf("holder: copy_in + GPU AES-GCM open + export of %llu MiB: %.1f ms (%.2f GB/s)\n",
           (unsigned long long)(PLAIN_BYTES >> 20), (t1 - t0) * 1e3,
           (double)PLAIN_BYTES / (t1 - t0) / 1e9);
    double s = -1.0;
    e = gt_ipc_trip_hand_over(&c, ipc, g_aad, -1);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "holder: hand over: %s\n", e.msg);
        rc = 8;
    } else if (!gt_is_ok(e = gt_ipc_trip_wait_released(&c, 60000))) {
        fprintf(stderr, "holder: released: %s\n", e.msg);
        rc = 9;
    } else if (!gt_is_ok(e = device_sumsq(d, buf, &s)) || s != 0.0) {
        // the trainer's release wiped the holder's allocation
        fprintf(stderr, "holder: after release the buffer sums to %g (%s)\n", s, e.msg);
        rc = 10;
    }
    gt_err f = gt_device_free(d, buf);  // only now the holder frees its allocation
    if (rc == 0 && !gt_is_ok(f)) {
        rc = 11;
    }
    gt_sim_conn_close(&c);
    gt_device_close(d);
    return rc;
}

// ---- the trainer ------------------------------------------------------------------------------

static pid_t spawn(const uint8_t ticket[GT_SIM_TICKET_BYTES], bool tamper)
{
    char hex[2 * GT_SIM_TICKET_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, ticket, GT_SIM_TICKET_BYTES);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        // No CUDA call between fork and exec: the holder starts a fresh process and context.
        execl("/proc/self/exe", "test_cuda_travel", "--holder", tamper ? "tamper" : "ok", hex,
              g_dir, (char *)NULL);
        _exit(127);
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

static void trip(bool tamper)
{
    gt_device *d = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_CUDA};
    GT_ASSERT_OK(gt_device_open(&d, &cfg));
    gt_ipc_trip_importer imp = gt_cuda_trip_importer(d);
    gt_ipc_trip_config tc;
    memset(&tc, 0, sizeof tc);
    tc.socket_path = g_sock;
    tc.lease_ms = 60000;
    tc.memory = GT_SIM_MEMORY_CUDA;
    memcpy(tc.agreement_hash, g_agreement, sizeof tc.agreement_hash);
    gt_ipc_trip *t = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    GT_ASSERT_OK(gt_ipc_trip_lend(&t, &tc, ticket));
    pid_t pid = spawn(ticket, tamper);
    gt_secure_zero(ticket, sizeof ticket);
    gt_dbuf buf = 0;
    double t0 = gt_now_seconds();
    gt_err e = gt_ipc_trip_wait(t, &imp, g_aad, PLAIN_BYTES, &buf);
    if (tamper) {
        GT_ASSERT_CODE(e, GT_E_PEER);  // the holder left without handing anything over
        assert_int_equal(buf, 0);
        assert_int_equal(gt_ipc_trip_state(t), GT_SIM_TRIP_FAILED);
    } else {
        GT_ASSERT_OK(e);
        printf("trainer: lend -> import (holder start, attach, load, decrypt, export): %.1f ms\n",
               (gt_now_seconds() - t0) * 1e3);
        float f = 0.0f;
        GT_ASSERT_CODE(gt_device_copy_out(d, &f, buf, 0, 4), GT_E_POLICY);
        double s = 0.0, want = gt_test_pattern_sumsq(NFLOATS);
        GT_ASSERT_OK(device_sumsq(d, buf, &s));
        printf("trainer: sum of squares on the device %.17g, host plaintext %.17g\n", s, want);
        assert_true(fabs(s - want) <= 1e-9 * want);
        GT_ASSERT_OK(gt_ipc_trip_check(t));
        GT_ASSERT_OK(gt_ipc_trip_release(t));
    }
    assert_int_equal(reap(pid), 0);
    gt_ipc_trip_close(t);
    gt_device_close(d);
}

static void test_travel(void **state)
{
    (void)state;
    if (!have_gpu) {
        print_message("SKIPPED: %s\n", gpu_why);
        skip();
    }
    trip(false);
}

static void test_tampered(void **state)
{
    (void)state;
    if (!have_gpu) {
        print_message("SKIPPED: %s\n", gpu_why);
        skip();
    }
    trip(true);
}

static void setup_globals(const char *dir)
{
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    snprintf(g_sock, sizeof g_sock, "%s/trip.sock", g_dir);
    char root[700];
    snprintf(root, sizeof root, "%s/simroot", g_dir);
    setenv("GT_SIM_ROOT", root, 1);
    GT_ASSERT_OK(gt_sim_root_set(root));
    memset(g_aad, 0xa7, sizeof g_aad);
    memset(g_agreement, 0x42, sizeof g_agreement);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--holder") == 0) {
        setup_globals(argv[4]);
        return holder(strcmp(argv[2], "tamper") == 0, argv[3]);
    }
    have_gpu = gt_cuda_probe(gpu_why, sizeof gpu_why);
    char dir[512];
    gt_test_tmpdir(dir, sizeof dir);
    setup_globals(dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_travel),
        cmocka_unit_test(test_tampered),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    gt_test_rmtree(dir);
    if (!have_gpu) {
        printf("SKIPPED (no GPU): %s\n", gpu_why);
        return rc == 0 ? 77 : rc;
    }
    return rc;
}
