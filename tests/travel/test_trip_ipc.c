// A trip served by the trainer itself (travel/trip_ipc.h; docs/cuda.md "Travelling with a real
// GPU"), on the CPU: the trainer (this process, a cpu device) lends, a holder (a forked child)
// attaches with the ticket over the attested handshake, decrypts its sealed chunk into memory it
// exports, and hands the buffer over with RETURN_IPC; the trainer imports it NO_READBACK, runs a
// kernel on it, releases it and says RELEASED. The GPU step (CUDA IPC) is replaced by the cpu
// trainer's host-memory handoff (trip_host.c: a sealed memfd over SCM_RIGHTS). Also:
// wrong ticket, other agreement, tampered chunk, wrong size, wrong chunk, lease expiry before and
// after attach, and a holder that vanishes while its buffer is in use. Then device.h's public
// wrapper (gt_device_trip_*): strict device addresses, a full cpu trip through lend / carry /
// wait / release / finish, a holder without CUDA asked for a GPU handoff ends the trip at once
// with its reason, and a holder that answers on its channel instead ends the wait at once.
#include "testlib.h"
#include "float_chunk.h"

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/device.h>
#include <gputravel/travel.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "travel/trip_host.h"
#include "travel/trip_ipc.h"
#include <gputravel/kernels.h>

#define NFLOATS 50000u
#define PLAIN_BYTES ((uint64_t)NFLOATS * 4)

static char g_dir[512];
static char g_sock[600];
static uint8_t g_aad[GT_SIM_LOAD_AAD_BYTES];
static uint8_t g_agreement[GT_SHA256_BYTES];

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// ---- the holder (a child process) -------------------------------------------------------------

enum {
    H_OK,
    H_WRONG_TICKET_FIRST,  // a wrong ticket first (refused), then the right one
    H_OTHER_AGREEMENT,     // refused at attach
    H_TAMPER,              // a flipped ciphertext bit: its own decryption fails, nothing handed over
    H_BIG,                 // claims 4 bytes more than the chunk
    H_WRONG_AAD,           // hands over another chunk
    H_STALL,               // attaches, then sits past the lease
    H_VANISH,              // hands over, then dies without BYE
    H_ALLOC,               // asks for something else than a handoff (devd's ALLOC)
    H_SECOND,              // while attached, a second client tries to connect: refused, busy
};

