// enclave/: running the SDK's example enclave in its enclave process (INSECURE SIMULATION):
// ECALLs, an OCALL round trip, ENCLU[EGETKEY] inside the enclave against gt_sgx_egetkey, the seal
// key across a restart, local attestation between two enclaves (EREPORT/TARGETINFO), and the
// attacks: a wrong SIGSTRUCT or image, the process killed mid-ECALL, the host reading the
// enclave's memory.
#include "enclave_testlib.h"

#include "../../src/enclave/sdk_abi.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ECALL_ADD = 0, ECALL_ECHO = 1, ECALL_OCALL = 2, ECALL_EGETKEY = 3, ECALL_EREPORT = 4,
       ECALL_SPIN = 5, ECALL_VARIANT = 6, ECALL_VERIFY_REPORT = 10,
       ECALL_FAULT = 11 };

typedef struct {
    gt_buf image, sig;
} enclave_files;

static gt_sgx_platform test_platform(void)
{
    gt_sgx_platform pf;
    for (int i = 0; i < 16; i++) {
        pf.root[i] = (uint8_t)(0xa0 + i);
        pf.cpusvn[i] = 3;
        pf.ownerepoch[i] = (uint8_t)(0x20 + i);
        pf.seal_key_fuses[i] = (uint8_t)(0x70 + i);
    }
    return pf;
}

static void load_files(const char *name, enclave_files *f)
{
    char path[512];
    memset(f, 0, sizeof *f);
    snprintf(path, sizeof path, "%s/%s.bin", GT_ENCLAVE_DIR, name);
    GT_ASSERT_OK(gt_file_read_all(path, GT_ENCLAVE_IMAGE_MAX_BYTES, &f->image));
    snprintf(path, sizeof path, "%s/%s.sig", GT_ENCLAVE_DIR, name);
    GT_ASSERT_OK(gt_file_read_all(path, GT_SGX_SIGSTRUCT_BYTES, &f->sig));
    assert_int_equal(f->sig.len, GT_SGX_SIGSTRUCT_BYTES);
}

static void free_files(enclave_files *f)
{
    gt_buf_free(&f->image);
    gt_buf_free(&f->sig);
}

static gt_enclave_spec spec_of(const enclave_files *f, const gt_sgx_platform *pf)
{
    return (gt_enclave_spec){.process_path = GT_ENCLAVE_PROCESS_PATH, .image = f->image.data,
                             .image_len = f->image.len, .sigstruct = f->sig.data,
                             .platform = pf};
}

static gt_enclave *start(const char *name, enclave_files *f, const gt_sgx_platform *pf,
                         gt_enclave_ocall_fn ocall, void *ctx)
{
    load_files(name, f);
    gt_enclave_spec spec = spec_of(f, pf);
    spec.ocall = ocall;
    spec.ocall_ctx = ctx;
    gt_enclave *e = NULL;
    GT_ASSERT_OK(gt_enclave_start(&e, &spec));
    return e;
}

static gt_sgx_secs_identity secs_of(const gt_enclave *e)
{
    const gt_sgx_identity *id = gt_enclave_identity(e);
    gt_sgx_secs_identity s;
    memset(&s, 0, sizeof s);
    memcpy(s.mrenclave, id->mrenclave, 32);
    memcpy(s.mrsigner, id->mrsigner, 32);
    s.isvprodid = id->isvprodid;
    s.isvsvn = id->isvsvn;
    s.attributes = id->attributes;
    s.miscselect = id->miscselect;
    return s;
}

static int64_t ecall(gt_enclave *e, uint64_t n, const void *in, size_t len, gt_buf *out)
{
    int64_t status = -12345;
    GT_ASSERT_OK(gt_enclave_ecall(e, n, in, len, out, &status));
    return status;
}

