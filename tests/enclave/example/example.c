// The example enclave (built with the SDK in sdk/enclave, freestanding, signed at build
// time): small ECALLs the tests and the benchmark drive. EXAMPLE_VARIANT changes one constant so
// that a second build is a second enclave (another MRENCLAVE) for local attestation.
// This enclave hands keys out of itself (ECALL_EGETKEY) only so the tests can compare them with
// gt_sgx_egetkey: a real enclave never does.
#include "gtsdk.h"

#ifndef EXAMPLE_VARIANT
#define EXAMPLE_VARIANT 1
#endif

const volatile uint64_t example_variant = EXAMPLE_VARIANT;

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

static void store_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

// 0: two u64 in, their sum out.
static long ecall_add(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                      size_t *out_len)
{
    if (in_len != 16 || out_cap < 8) {
        return 1;
    }
    store_u64(out, load_u64(in) + load_u64(in + 8));
    *out_len = 8;
    return 0;
}

// 1: the input back.
static long ecall_echo(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                       size_t *out_len)
{
    if (in_len > out_cap) {
        return 1;
    }
    memcpy(out, in, in_len);
    *out_len = in_len;
    return 0;
}

// 2: OCALL 0 with the input, the host's reply back; status is the host's status + 100.
static long ecall_ocall(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                        size_t *out_len)
{
    long st = gtsdk_ocall(0, in, in_len, out, out_cap, out_len);
    return st < 0 ? st : st + 100;
}

// 3: ENCLU[EGETKEY] of the 512-byte KEYREQUEST given: out = RAX (u64) then the 16 key bytes.
static long ecall_egetkey(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                          size_t *out_len)
{
    static gtsdk_keyrequest req;
    static gtsdk_key128 key;
    if (in_len != sizeof req || out_cap < 24) {
        return 1;
    }
    memcpy(&req, in, sizeof req);
    uint64_t rax = gtsdk_egetkey(&req, &key);
    store_u64(out, rax);
    memcpy(out + 8, key.bytes, 16);
    gtsdk_wipe(&key, sizeof key);
    *out_len = 24;
    return 0;
}

// 4: ENCLU[EREPORT]: in = TARGETINFO (512) then REPORTDATA (64); out = the REPORT (432).
static long ecall_ereport(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                          size_t *out_len)
{
    static gtsdk_targetinfo ti;
    static gtsdk_reportdata data;
    static gtsdk_report report;
    if (in_len != sizeof ti.bytes + sizeof data.bytes || out_cap < sizeof report.bytes) {
        return 1;
    }
    memcpy(ti.bytes, in, sizeof ti.bytes);
    memcpy(data.bytes, in + sizeof ti.bytes, sizeof data.bytes);
    gtsdk_ereport(&ti, &data, &report);
    memcpy(out, report.bytes, sizeof report.bytes);
    *out_len = sizeof report.bytes;
    return 0;
}

// 5: spins until the host gives up on it (the kill-mid-ECALL test).
static long ecall_spin(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                       size_t *out_len)
{
    (void)in, (void)in_len, (void)out, (void)out_cap, (void)out_len;
    for (;;) {
        __asm__ volatile("pause");
    }
    return 0;
}

// 6: the variant number (tells the two builds apart).
static long ecall_variant(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                          size_t *out_len)
{
    (void)in, (void)in_len;
    if (out_cap < 8) {
        return 1;
    }
    store_u64(out, example_variant);
    *out_len = 8;
    return 0;
}

// 7: a REPORT for a quote. in = the quoting enclave's TARGETINFO (512) then a 32-byte nonce;
// out = the REPORT (432). The enclave, not the host, chooses REPORTDATA: the nonce, then a
// label of its own (a real enclave would put a hash of its public key or result there), so the
// host can make it vouch for a fresh nonce but for nothing else.
static long ecall_quote_report(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                               size_t *out_len)
{
    static const char label[32] = "gputravel example enclave quote";
    static gtsdk_targetinfo ti;
    static gtsdk_reportdata data;
    static gtsdk_report report;
    if (in_len != sizeof ti.bytes + 32 || out_cap < sizeof report.bytes) {
        return 1;
    }
    memcpy(ti.bytes, in, sizeof ti.bytes);
    memcpy(data.bytes, in + sizeof ti.bytes, 32);
    memcpy(data.bytes + 32, label, sizeof label);
    gtsdk_ereport(&ti, &data, &report);
    memcpy(out, report.bytes, sizeof report.bytes);
    *out_len = sizeof report.bytes;
    return 0;
}

// 8: seals in[2..] inside the enclave under KEYPOLICY in[0..2] (u16): out = the blob. Status:
// the seal leaf's RAX. 9: unseals the blob in: out = the plaintext, status the leaf's RAX.
static long seal_call(uint32_t leaf, uint16_t policy, const uint8_t *in, size_t in_len,
                      uint8_t *out, size_t out_cap, size_t *out_len)
{
    static gtsdk_seal_request req;
    memset(&req, 0, sizeof req);
    req.keypolicy = policy;
    req.in = (uint64_t)(uintptr_t)in;
    req.in_len = in_len;
    req.out = (uint64_t)(uintptr_t)out;
    req.out_cap = out_cap;
    uint64_t rax = gtsdk_seal_call(leaf, &req);
    *out_len = rax == 0 ? req.out_len : 0;
    return (long)rax;
}

static long ecall_seal(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                       size_t *out_len)
{
    if (in_len < 2) {
        return -1;
    }
    uint16_t policy = (uint16_t)(in[0] | in[1] << 8);
    return seal_call(GTSDK_ENCLU_GT_SEAL, policy, in + 2, in_len - 2, out, out_cap, out_len);
}

static long ecall_unseal(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                         size_t *out_len)
{
    return seal_call(GTSDK_ENCLU_GT_UNSEAL, 0, in, in_len, out, out_cap, out_len);
}

// 10: local attestation's target side: is the REPORT in (432 bytes) addressed to this enclave
// and unchanged? out = the verify leaf's RAX (u64: 0 verified, else refused).
static long ecall_verify_report(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                                size_t *out_len)
{
    static gtsdk_report report;
    if (in_len != sizeof report.bytes || out_cap < 8) {
        return 1;
    }
    memcpy(report.bytes, in, sizeof report.bytes);
    store_u64(out, gtsdk_verify_report(&report));
    *out_len = 8;
    return 0;
}

// 11: reads 8 bytes at the address given (u64 in): a bug in enclave code, for the test that a
// fault other than ENCLU's still ends the enclave (address 0: a page fault; a non-canonical
// address: #GP, the same signal and si_code as an ENCLU where SGX is present but off).
static long ecall_fault(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                        size_t *out_len)
{
    if (in_len != 8 || out_cap < 8) {
        return 1;
    }
    const volatile uint64_t *p = (const volatile uint64_t *)(uintptr_t)load_u64(in);
    store_u64(out, *p);
    *out_len = 8;
    return 0;
}

GTSDK_ECALLS(ecall_add, ecall_echo, ecall_ocall, ecall_egetkey, ecall_ereport, ecall_spin,
             ecall_variant, ecall_quote_report, ecall_seal, ecall_unseal, ecall_verify_report,
             ecall_fault);