static int holder(int mode, const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    uint8_t key[GT_AEAD_KEY_BYTES], iv[GT_AEAD_IV_BYTES];
    uint8_t *ct = NULL;
    size_t ct_len = 0;
    if (!gt_test_seal_pattern(NFLOATS, g_aad, sizeof g_aad, key, iv, &ct, &ct_len)) {
        return 2;
    }
    if (mode == H_TAMPER) {
        ct[1000] ^= 0x10;
    }
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.timeout_ms = 10000;
    memcpy(opt.agreement_hash, g_agreement, sizeof opt.agreement_hash);
    if (mode == H_OTHER_AGREEMENT) {
        opt.agreement_hash[0] ^= 1;
    }
    gt_sim_conn c;
    if (mode == H_WRONG_TICKET_FIRST) {
        uint8_t wrong[GT_SIM_TICKET_BYTES];
        memcpy(wrong, ticket, sizeof wrong);
        wrong[5] ^= 0x40;
        gt_err e = gt_ipc_trip_attach(&c, g_sock, &opt, wrong);
        if (e.code != GT_E_AUTH) {
            fprintf(stderr, "holder: wrong ticket: %s\n", e.msg);
            return 3;
        }
    }
    gt_err e = gt_ipc_trip_attach(&c, g_sock, &opt, ticket);
    if (mode == H_OTHER_AGREEMENT) {
        return e.code == GT_E_POLICY ? 0 : 4;
    }
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "holder: attach: %s\n", e.msg);
        return 5;
    }
    if (mode == H_STALL) {
        sleep_ms(4000);
        gt_sim_conn_close(&c);
        return 0;
    }
    if (mode == H_ALLOC) {
        gt_sim_msg m = {.type = GT_SIM_REQ_ALLOC, .len = 4096};
        if (!gt_is_ok(gt_sim_conn_send(&c, &m))) {
            return 13;
        }
        e = gt_sim_conn_recv(&c, &m);  // the trainer ends the trip without an answer
        gt_sim_conn_close(&c);
        return e.code == GT_E_PEER ? 0 : 14;
    }
    if (mode == H_SECOND) {
        gt_sim_conn c2;
        e = gt_ipc_trip_attach(&c2, g_sock, &opt, ticket);
        if (e.code != GT_E_STATE || strstr(e.msg, "busy") == NULL) {
            fprintf(stderr, "holder: second attach: %s\n", e.msg);
            return 15;
        }
    }
    // "load and decrypt on the device": the host-memory handoff (a sealed memfd, OpenSSL)
    gt_host_trip_buf hb;
    uint8_t ipc[GT_SIM_IPC_DESC_BYTES] = {0}, aad[GT_SIM_LOAD_AAD_BYTES];
    e = gt_host_trip_load(ct, ct_len, iv, g_aad, key, 0, &hb, ipc);
    gt_secure_zero(key, sizeof key);
    int rc = 0;
    if (mode == H_TAMPER) {
        rc = e.code == GT_E_AUTH && hb.fd < 0 ? 0 : 8;  // nothing is handed over
        gt_sim_conn_close(&c);
        goto out;
    }
    if (e.code != GT_E_NONE) {
        rc = 9;
        goto out;
    }
    uint64_t claim = PLAIN_BYTES + (mode == H_BIG ? 4 : 0);
    for (int i = 0; i < 8; i++) {
        ipc[64 + i] = (uint8_t)(claim >> (8 * i));
    }
    memcpy(aad, g_aad, sizeof aad);
    if (mode == H_WRONG_AAD) {
        aad[31] ^= 1;
    }
    e = gt_ipc_trip_hand_over(&c, ipc, aad, hb.fd);
    if (mode == H_BIG || mode == H_WRONG_AAD) {
        rc = e.code == (mode == H_BIG ? GT_E_ARG : GT_E_POLICY) ? 0 : 10;
        gt_sim_conn_close(&c);
        goto out;
    }
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "holder: hand over: %s\n", e.msg);
        rc = 11;
        goto out;
    }
    if (mode == H_VANISH) {
        gt_host_trip_free(&hb);
        _exit(0);  // no BYE, no RELEASED awaited
    }
    e = gt_ipc_trip_wait_released(&c, 10000);
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "holder: released: %s\n", e.msg);
        rc = 12;
    }
    gt_sim_conn_close(&c);
out:
    gt_host_trip_free(&hb);  // the holder frees its allocation (wiped) last
    free(ct);
    return rc;
}

static pid_t spawn(int mode, const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(holder(mode, ticket));
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

// ---- the trainer's importer: trip_host.c's (a sealed memfd for CUDA IPC), counted ----------

typedef struct {
    gt_device *dev;
    gt_ipc_trip_importer host;
    int imports, releases;
} shm_importer;

static gt_err shm_import(void *ctx, const uint8_t ipc[GT_SIM_IPC_DESC_BYTES], int fd,
                         uint64_t bytes, gt_dbuf *out)
{
    shm_importer *s = ctx;
    gt_err e = s->host.import(s->host.ctx, ipc, fd, bytes, out);
    if (gt_is_ok(e)) {
        s->imports++;
    }
    return e;
}

static gt_err shm_release(void *ctx, gt_dbuf buf)
{
    shm_importer *s = ctx;
    s->releases++;
    return s->host.release(s->host.ctx, buf);
}

typedef struct {
    shm_importer si;
    gt_ipc_trip_importer imp;
    gt_ipc_trip *trip;
    uint8_t ticket[GT_SIM_TICKET_BYTES];
} fixture;

static fixture *lend(void **state, uint32_t lease_ms)
{
    fixture *f = calloc(1, sizeof *f);
    gt_device_config cfg = {.kind = GT_DEVICE_CPU};
    GT_ASSERT_OK(gt_device_open(&f->si.dev, &cfg));
    f->si.host = gt_host_trip_importer(f->si.dev);
    f->imp = (gt_ipc_trip_importer){.ctx = &f->si, .import = shm_import, .release = shm_release};
    gt_ipc_trip_config tc;
    memset(&tc, 0, sizeof tc);
    tc.socket_path = g_sock;
    tc.lease_ms = lease_ms;
    tc.memory = GT_SIM_MEMORY_HOST;  // the shared-memory stand-in is host memory
    memcpy(tc.agreement_hash, g_agreement, sizeof tc.agreement_hash);
    GT_ASSERT_OK(gt_ipc_trip_lend(&f->trip, &tc, f->ticket));
    assert_int_equal(gt_ipc_trip_state(f->trip), GT_SIM_TRIP_LENT);
    *state = f;
    return f;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f != NULL) {
        gt_ipc_trip_close(f->trip);
        gt_device_close(f->si.dev);
        free(f);
    }
    return 0;
}

