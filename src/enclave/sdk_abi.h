// The contract between an enclave built with the SDK (sdk/enclave/, freestanding) and the enclave
// runtime that loads it (src/enclave/runtime.c, hosted): where the enclave is linked, the exit
// reasons its entry stub leaves with, and the marshalling block of an ECALL. Plain macros and a
// plain struct so that assembly, freestanding C and hosted C can all include it.
#ifndef GTSDK_ABI_H
#define GTSDK_ABI_H

// The enclave's fixed link address (enclave.lds): the runtime maps ELRANGE exactly there, so an
// enclave needs no relocations and the bytes measured are the bytes that run. Above ASan's
// shadow (which ends at 0x10007fff7fff) and below where Linux puts mmaps and PIE binaries.
#define GTSDK_BASE 0x200000000000

// RDI on entry: an ECALL number (0..GTSDK_MAX_ECALLS-1), or ORET: the re-entry that returns
// from an OCALL (RSI = its status, RDX = its reply length).
#define GTSDK_ORET (-1)
#define GTSDK_MAX_ECALLS 64
// RDI at EEXIT: why the enclave left. RETURN: RSI = the ECALL's status. OCALL: RSI = the OCALL
// number, RDX = the length of its request in the OCALL buffer.
#define GTSDK_EXIT_RETURN 1
#define GTSDK_EXIT_OCALL 2

// Statuses the SDK itself returns (an ECALL's own statuses are >= 0 by convention).
#define GTSDK_E_NOECALL (-1001)   // no such ECALL
#define GTSDK_E_BADARG (-1002)    // a marshalling pointer inside the enclave, or sizes too big
#define GTSDK_E_STATE (-1003)     // ORET with no OCALL outstanding
#define GTSDK_E_OCALL (-1004)     // an OCALL reply larger than the caller's buffer

// Sizes of the enclave's own staging buffers (part of the measured image).
#define GTSDK_IO_BYTES 32768
#define GTSDK_STACK_BYTES 32768

#ifndef __ASSEMBLER__
// In untrusted memory; RSI at ECALL entry points here. The enclave copies `in` into its own
// memory, writes at most out_cap bytes to `out` and their count to out_len; an OCALL's request
// and reply travel through ocall_buf (ocall_cap bytes).
typedef struct {
    unsigned long long in, in_len;
    unsigned long long out, out_cap, out_len;
    unsigned long long ocall_buf, ocall_cap;
} gtsdk_ms;
#endif

// gputravel's sealing leaves of ENCLU (gtsdk.h; not SGX leaves: real SGX raises #GP for them).
#define GTSDK_ENCLU_GT_SEAL 0x47540000u
#define GTSDK_ENCLU_GT_UNSEAL 0x47540001u
// The wrap leaf (gt_enclave_wrap_input in enclave.h): the request as the seal leaves', out 92 bytes.
#define GTSDK_ENCLU_GT_WRAP 0x47540003u
#define GTSDK_SEAL_E_SPACE 1
#define GTSDK_SEAL_E_REFUSED 2
#define GTSDK_WRAP_E_DEVICE 3  // the wrap leaf: the recipient is not a device the agreement accepts
// gputravel's report-verification leaf (gtsdk.h gtsdk_verify_report): RBX = a REPORT (432 bytes,
// 512-aligned) in enclave memory; RAX back 0 when its MAC verifies under this enclave's own
// report key, GTSDK_VERIFY_E_REFUSED otherwise (another target, any byte changed, reserved bytes
// set).
#define GTSDK_ENCLU_GT_VERIFY_REPORT 0x47540002u
#define GTSDK_VERIFY_E_REFUSED 1

#endif