// The identity the enclave process reports is the one `enclave measure --format flat` and the
// SIGSTRUCT give; ECALLs add, echo, and an unknown number is refused by the SDK.
static void test_ecalls(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    gt_enclave *e = start("example", &f, &pf, NULL, NULL);
    gt_sgx_measurement m;
    GT_ASSERT_OK(gt_sgx_measure_flat(f.image.data, f.image.len, 1, 0, &m));
    assert_memory_equal(gt_enclave_identity(e)->mrenclave, m.mrenclave, 32);
    assert_memory_equal(gt_enclave_identity(e)->mrenclave, f.sig.data + 960, 32);
    uint8_t in[16];
    gt_store_u64le(in, 40000000000ull);
    gt_store_u64le(in + 8, 2);
    gt_buf out = {0};
    assert_int_equal(ecall(e, ECALL_ADD, in, sizeof in, &out), 0);
    assert_int_equal(out.len, 8);
    gt_reader r = gt_reader_init(out.data, out.len);
    uint64_t sum = 0;
    GT_ASSERT_OK(gt_reader_u64le(&r, &sum));
    assert_int_equal(sum, 40000000002ull);
    uint8_t big[5000];
    GT_ASSERT_OK(gt_random_bytes(big, sizeof big));
    assert_int_equal(ecall(e, ECALL_ECHO, big, sizeof big, &out), 0);
    assert_int_equal(out.len, sizeof big);
    assert_memory_equal(out.data, big, sizeof big);
    assert_int_equal(ecall(e, 63, NULL, 0, &out), GTSDK_E_NOECALL);
    assert_int_equal(ecall(e, ECALL_VARIANT, NULL, 0, &out), 0);
    assert_int_equal(out.data[0], 1);
    gt_buf_free(&out);
    gt_enclave_stop(e);
    free_files(&f);
}

typedef struct {
    int calls;
    uint64_t number;
} ocall_log;

// Replies with the request reversed, status 7.
static gt_err reverse_ocall(void *ctx, uint64_t number, const uint8_t *in, size_t in_len,
                            gt_buf *reply, int64_t *status)
{
    ocall_log *log = ctx;
    log->calls++;
    log->number = number;
    GT_TRY(gt_buf_reserve(reply, in_len + 1));
    for (size_t i = 0; i < in_len; i++) {
        reply->data[i] = in[in_len - 1 - i];
    }
    reply->len = in_len;
    *status = 7;
    return GT_OK;
}

static void ocall_round_trips(void)
{
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    ocall_log log = {0};
    gt_enclave *e = start("example", &f, &pf, reverse_ocall, &log);
    gt_buf out = {0};
    for (int round = 0; round < 3; round++) {  // the re-entry through the TCS works each time
        const char msg[] = "enclave to host and back";
        assert_int_equal(ecall(e, ECALL_OCALL, msg, sizeof msg - 1, &out), 107);
        assert_int_equal(out.len, sizeof msg - 1);
        for (size_t i = 0; i < out.len; i++) {
            assert_int_equal(out.data[i], (uint8_t)msg[sizeof msg - 2 - i]);
        }
    }
    assert_int_equal(log.calls, 3);
    assert_int_equal(log.number, 0);
    gt_buf_free(&out);
    gt_enclave_stop(e);
    free_files(&f);
}

static void test_ocall_round_trip(void **state)
{
    (void)state;
    ocall_round_trips();  // the default: the shared-memory ring, EEXIT rewritten after one trap
}

// The same round trips on the other paths the host and runtime keep: the socket carrying every
// message, and a SIGILL for every EEXIT (GPUTRAVEL_ENCLAVE_CHANNEL / GPUTRAVEL_ENCLAVE_EEXIT,
// docs/enclave.md "Cost"), so that neither rots while the default runs elsewhere.
static void test_ocall_round_trip_other_paths(void **state)
{
    (void)state;
    setenv("GPUTRAVEL_ENCLAVE_CHANNEL", "socket", 1);
    ocall_round_trips();
    setenv("GPUTRAVEL_ENCLAVE_CHANNEL", "ring", 1);
    setenv("GPUTRAVEL_ENCLAVE_EEXIT", "trap", 1);
    ocall_round_trips();
    unsetenv("GPUTRAVEL_ENCLAVE_CHANNEL");
    unsetenv("GPUTRAVEL_ENCLAVE_EEXIT");
    // An unknown channel is refused at start, not silently mapped to one of them.
    setenv("GPUTRAVEL_ENCLAVE_CHANNEL", "pigeon", 1);
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    load_files("example", &f);
    gt_enclave_spec spec = spec_of(&f, &pf);
    gt_enclave *e = NULL;
    GT_ASSERT_ERR(gt_enclave_start(&e, &spec), GT_E_ARG, "pigeon");
    unsetenv("GPUTRAVEL_ENCLAVE_CHANNEL");
    free_files(&f);
}

