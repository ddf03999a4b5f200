// gputravel's enclave SDK: what enclave code (freestanding C, no libc) includes. An enclave
// defines its ECALL table with GTSDK_ECALLS, calls out with gtsdk_ocall, and reaches the CPU's
// enclave instructions through gtsdk_egetkey / gtsdk_ereport, which execute the real ENCLU
// with the SDM's register conventions (on SGX hardware they would run as they are; elsewhere
// the enclave runtime emulates them, docs/enclave.md "Running enclaves").
#ifndef GTSDK_H
#define GTSDK_H

#include "sdk_abi.h"

#include <stddef.h>
#include <stdint.h>

// Everything an enclave declares is its own (one static image): hidden visibility makes every
// reference RIP-relative instead of through a GOT, which clang would otherwise emit under -fpie
// and which cannot be relaxed at an address above 4 GiB.
#pragma GCC visibility push(hidden)

// An ECALL: its input (already copied into the enclave), its output buffer (in the enclave,
// copied out after it returns) and where to say how much it wrote. Returns a status >= 0.
typedef long (*gtsdk_ecall_fn)(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                               size_t *out_len);

// The table: gtsdk_ecalls[n] serves ECALL number n.
#define GTSDK_ECALLS(...)                                                      \
    const gtsdk_ecall_fn gtsdk_ecalls[] = {__VA_ARGS__};                       \
    const size_t gtsdk_ecall_count = sizeof gtsdk_ecalls / sizeof gtsdk_ecalls[0]

// Calls OCALL number n on the host: in (in_len bytes) goes out, at most out_cap reply bytes come
// back into out (*out_len of them). Returns the host's status, or GTSDK_E_* of the SDK's.
long gtsdk_ocall(uint32_t n, const void *in, size_t in_len, void *out, size_t out_cap,
                 size_t *out_len);

// SDM structures as ENCLU takes them (sizes and alignment required by the instruction).
typedef struct __attribute__((aligned(512))) {
    uint16_t keyname, keypolicy, isvsvn, reserved1;
    uint8_t cpusvn[16];
    uint64_t attributemask_flags, attributemask_xfrm;
    uint8_t keyid[32];
    uint32_t miscmask;
    uint16_t configsvn;
    uint8_t reserved2[434];
} gtsdk_keyrequest;

typedef struct __attribute__((aligned(512))) {
    uint8_t bytes[512];
} gtsdk_targetinfo;

typedef struct __attribute__((aligned(128))) {
    uint8_t bytes[64];
} gtsdk_reportdata;

typedef struct __attribute__((aligned(512))) {
    uint8_t bytes[432];
} gtsdk_report;

typedef struct __attribute__((aligned(16))) {
    uint8_t bytes[16];
} gtsdk_key128;

#define GTSDK_ENCLU_EREPORT 0
#define GTSDK_ENCLU_EGETKEY 1

// ENCLU[EGETKEY]: RAX = 1, RBX = the KEYREQUEST, RCX = the key's destination. Returns RAX: 0,
// or the SDM's error code (SGX_INVALID_ATTRIBUTE 2, SGX_INVALID_CPUSVN 32, SGX_INVALID_ISVSVN
// 64, SGX_INVALID_KEYNAME 256).
static inline uint64_t gtsdk_egetkey(const gtsdk_keyrequest *req, gtsdk_key128 *key)
{
    uint64_t rax = GTSDK_ENCLU_EGETKEY;
    __asm__ volatile("enclu" : "+a"(rax) : "b"(req), "c"(key) : "memory", "cc");
    return rax;
}

// ENCLU[EREPORT]: RAX = 0, RBX = TARGETINFO, RCX = REPORTDATA, RDX = the REPORT's destination.
static inline void gtsdk_ereport(const gtsdk_targetinfo *ti, const gtsdk_reportdata *data,
                                 gtsdk_report *report)
{
    uint64_t rax = GTSDK_ENCLU_EREPORT;
    __asm__ volatile("enclu" : "+a"(rax) : "b"(ti), "c"(data), "d"(report) : "memory", "cc");
}

// gputravel's sealing leaves (not SGX's: real SGX raises #GP for them, so an enclave using them
// runs on gputravel's enclave runtime only). The runtime derives the enclave's SEAL key (EGETKEY,
// KEYPOLICY as asked) and seals with AES-256-GCM in the gt_sgx_seal blob format, or unseals such
// a blob for this enclave; the key never enters enclave memory. RAX = the leaf, RBX = the
// request; RAX back: 0, GTSDK_SEAL_E_SPACE or GTSDK_SEAL_E_REFUSED; out_len written.
// (GTSDK_ENCLU_GT_SEAL / _UNSEAL and the error codes: sdk_abi.h.)
typedef struct __attribute__((aligned(64))) {
    uint16_t keypolicy;      // 1 MRENCLAVE, 2 MRSIGNER (seal only)
    uint8_t reserved1[6];
    uint64_t in, in_len, out, out_cap;
    uint64_t out_len;        // written by the runtime
    uint8_t reserved2[16];
} gtsdk_seal_request;

_Static_assert(sizeof(gtsdk_seal_request) == 64 && offsetof(gtsdk_seal_request, out_len) == 40,
               "the seal leaves' request layout (gt_enclave_seal_request_parse)");

static inline uint64_t gtsdk_seal_call(uint32_t leaf, gtsdk_seal_request *req)
{
    uint64_t rax = leaf;
    __asm__ volatile("enclu" : "+a"(rax) : "b"(req) : "memory", "cc");
    return rax;
}

// gputravel's report-verification leaf (not SGX's, like the seal leaves): is this REPORT
// addressed to this enclave and unchanged? The runtime recomputes its AES-128-CMAC under this
// enclave's own report key (its identity, the report's KEYID) and compares in constant time;
// the key never enters enclave memory. Returns 0 (verified) or GTSDK_VERIFY_E_REFUSED.
static inline uint64_t gtsdk_verify_report(const gtsdk_report *report)
{
    uint64_t rax = GTSDK_ENCLU_GT_VERIFY_REPORT;
    __asm__ volatile("enclu" : "+a"(rax) : "b"(report) : "memory", "cc");
    return rax;
}

// Freestanding basics (the compiler may also call these itself).
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);
// Wipes n bytes in a way the compiler keeps.
void gtsdk_wipe(void *p, size_t n);

#pragma GCC visibility pop

#endif