static double sumsq(gt_device *dev, gt_dbuf buf)
{
    gt_dbuf sum = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, 8, 0, &sum));
    gt_op op = {.kind = GT_OP_SUMSQ, .refs = {{sum, 0}, {buf, 0}}, .ints = {NFLOATS}};
    GT_ASSERT_OK(gt_device_launch(dev, &op));
    double s = -1.0;
    GT_ASSERT_OK(gt_device_copy_out(dev, &s, sum, 0, 8));
    GT_ASSERT_OK(gt_device_free(dev, sum));
    return s;
}

// ---- tests ------------------------------------------------------------------------------------

static void test_messages(void **state)
{
    (void)state;
    gt_sim_msg in[2];
    memset(in, 0, sizeof in);
    in[0].type = GT_SIM_REQ_RETURN_IPC;
    for (size_t i = 0; i < sizeof in[0].ipc; i++) {
        in[0].ipc[i] = (uint8_t)(i * 3 + 1);
    }
    memset(in[0].aad, 0x5c, sizeof in[0].aad);
    in[1].type = GT_SIM_REP_RELEASED;
    const size_t sizes[2] = {2 + 72 + 32, 2};
    for (int i = 0; i < 2; i++) {
        uint8_t buf[256];
        gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
        GT_ASSERT_OK(gt_sim_msg_write(&w, &in[i]));
        assert_int_equal(w.len, sizes[i]);
        gt_sim_msg out;
        GT_ASSERT_OK(gt_sim_msg_parse((gt_span){buf, w.len}, &out));
        assert_int_equal(out.type, in[i].type);
        assert_memory_equal(out.ipc, in[i].ipc, sizeof out.ipc);
        assert_memory_equal(out.aad, in[i].aad, sizeof out.aad);
        assert_string_not_equal(gt_sim_msg_name(in[i].type), "unknown");
        gt_sim_msg junk;
        memset(&junk, 0x77, sizeof junk);
        for (size_t k = 2; k < w.len; k++) {
            GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){buf, k}, &junk), GT_E_TRUNCATED);
        }
        assert_int_equal(junk.type, 0x7777);  // untouched on failure
        buf[w.len] = 0;
        GT_ASSERT_CODE(gt_sim_msg_parse((gt_span){buf, w.len + 1}, &junk), GT_E_FORMAT);
    }
    assert_int_equal(GT_SIM_IPC_DESC_BYTES, 72);
}

static void full_trip(void **state, int mode)
{
    fixture *f = lend(state, 10000);
    pid_t pid = spawn(mode, f->ticket);
    gt_dbuf buf = 0;
    GT_ASSERT_OK(gt_ipc_trip_wait(f->trip, &f->imp, g_aad, PLAIN_BYTES, &buf));
    assert_true(buf != 0);
    assert_int_equal(gt_ipc_trip_state(f->trip), GT_SIM_TRIP_RETURNED);
    assert_int_equal(f->si.imports, 1);
    // the trainer computes on the holder's data but cannot read it back
    float x = 0.0f;
    GT_ASSERT_CODE(gt_device_copy_out(f->si.dev, &x, buf, 0, 4), GT_E_POLICY);
    double want = gt_test_pattern_sumsq(NFLOATS);
    double got = sumsq(f->si.dev, buf);
    assert_true(fabs(got - want) <= 1e-9 * want);
    GT_ASSERT_OK(gt_ipc_trip_check(f->trip));
    GT_ASSERT_OK(gt_ipc_trip_release(f->trip));
    assert_int_equal(f->si.releases, 1);
    GT_ASSERT_CODE(gt_ipc_trip_release(f->trip), GT_E_STATE);  // once
    GT_ASSERT_CODE(gt_ipc_trip_check(f->trip), GT_E_STATE);
    assert_int_equal(f->si.releases, 1);
    assert_int_equal(reap(pid), 0);  // the holder saw RELEASED, freed and said BYE
    // released: the import's handle is dead
    uint64_t n = 0;
    GT_ASSERT_CODE(gt_device_buf_size(f->si.dev, buf, &n), GT_E_NOTFOUND);
}

static void test_full_trip(void **state) { full_trip(state, H_OK); }
static void test_second_client_refused(void **state) { full_trip(state, H_SECOND); }
static void test_wrong_ticket_then_right(void **state) { full_trip(state, H_WRONG_TICKET_FIRST); }