// ECALL_EGETKEY: RAX and the key the enclave's own ENCLU[EGETKEY] returned.
static uint64_t enclave_egetkey(gt_enclave *e, const gt_sgx_keyrequest *req, uint8_t key[16])
{
    uint8_t raw[GT_SGX_KEYREQUEST_BYTES];
    gt_sgx_keyrequest_encode(req, raw);
    gt_buf out = {0};
    assert_int_equal(ecall(e, ECALL_EGETKEY, raw, sizeof raw, &out), 0);
    assert_int_equal(out.len, 24);
    gt_reader r = gt_reader_init(out.data, out.len);
    uint64_t rax = 0;
    GT_ASSERT_OK(gt_reader_u64le(&r, &rax));
    GT_ASSERT_OK(gt_reader_bytes(&r, key, 16));
    gt_buf_free(&out);
    return rax;
}

static gt_sgx_keyrequest seal_request(const gt_sgx_platform *pf, uint16_t policy)
{
    gt_sgx_keyrequest req;
    memset(&req, 0, sizeof req);
    req.keyname = GT_SGX_KEYNAME_SEAL;
    req.keypolicy = policy;
    memcpy(req.cpusvn, pf->cpusvn, 16);
    req.attributemask.flags = 0xff0000000000000bull;
    req.miscmask = 0xf0000000u;
    memset(req.keyid, 0x5e, 32);
    return req;
}

static void test_egetkey_in_enclave(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    gt_enclave *e = start("example", &f, &pf, NULL, NULL);
    gt_sgx_secs_identity secs = secs_of(e);
    gt_sgx_keyrequest reqs[3] = {seal_request(&pf, GT_SGX_KEYPOLICY_MRENCLAVE),
                                 seal_request(&pf, GT_SGX_KEYPOLICY_MRSIGNER),
                                 seal_request(&pf, 0)};
    reqs[2].keyname = GT_SGX_KEYNAME_REPORT;
    uint8_t got[3][16], want[16];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(enclave_egetkey(e, &reqs[i], got[i]), 0);
        GT_ASSERT_OK(gt_sgx_egetkey(want, &pf, &secs, &reqs[i]));
        assert_memory_equal(got[i], want, 16);
    }
    assert_memory_not_equal(got[0], got[1], 16);
    // Refusals come back in RAX with the SDM's codes, the key untouched (zero here).
    gt_sgx_keyrequest bad = reqs[0];
    bad.isvsvn = (uint16_t)(secs.isvsvn + 1);
    assert_int_equal(enclave_egetkey(e, &bad, want), 64);    // SGX_INVALID_ISVSVN
    bad = reqs[0];
    bad.cpusvn[5] = 4;
    assert_int_equal(enclave_egetkey(e, &bad, want), 32);    // SGX_INVALID_CPUSVN
    bad = reqs[0];
    bad.keyname = 9;
    assert_int_equal(enclave_egetkey(e, &bad, want), 256);   // SGX_INVALID_KEYNAME
    bad.keyname = GT_SGX_KEYNAME_PROVISION;                  // no PROVISIONKEY attribute
    assert_int_equal(enclave_egetkey(e, &bad, want), 2);
    gt_enclave_stop(e);
    free_files(&f);
}

// The seal key is what sealing rests on: the same after the enclave process restarts, another
// for another MRENCLAVE under the MRENCLAVE policy, the same for the same signer under MRSIGNER.
static void test_seal_key_survives_restart(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    gt_sgx_keyrequest by_enclave = seal_request(&pf, GT_SGX_KEYPOLICY_MRENCLAVE);
    gt_sgx_keyrequest by_signer = seal_request(&pf, GT_SGX_KEYPOLICY_MRSIGNER);
    uint8_t first[16], again[16], other[16], signer_a[16], signer_b[16];
    enclave_files f;
    gt_enclave *e = start("example", &f, &pf, NULL, NULL);
    int pid = gt_enclave_pid(e);
    assert_int_equal(enclave_egetkey(e, &by_enclave, first), 0);
    assert_int_equal(enclave_egetkey(e, &by_signer, signer_a), 0);
    gt_enclave_stop(e);
    free_files(&f);
    e = start("example", &f, &pf, NULL, NULL);
    assert_int_not_equal(gt_enclave_pid(e), pid);
    assert_int_equal(enclave_egetkey(e, &by_enclave, again), 0);
    gt_enclave_stop(e);
    free_files(&f);
    assert_memory_equal(first, again, 16);
    e = start("example_b", &f, &pf, NULL, NULL);
    assert_int_equal(enclave_egetkey(e, &by_enclave, other), 0);
    assert_int_equal(enclave_egetkey(e, &by_signer, signer_b), 0);
    gt_enclave_stop(e);
    free_files(&f);
    assert_memory_not_equal(first, other, 16);
    assert_memory_equal(signer_a, signer_b, 16);
}

// EREPORT by `from` for `to` (TARGETINFO of to's identity) with the given REPORTDATA.
static void report_for(gt_enclave *from, gt_enclave *to, uint8_t fill,
                       uint8_t report[GT_SGX_REPORT_BYTES])
{
    gt_sgx_secs_identity target = secs_of(to);
    gt_sgx_targetinfo ti;
    gt_sgx_targetinfo_of(&ti, &target);
    uint8_t in[GT_SGX_TARGETINFO_BYTES + GT_SGX_REPORTDATA_BYTES];
    gt_sgx_targetinfo_encode(&ti, in);
    memset(in + GT_SGX_TARGETINFO_BYTES, fill, GT_SGX_REPORTDATA_BYTES);
    gt_buf out = {0};
    assert_int_equal(ecall(from, ECALL_EREPORT, in, sizeof in, &out), 0);
    assert_int_equal(out.len, GT_SGX_REPORT_BYTES);
    memcpy(report, out.data, GT_SGX_REPORT_BYTES);
    gt_buf_free(&out);
}

// The target checks a report as an SGX enclave does: its own REPORT key (EGETKEY inside it, for
// the report's KEYID) over the body. The CMAC itself runs here, outside: the SDK has no AES.
static bool target_accepts(gt_enclave *target, const uint8_t report[GT_SGX_REPORT_BYTES])
{
    gt_sgx_report r;
    if (!gt_is_ok(gt_sgx_report_decode(report, GT_SGX_REPORT_BYTES, &r))) {
        return false;
    }
    gt_sgx_keyrequest req;
    memset(&req, 0, sizeof req);
    req.keyname = GT_SGX_KEYNAME_REPORT;
    memcpy(req.keyid, r.keyid, 32);
    uint8_t key[16], mac[16];
    assert_int_equal(enclave_egetkey(target, &req, key), 0);
    GT_ASSERT_OK(gt_sgx_report_mac(mac, report, key));
    return gt_ct_equal(mac, r.mac, 16);
}

// The target checks the report inside itself (the SDK's verify-report leaf): RAX of the leaf.
static uint64_t verified_inside(gt_enclave *target, const uint8_t report[GT_SGX_REPORT_BYTES])
{
    gt_buf out = {0};
    assert_int_equal(ecall(target, ECALL_VERIFY_REPORT, report, GT_SGX_REPORT_BYTES, &out), 0);
    assert_int_equal(out.len, 8);
    gt_reader r = gt_reader_init(out.data, out.len);
    uint64_t rax = 0;
    GT_ASSERT_OK(gt_reader_u64le(&r, &rax));
    gt_buf_free(&out);
    return rax;
}