// Refusals before the handoff: the trip fails with the reason and nothing is imported.
static void failed_trip(void **state, int mode, uint32_t lease_ms, gt_code want)
{
    fixture *f = lend(state, lease_ms);
    pid_t pid = mode >= 0 ? spawn(mode, f->ticket) : -1;
    gt_dbuf buf = 0;
    GT_ASSERT_CODE(gt_ipc_trip_wait(f->trip, &f->imp, g_aad, PLAIN_BYTES, &buf), want);
    assert_int_equal(buf, 0);
    assert_int_equal(gt_ipc_trip_state(f->trip), GT_SIM_TRIP_FAILED);
    assert_int_equal(f->si.imports, 0);
    GT_ASSERT_CODE(gt_ipc_trip_check(f->trip), want);
    GT_ASSERT_CODE(gt_ipc_trip_release(f->trip), want);
    if (pid > 0) {
        assert_int_equal(reap(pid), 0);  // the holder saw the refusal it expected
    }
}

static void test_tampered_chunk(void **state) { failed_trip(state, H_TAMPER, 10000, GT_E_PEER); }
static void test_oversized_claim(void **state) { failed_trip(state, H_BIG, 10000, GT_E_ARG); }
static void test_other_chunk(void **state) { failed_trip(state, H_WRONG_AAD, 10000, GT_E_POLICY); }
static void test_other_request(void **state) { failed_trip(state, H_ALLOC, 10000, GT_E_POLICY); }
static void test_lease_no_holder(void **state) { failed_trip(state, -1, 300, GT_E_TIMEOUT); }
static void test_lease_after_attach(void **state)
{
    failed_trip(state, H_STALL, 2500, GT_E_TIMEOUT);
}
static void test_other_agreement(void **state)
{
    failed_trip(state, H_OTHER_AGREEMENT, 3000, GT_E_TIMEOUT);  // refused; the lend ran out
}

// The holder dies while the trainer uses its buffer: the import is released at once and the
// trainer is told to discard the trip's results.
static void test_holder_vanishes(void **state)
{
    fixture *f = lend(state, 10000);
    pid_t pid = spawn(H_VANISH, f->ticket);
    gt_dbuf buf = 0;
    GT_ASSERT_OK(gt_ipc_trip_wait(f->trip, &f->imp, g_aad, PLAIN_BYTES, &buf));
    assert_int_equal(reap(pid), 0);
    GT_ASSERT_CODE(gt_ipc_trip_check(f->trip), GT_E_PEER);
    assert_int_equal(gt_ipc_trip_state(f->trip), GT_SIM_TRIP_FAILED);
    assert_int_equal(f->si.releases, 1);
    uint64_t n = 0;
    GT_ASSERT_CODE(gt_device_buf_size(f->si.dev, buf, &n), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_ipc_trip_release(f->trip), GT_E_PEER);
    assert_int_equal(f->si.releases, 1);
}

static void test_bad_config(void **state)
{
    (void)state;
    // a live trip socket is not taken over
    fixture *f = calloc(1, sizeof *f);
    gt_ipc_trip_config live;
    memset(&live, 0, sizeof live);
    live.socket_path = g_sock;
    live.lease_ms = 5000;
    live.memory = GT_SIM_MEMORY_HOST;
    GT_ASSERT_OK(gt_ipc_trip_lend(&f->trip, &live, f->ticket));
    gt_ipc_trip *t2 = NULL;
    GT_ASSERT_CODE(gt_ipc_trip_lend(&t2, &live, f->ticket), GT_E_STATE);
    assert_null(t2);
    gt_ipc_trip_close(f->trip);
    free(f);
    gt_ipc_trip *t = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    gt_ipc_trip_config tc;
    memset(&tc, 0, sizeof tc);
    tc.socket_path = g_sock;
    tc.memory = GT_SIM_MEMORY_HOST;
    GT_ASSERT_CODE(gt_ipc_trip_lend(&t, &tc, ticket), GT_E_ARG);
    tc.lease_ms = GT_SIM_MAX_LEASE_MS + 1;
    GT_ASSERT_CODE(gt_ipc_trip_lend(&t, &tc, ticket), GT_E_ARG);
    // a served trip's evidence says cuda or host, never devd, never nothing
    tc.lease_ms = 5000;
    const gt_sim_device_memory not_a_trip[] = {GT_SIM_MEMORY_UNSTATED, GT_SIM_MEMORY_DEVD};
    for (int i = 0; i < 2; i++) {
        tc.memory = not_a_trip[i];
        gt_err e = gt_ipc_trip_lend(&t, &tc, ticket);
        GT_ASSERT_CODE(e, GT_E_ARG);
        assert_non_null(strstr(e.msg, "never devd"));
    }
    assert_null(t);
}

// The holder's side is devd's client: against devd, RETURN_IPC is refused and the trip fails
// (devd wipes the trip's buffers), so a handoff can only go to a trainer serving the trip.
static void test_devd_refuses_return_ipc(void **state)
{
    (void)state;
    char dir[700], sock[800];
    snprintf(dir, sizeof dir, "%s/devd", g_dir);
    mkdir(dir, 0700);
    const char *args[] = {"--mem-limit", "8MiB", "--slot-size", "64KiB", "--threads", "1", NULL};
    pid_t devd = gt_test_devd_start(sock, sizeof sock, dir, args);
    gt_device_config cfg = {.kind = GT_DEVICE_SIM, .socket_path = sock};
    gt_device *tr = NULL;
    GT_ASSERT_OK(gt_device_open(&tr, &cfg));
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    GT_ASSERT_OK(gt_device_sim_lend(tr, 10000, ticket));
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.timeout_ms = 10000;
    gt_sim_conn c;
    GT_ASSERT_OK(gt_ipc_trip_attach(&c, sock, &opt, ticket));
    uint8_t ipc[GT_SIM_IPC_DESC_BYTES] = {1, 2, 3};
    GT_ASSERT_CODE(gt_ipc_trip_hand_over(&c, ipc, g_aad, -1), GT_E_PEER);
    gt_sim_conn_close(&c);
    gt_device_sim_loaded loaded[1];
    size_t count = 9;
    gt_err back = gt_device_sim_wait_return(tr, 10000, loaded, 1, &count);
    assert_false(gt_is_ok(back));  // FAILED, the device is back
    assert_int_equal(count, 0);
    gt_dbuf b = 0;
    GT_ASSERT_OK(gt_device_alloc(tr, 64, 0, &b));  // usable again
    gt_device_close(tr);
    gt_test_devd_stop(devd);
}

// ---- the same through device.h's public API (gt_device_trip_*) ----------------------------

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

// The holder through the public API (a forked child): carries its sealed chunk to address.
static int carrier(const char *address, const uint8_t ticket[GT_SIM_TICKET_BYTES],
                  gt_code want)
{
    uint8_t key[32], iv[12];
    uint8_t *pt = malloc(PLAIN_BYTES), *ct = malloc(PLAIN_BYTES + 16);
    size_t ct_len = 0;
    for (size_t i = 0; i < PLAIN_BYTES; i++) {
        pt[i] = (uint8_t)(i * 7);
    }
    if (!gt_is_ok(gt_random_bytes(key, sizeof key)) || !gt_is_ok(gt_random_bytes(iv, sizeof iv)) ||
        !gt_is_ok(gt_aead_seal(ct, PLAIN_BYTES + 16, &ct_len, pt, PLAIN_BYTES, g_aad, sizeof g_aad, iv,
                               key))) {
        return 2;
    }
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    opt.timeout_ms = 10000;
    memcpy(opt.agreement_hash, g_agreement, sizeof opt.agreement_hash);
    gt_device_trip_carrier *c = NULL;
    gt_err e = gt_device_trip_attach(&c, address, &opt, ticket);
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "holder: attach: %s\n", e.msg);
        return 7;
    }
    uint8_t m[GT_MEASUREMENT_BYTES];
    if (!gt_is_ok(gt_device_trip_measurement(c, m))) {  // the default appraisal kept it
        return 8;
    }
    e = gt_device_trip_hand_over(c, ct, ct_len, iv, g_aad, key, 0);
    free(pt);
    free(ct);
    if (e.code != want) {
        fprintf(stderr, "holder: hand over: %s\n", e.msg);
        gt_device_trip_carrier_close(c);
        return 3;
    }
    if (want == GT_E_UNSUPPORTED) {
        gt_device_trip_carrier_close(c);
        return strstr(e.msg, "built without CUDA") != NULL ? 0 : 4;
    }
    if (want != GT_E_NONE) {
        gt_device_trip_carrier_close(c);
        return 0;
    }
    e = gt_device_trip_carrier_finish(c, 10000);
    return e.code == GT_E_NONE ? 0 : 6;
}

static pid_t spawn_carrier(const char *address, const uint8_t ticket[GT_SIM_TICKET_BYTES],
                           gt_code want)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(carrier(address, ticket, want));
    }
    return pid;
}