// Local attestation with the MAC checked inside the target enclave: a report from A for B
// verifies in B; every single-bit flip of it is refused in B; it is refused in A (another
// target), and a report A made for itself is refused in B.
static void test_report_verified_inside_target(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    enclave_files fa, fb;
    gt_enclave *a = start("example", &fa, &pf, NULL, NULL);
    gt_enclave *b = start("example_b", &fb, &pf, NULL, NULL);
    uint8_t a_to_b[GT_SGX_REPORT_BYTES], a_to_a[GT_SGX_REPORT_BYTES], b_to_a[GT_SGX_REPORT_BYTES];
    report_for(a, b, 0x11, a_to_b);
    report_for(a, a, 0x22, a_to_a);
    report_for(b, a, 0x33, b_to_a);
    assert_int_equal(verified_inside(b, a_to_b), 0);
    assert_int_equal(verified_inside(a, b_to_a), 0);
    assert_int_equal(verified_inside(a, a_to_a), 0);   // a report to oneself is one too
    assert_int_equal(verified_inside(a, a_to_b), GTSDK_VERIFY_E_REFUSED);
    assert_int_equal(verified_inside(b, a_to_a), GTSDK_VERIFY_E_REFUSED);
    int refused = 0;
    for (size_t bit = 0; bit < 8 * GT_SGX_REPORT_BYTES; bit++) {
        uint8_t flipped[GT_SGX_REPORT_BYTES];
        memcpy(flipped, a_to_b, sizeof flipped);
        flipped[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        refused += verified_inside(b, flipped) == GTSDK_VERIFY_E_REFUSED;
    }
    assert_int_equal(refused, 8 * GT_SGX_REPORT_BYTES);
    assert_int_equal(verified_inside(b, a_to_b), 0);  // and the original still verifies
    gt_enclave_stop(a);
    gt_enclave_stop(b);
    free_files(&fa);
    free_files(&fb);
}

static void test_local_attestation(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    enclave_files fa, fb;
    gt_enclave *a = start("example", &fa, &pf, NULL, NULL);
    gt_enclave *b = start("example_b", &fb, &pf, NULL, NULL);
    gt_sgx_secs_identity sa = secs_of(a), sb = secs_of(b);
    assert_memory_not_equal(sa.mrenclave, sb.mrenclave, 32);
    uint8_t a_to_b[GT_SGX_REPORT_BYTES], b_to_a[GT_SGX_REPORT_BYTES];
    report_for(a, b, 0xaa, a_to_b);
    report_for(b, a, 0xbb, b_to_a);
    gt_sgx_report r;
    GT_ASSERT_OK(gt_sgx_report_decode(a_to_b, sizeof a_to_b, &r));
    assert_memory_equal(r.mrenclave, sa.mrenclave, 32);   // the report names its maker
    assert_int_equal(r.reportdata[63], 0xaa);
    // ENCLU[EREPORT] inside the enclave wrote exactly what gt_sgx_ereport gives for its identity
    // (with the KEYID of that enclave process).
    gt_sgx_targetinfo ti_b;
    gt_sgx_targetinfo_of(&ti_b, &sb);
    gt_sgx_report pure;
    uint8_t pure_raw[GT_SGX_REPORT_BYTES];
    GT_ASSERT_OK(gt_sgx_ereport(&pure, &pf, &sa, &ti_b, r.reportdata, r.keyid));
    gt_sgx_report_write(&pure, pure_raw);
    assert_memory_equal(pure_raw, a_to_b, GT_SGX_REPORT_BYTES);
    // Each verifies at its target, inside the target enclave's key and by the pure function ...
    assert_true(target_accepts(b, a_to_b));
    assert_true(target_accepts(a, b_to_a));
    GT_ASSERT_OK(gt_sgx_report_verify(&r, &pf, &sb));
    // ... and at no other target.
    assert_false(target_accepts(a, a_to_b));
    assert_false(target_accepts(b, b_to_a));
    GT_ASSERT_CODE(gt_sgx_report_verify(&r, &pf, &sa), GT_E_AUTH);
    // Every single-bit flip of the report is refused at the right target.
    for (size_t bit = 0; bit < 8 * GT_SGX_REPORT_BYTES; bit++) {
        uint8_t flipped[GT_SGX_REPORT_BYTES];
        memcpy(flipped, a_to_b, sizeof flipped);
        flipped[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        gt_sgx_report fr;
        gt_err err = gt_sgx_report_decode(flipped, sizeof flipped, &fr);
        if (gt_is_ok(err)) {
            err = gt_sgx_report_verify(&fr, &pf, &sb);
        }
        if (gt_is_ok(err)) {
            fail_msg("a report with bit %zu flipped verified", bit);
        }
    }
    gt_enclave_stop(a);
    gt_enclave_stop(b);
    free_files(&fa);
    free_files(&fb);
}

// A SIGSTRUCT or an image with one bit flipped never runs: EINIT refuses it in the enclave
// process and the host gets the reason.
static void test_wrong_sigstruct_refused(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    load_files("example", &f);
    static const size_t bits[] = {960 * 8 + 3,  /* ENCLAVEHASH */ 1026 * 8, /* ISVSVN */
                                  600 * 8 + 1,  /* SIGNATURE */ 200 * 8 + 7 /* MODULUS */};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        f.sig.data[bits[i] / 8] ^= (uint8_t)(1u << (bits[i] % 8));
        gt_enclave_spec spec = spec_of(&f, &pf);
        gt_enclave *e = NULL;
        GT_ASSERT_ERR(gt_enclave_start(&e, &spec), GT_E_AUTH, "einit");
        assert_null(e);
        f.sig.data[bits[i] / 8] ^= (uint8_t)(1u << (bits[i] % 8));
    }
    f.image.data[0x1000 + 17] ^= 0x10;  // the entry code
    gt_enclave_spec spec = spec_of(&f, &pf);
    gt_enclave *e = NULL;
    GT_ASSERT_ERR(gt_enclave_start(&e, &spec), GT_E_AUTH, "MRENCLAVE");
    f.image.data[0x1000 + 17] ^= 0x10;
    GT_ASSERT_OK(gt_enclave_start(&e, &spec));  // and the unflipped pair does run
    gt_enclave_stop(e);
    free_files(&f);
}

// An impostor process that answers the host correctly in every field but cannot MAC its REPORT
// for the host (it lacks the platform root) is refused: no session, no ECALL.
static void test_impostor_process_refused(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    load_files("example", &f);
    gt_enclave_spec spec = spec_of(&f, &pf);
    spec.process_path = GT_SOURCE_DIR "/tests/enclave/fake_enclave_process.py";
    gt_enclave *e = NULL;
    GT_ASSERT_ERR(gt_enclave_start(&e, &spec), GT_E_AUTH, "MAC does not verify");
    assert_null(e);
    free_files(&f);
}

typedef struct {
    int pid;
    double killed_at;
} kill_plan;

static void *kill_later(void *arg)
{
    kill_plan *k = arg;
    usleep(200 * 1000);
    k->killed_at = gt_now_seconds();
    kill(k->pid, SIGKILL);
    return NULL;
}

// The ENCLU handler takes SIGILL and SIGSEGV (docs/enclave.md): a fault of any other
// instruction, a page fault or a #GP, must still end the enclave, not be emulated or skipped.
static void test_enclave_fault_ends_enclave(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    static const uint64_t bad[] = {0, 0x8000000000000000ull};  // unmapped; non-canonical (#GP)
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gt_enclave *e = start("example", &f, &pf, NULL, NULL);
        uint8_t in[8];
        gt_store_u64le(in, bad[i]);
        gt_buf out = {0};
        int64_t status = 0;
        GT_ASSERT_ERR(gt_enclave_ecall(e, ECALL_FAULT, in, sizeof in, &out, &status), GT_E_PEER,
                      "killed by signal 11");
        GT_ASSERT_CODE(gt_enclave_ecall(e, ECALL_ADD, NULL, 0, &out, &status), GT_E_STATE);
        gt_buf_free(&out);
        gt_enclave_stop(e);
        free_files(&f);
    }
}