static gt_device *cpu_device(void)
{
    gt_device *dev = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_CPU, .threads = 1};
    GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    return dev;
}

static void test_cpu_trip(void **state)
{
    (void)state;
    gt_device *dev = cpu_device();
    gt_device_trip *t = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    char address[GT_DEVICE_TRIP_ADDRESS_MAX];
    GT_ASSERT_OK(gt_device_trip_lend(&t, dev, g_sock, 10000, -1, g_agreement, ticket, address,
                                     sizeof address));
    char want[700];
    snprintf(want, sizeof want, "ipc-cpu:%s", g_sock);
    assert_string_equal(address, want);
    pid_t pid = spawn_carrier(address, ticket, GT_E_NONE);
    gt_dbuf buf = 0;
    GT_ASSERT_OK(gt_device_trip_wait(t, g_aad, PLAIN_BYTES, &buf));
    uint64_t n = 0;
    GT_ASSERT_OK(gt_device_buf_size(dev, buf, &n));
    assert_int_equal(n, PLAIN_BYTES);
    uint8_t x = 0;
    GT_ASSERT_CODE(gt_device_copy_out(dev, &x, buf, 0, 1), GT_E_POLICY);  // NO_READBACK
    GT_ASSERT_OK(gt_device_trip_check(t));
    GT_ASSERT_OK(gt_device_trip_release(t));
    GT_ASSERT_CODE(gt_device_buf_size(dev, buf, &n), GT_E_NOTFOUND);  // wiped and gone
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
    gt_device *dev = cpu_device();
    gt_device_trip *t = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    char address[GT_DEVICE_TRIP_ADDRESS_MAX], cuda_address[700];
    GT_ASSERT_OK(gt_device_trip_lend(&t, dev, g_sock, 20000, -1, g_agreement, ticket, address,
                                     sizeof address));
    snprintf(cuda_address, sizeof cuda_address, "ipc-cuda:%s", g_sock);
#ifdef GT_HAVE_CUDA
    const bool cuda = true;
#else
    const bool cuda = false;
#endif
    pid_t pid = spawn_carrier(cuda_address, ticket, cuda ? GT_E_NONE : GT_E_UNSUPPORTED);
    double t0 = gt_now_seconds();
    gt_dbuf buf = 0;
    gt_err e = gt_device_trip_wait(t, g_aad, PLAIN_BYTES, &buf);
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
    gt_device *dev = cpu_device();
    int p[2];
    assert_int_equal(pipe(p), 0);
    gt_device_trip *t = NULL;
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    char address[GT_DEVICE_TRIP_ADDRESS_MAX];
    GT_ASSERT_OK(gt_device_trip_lend(&t, dev, g_sock, 20000, p[0], g_agreement, ticket, address,
                                     sizeof address));
    assert_int_equal(write(p[1], "x", 1), 1);
    double t0 = gt_now_seconds();
    gt_dbuf buf = 0;
    GT_ASSERT_CODE(gt_device_trip_wait(t, g_aad, PLAIN_BYTES, &buf), GT_E_PEER);
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
    GT_ASSERT_OK(gt_sim_root_set(root));
    snprintf(g_sock, sizeof g_sock, "%s/trip.sock", g_dir);
    memset(g_aad, 0xa7, sizeof g_aad);
    memset(g_agreement, 0x42, sizeof g_agreement);
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
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test_teardown(test_full_trip, teardown),
        cmocka_unit_test_teardown(test_wrong_ticket_then_right, teardown),
        cmocka_unit_test_teardown(test_tampered_chunk, teardown),
        cmocka_unit_test_teardown(test_oversized_claim, teardown),
        cmocka_unit_test_teardown(test_other_chunk, teardown),
        cmocka_unit_test_teardown(test_lease_no_holder, teardown),
        cmocka_unit_test_teardown(test_lease_after_attach, teardown),
        cmocka_unit_test_teardown(test_other_agreement, teardown),
        cmocka_unit_test_teardown(test_holder_vanishes, teardown),
        cmocka_unit_test_teardown(test_second_client_refused, teardown),
        cmocka_unit_test_teardown(test_other_request, teardown),
        cmocka_unit_test(test_devd_refuses_return_ipc),
        cmocka_unit_test(test_address_parse),
        cmocka_unit_test(test_cpu_trip),
        cmocka_unit_test(test_holder_without_cuda),
        cmocka_unit_test(test_peer_answers_instead),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