static void test_killed_mid_ecall(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    gt_enclave *e = start("example", &f, &pf, NULL, NULL);
    kill_plan k = {.pid = gt_enclave_pid(e)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, kill_later, &k), 0);
    gt_buf out = {0};
    int64_t status = 0;
    // The host waits on the ring (asleep in its futex): the socket's hang-up wakes its next
    // liveness check (10 ms), so the error comes well within a second of the kill.
    GT_ASSERT_ERR(gt_enclave_ecall(e, ECALL_SPIN, NULL, 0, &out, &status), GT_E_PEER,
                  "killed by signal 9");
    double returned_at = gt_now_seconds();
    pthread_join(t, NULL);
    assert_true(returned_at - k.killed_at < 1.0);
    GT_ASSERT_CODE(gt_enclave_ecall(e, ECALL_ADD, NULL, 0, &out, &status), GT_E_STATE);
    gt_buf_free(&out);
    gt_enclave_stop(e);
    free_files(&f);
}

// Removes CAP_SYS_PTRACE from this process (what a root host would otherwise read any process's
// memory with). Returns false if that fails.
static bool drop_ptrace_cap(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0) {
        return false;
    }
    d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
    d[CAP_SYS_PTRACE / 32].permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
    d[CAP_SYS_PTRACE / 32].inheritable &= ~(1u << (CAP_SYS_PTRACE % 32));
    return syscall(SYS_capset, &h, d) == 0;
}

// In a child without CAP_SYS_PTRACE: reads 16 bytes of pid's memory at addr through
// /proc/PID/mem. Exit 0: read; 1: refused; 2: test setup failed.
static int probe_read(int pid, uint64_t addr)
{
    pid_t c = fork();
    if (c == 0) {
        if (!drop_ptrace_cap()) {
            _exit(2);
        }
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/mem", pid);
        int fd = open(path, O_RDONLY);
        uint8_t buf[16];
        _exit(fd >= 0 && pread(fd, buf, sizeof buf, (off_t)addr) == (ssize_t)sizeof buf ? 0 : 1);
    }
    int st = 0;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}

// The host (same uid, without CAP_SYS_PTRACE) cannot read the enclave process's memory, while
// the same probe reads a plain process's: what refuses it is the enclave process being
// non-dumpable. A root host that keeps CAP_SYS_PTRACE can read it: this is a process, not a TEE.
static void test_host_cannot_read_enclave_memory(void **state)
{
    (void)state;
    static uint8_t marker[16] = "readable marker";
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t plain = fork();
    if (plain == 0) {  // the control: a dumpable process with the prober's own capabilities
        close(ready[0]);
        if (drop_ptrace_cap() && write(ready[1], "r", 1) == 1) {
            pause();
        }
        _exit(0);
    }
    close(ready[1]);
    char byte = 0;
    assert_int_equal(read(ready[0], &byte, 1), 1);  // it has dropped the capability
    close(ready[0]);
    int control = probe_read(plain, (uint64_t)(uintptr_t)marker);
    kill(plain, SIGKILL);
    waitpid(plain, NULL, 0);
    assert_int_equal(control, 0);
    gt_sgx_platform pf = test_platform();
    enclave_files f;
    gt_enclave *e = start("example", &f, &pf, NULL, NULL);
    int enclave = probe_read(gt_enclave_pid(e), GTSDK_BASE + 0x1000);
    gt_enclave_stop(e);
    free_files(&f);
    assert_int_equal(enclave, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ecalls),
        cmocka_unit_test(test_ocall_round_trip),
        cmocka_unit_test(test_ocall_round_trip_other_paths),
        cmocka_unit_test(test_egetkey_in_enclave),
        cmocka_unit_test(test_seal_key_survives_restart),
        cmocka_unit_test(test_local_attestation),
        cmocka_unit_test(test_report_verified_inside_target),
        cmocka_unit_test(test_wrong_sigstruct_refused),
        cmocka_unit_test(test_impostor_process_refused),
        cmocka_unit_test(test_killed_mid_ecall),
        cmocka_unit_test(test_enclave_fault_ends_enclave),
        cmocka_unit_test(test_host_cannot_read_enclave_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
