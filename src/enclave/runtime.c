// The enclave process (INSECURE SIMULATION of an SGX enclave; the counterpart of vSGX's enclave
// VM): loads a flat SDK image at its link address, measuring each page as it is EADDed and
// EEXTENDed, runs EINIT's checks, then serves ECALLs from the host through the AES-GCM channel.
// Enclave code runs unmodified: its ENCLU faults on a CPU that cannot run it (#UD, SIGILL, where
// the CPU has no SGX; #GP, SIGSEGV, where it has SGX that is not enabled for this OS, as on Intel
// hosts whose VMs do not get SGX), and the handler below emulates the leaf with SGX's register
// conventions (EEXIT, EGETKEY, EREPORT).
#include "run.h"
#include "sdk_abi.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <linux/capability.h>

enum { LEAF_EREPORT = 0, LEAF_EGETKEY = 1, LEAF_EENTER = 2, LEAF_ERESUME = 3, LEAF_EEXIT = 4,
       LEAF_GT_SEAL = GTSDK_ENCLU_GT_SEAL, LEAF_GT_UNSEAL = GTSDK_ENCLU_GT_UNSEAL,
       LEAF_GT_VERIFY_REPORT = GTSDK_ENCLU_GT_VERIFY_REPORT, LEAF_GT_WRAP = GTSDK_ENCLU_GT_WRAP };
// SDM error codes EGETKEY returns in RAX.
enum { SGX_INVALID_ATTRIBUTE = 2, SGX_INVALID_CPUSVN = 32, SGX_INVALID_ISVSVN = 64,
       SGX_INVALID_KEYNAME = 256 };
#define RFLAGS_ZF 0x40ull
#define RFLAGS_STATUS 0x8d5ull   // CF PF AF ZF SF OF

// The registers an EENTER takes and an EEXIT leaves (gt_encl_eenter below).
typedef struct {
    uint64_t rdi, rsi, rdx, r8;
} eenter_regs;

void gt_encl_eenter(uint64_t tcs, uint64_t entry, eenter_regs *io);

// EENTER as the SDK's entry stub expects it: RAX = CSSA (0), RBX = the TCS, RCX = where EEXIT
// returns to; RDI/RSI/RDX/R8 from io. EEXIT lands at 1: with the enclave's registers, so the
// host's own stack and callee-saved registers are restored from what was saved here.
__asm__(".text\n"
        ".globl gt_encl_eenter\n"
        ".type gt_encl_eenter, @function\n"
        "gt_encl_eenter:\n"
        "    push %rbp\n    push %rbx\n    push %r12\n    push %r13\n    push %r14\n"
        "    push %r15\n"
        "    mov %rsp, eenter_saved_rsp(%rip)\n"
        "    mov %rdx, eenter_saved_io(%rip)\n"
        "    mov %rdi, %rbx\n"
        "    mov %rsi, %r11\n"
        "    mov 24(%rdx), %r8\n    mov 8(%rdx), %rsi\n    mov 0(%rdx), %rdi\n"
        "    mov 16(%rdx), %rdx\n"
        "    xor %eax, %eax\n"
        "    lea 1f(%rip), %rcx\n"
        "    jmp *%r11\n"
        "1:  mov eenter_saved_rsp(%rip), %rsp\n"
        "    mov eenter_saved_io(%rip), %rax\n"
        "    mov %rdi, 0(%rax)\n    mov %rsi, 8(%rax)\n    mov %rdx, 16(%rax)\n"
        "    mov %r8, 24(%rax)\n"
        "    cld\n"
        "    pop %r15\n    pop %r14\n    pop %r13\n    pop %r12\n    pop %rbx\n    pop %rbp\n"
        "    ret\n"
        ".size gt_encl_eenter, .-gt_encl_eenter\n"
        ".local eenter_saved_rsp, eenter_saved_io\n"
        ".comm eenter_saved_rsp, 8, 8\n"
        ".comm eenter_saved_io, 8, 8\n");

// The one enclave this process runs (the ENCLU fault handler needs it without arguments).
static struct {
    uint8_t *base;
    uint64_t size;
    uint64_t image_len;
    uint64_t entry;
    gt_sgx_secs_identity secs;
    gt_sgx_platform platform;
    uint8_t report_keyid[32];   // this "boot"'s KEYID for reports
    bool trap_every_eexit;      // GPUTRAVEL_ENCLAVE_EEXIT=trap: no rewriting (below)
} g_encl;

static void fatal(const char *what)
{
    // Async-signal-safe: only write(2) and _exit.
    static const char prefix[] = "gputravel-enclave-process (insecure-simulation): ";
    ssize_t ignored = write(2, prefix, sizeof prefix - 1);
    ignored = write(2, what, strlen(what));
    ignored = write(2, "\n", 1);
    (void)ignored;
    _exit(3);
}

// [p, p + n) inside the enclave's added pages, aligned as the instruction requires.
static uint8_t *enclave_ptr(uint64_t p, uint64_t n, uint64_t align)
{
    uint64_t base = (uint64_t)(uintptr_t)g_encl.base;
    if (p % align != 0 || p < base || p - base > g_encl.image_len ||
        n > g_encl.image_len - (p - base)) {
        return NULL;
    }
    return (uint8_t *)(uintptr_t)p;
}

static uint64_t emulate_egetkey(uint64_t rbx, uint64_t rcx)
{
    const uint8_t *reqp = enclave_ptr(rbx, GT_SGX_KEYREQUEST_BYTES, 512);
    uint8_t *out = enclave_ptr(rcx, GT_SGX_KEY_BYTES_128, 16);
    if (reqp == NULL || out == NULL) {
        fatal("EGETKEY: KEYREQUEST or output outside the enclave or misaligned (#GP)");
    }
    gt_sgx_keyrequest req;
    if (!gt_is_ok(gt_sgx_keyrequest_parse(reqp, GT_SGX_KEYREQUEST_BYTES, &req))) {
        fatal("EGETKEY: KEYREQUEST reserved bytes set (#GP)");
    }
    uint64_t rax = 0;
    if (req.keyname > GT_SGX_KEYNAME_SEAL) {
        rax = SGX_INVALID_KEYNAME;
    } else if (req.isvsvn > g_encl.secs.isvsvn) {
        rax = SGX_INVALID_ISVSVN;
    }
    for (int i = 0; rax == 0 && i < GT_SGX_CPUSVN_BYTES; i++) {
        if (req.cpusvn[i] > g_encl.platform.cpusvn[i]) {
            rax = SGX_INVALID_CPUSVN;
        }
    }
    uint8_t key[GT_SGX_KEY_BYTES_128] = {0};
    if (rax == 0 && !gt_is_ok(gt_sgx_egetkey(key, &g_encl.platform, &g_encl.secs, &req))) {
        rax = SGX_INVALID_ATTRIBUTE;  // the policy refusals left: attributes, KSS, CONFIGSVN
    }
    if (rax == 0) {
        memcpy(out, key, sizeof key);
    }
    gt_secure_zero(key, sizeof key);
    gt_secure_zero(&req, sizeof req);
    return rax;
}

static void emulate_ereport(uint64_t rbx, uint64_t rcx, uint64_t rdx)
{
    const uint8_t *tip = enclave_ptr(rbx, GT_SGX_TARGETINFO_BYTES, 512);
    const uint8_t *data = enclave_ptr(rcx, GT_SGX_REPORTDATA_BYTES, 128);
    uint8_t *out = enclave_ptr(rdx, GT_SGX_REPORT_BYTES, 512);
    if (tip == NULL || data == NULL || out == NULL) {
        fatal("EREPORT: an operand outside the enclave or misaligned (#GP)");
    }
    gt_sgx_targetinfo ti;
    gt_sgx_report report;
    if (!gt_is_ok(gt_sgx_targetinfo_parse(tip, GT_SGX_TARGETINFO_BYTES, &ti))) {
        fatal("EREPORT: TARGETINFO reserved bytes set (#GP)");
    }
    if (!gt_is_ok(gt_sgx_ereport(&report, &g_encl.platform, &g_encl.secs, &ti, data,
                                 g_encl.report_keyid))) {
        fatal("EREPORT: the report key could not be derived");
    }
    gt_sgx_report_write(&report, out);
}

// gputravel's sealing leaves (not SGX: a real CPU raises #GP for them, so an enclave that uses
// them runs on this runtime only). The enclave process already derives every key of the enclave
// (EGETKEY above) and holds its memory, so sealing here, with OpenSSL, moves no secret across a
// boundary: the SEAL key is gt_sgx_egetkey's for the enclave's own SECS identity, and neither
// it nor the plaintext leaves the enclave's side; only the blob is written back into the
// enclave. RBX = the 64-byte request (gtsdk_seal_request; gt_enclave_seal_request_parse).
// RAX back: 0, GTSDK_SEAL_E_SPACE (out too small), GTSDK_SEAL_E_REFUSED (unseal: not this
// enclave's, or changed; seal: a policy EGETKEY refuses).
static uint64_t emulate_seal(bool unseal, uint64_t rbx)
{
    uint8_t *reqp = enclave_ptr(rbx, GT_ENCLAVE_SEAL_REQUEST_BYTES, 64);
    gt_enclave_seal_request q;
    if (reqp == NULL ||
        !gt_is_ok(gt_enclave_seal_request_parse(reqp, GT_ENCLAVE_SEAL_REQUEST_BYTES, &q))) {
        fatal("seal leaf: request outside the enclave, misaligned or reserved bytes set (#GP)");
    }
    const uint8_t *in = enclave_ptr(q.in, q.in_len, 1);
    uint8_t *out = enclave_ptr(q.out, q.out_cap, 1);
    if (in == NULL || out == NULL) {
        fatal("seal leaf: a buffer outside the enclave (#GP)");
    }
    gt_buf result = {0};
    gt_sgx_seal_params sp = {.keypolicy = q.keypolicy};
    gt_err err = unseal ? gt_sgx_unseal(&result, NULL, &g_encl.platform, &g_encl.secs, in,
                                        q.in_len)
                        : gt_sgx_seal(&result, &g_encl.platform, &g_encl.secs, &sp, in, q.in_len,
                                      NULL, 0);
    uint64_t rax = gt_is_ok(err) ? 0 : GTSDK_SEAL_E_REFUSED;
    if (rax == 0 && result.len > q.out_cap) {
        rax = GTSDK_SEAL_E_SPACE;
    }
    if (rax == 0) {
        memcpy(out, result.data, result.len);
    }
    gt_store_u64le(reqp + GT_ENCLAVE_SEAL_REQUEST_OUT_LEN, rax == 0 ? result.len : 0);
    gt_buf_free(&result);  // wipes: the plaintext, when unsealing
    return rax;
}

// gputravel's report-verification leaf (not SGX's; built like the seal leaves): what an SGX
// enclave does with EGETKEY(REPORT) and AES-CMAC in its own code, done on its behalf, since the
// SDK links no AES. The report key is the enclave's own (its SECS identity, the report's
// KEYID), derived here on the enclave's side and never written into enclave memory; the
// compare is constant-time (gt_sgx_report_verify). The REPORT is copied out of the enclave once,
// then decoded and checked. RAX back: 0, or GTSDK_VERIFY_E_REFUSED.
static uint64_t emulate_verify_report(uint64_t rbx)
{
    const uint8_t *p = enclave_ptr(rbx, GT_SGX_REPORT_BYTES, 512);
    if (p == NULL) {
        fatal("verify-report leaf: REPORT outside the enclave or misaligned (#GP)");
    }
    uint8_t raw[GT_SGX_REPORT_BYTES];
    memcpy(raw, p, sizeof raw);
    gt_sgx_report r;
    bool ok = gt_is_ok(gt_sgx_report_decode(raw, sizeof raw, &r)) &&
              gt_is_ok(gt_sgx_report_verify(&r, &g_encl.platform, &g_encl.secs));
    return ok ? 0 : GTSDK_VERIFY_E_REFUSED;
}

// EEXIT without a signal (the common path, docs/enclave.md "Cost"): a SIGILL costs about 22k
// cycles here, more than the goal for a whole ECALL + OCALL. So once an ENCLU has performed
// EEXIT and the instruction before it is `mov $4, %eax` (EEXIT's leaf, as the SDK's stub and
// any EEXIT sequence sets it), the runtime rewrites those three bytes, in the enclave's memory
// only, to `jmp *%rbx; nop`: EEXIT's control transfer (RIP = RBX) without the trap. The image
// measured, signed and sent is unchanged (MRENCLAVE is of the original bytes; on SGX hardware
// the same binary runs ENCLU[EEXIT]); what differs, and is the emulator's to own: RCX is not
// set to the address after ENCLU (the runtime does not use it), an enclave reading its own code
// sees the rewritten bytes, and code that jumped straight to that ENCLU with another leaf in EAX
// would exit instead (the SDK's stub never does). GPUTRAVEL_ENCLAVE_EEXIT=trap turns it off.
static void rewrite_eexit(uint8_t *enclu)
{
    static const uint8_t mov_eax_4[5] = {0xb8, 0x04, 0x00, 0x00, 0x00};
    uint64_t at = (uint64_t)(uintptr_t)enclu;
    if (g_encl.trap_every_eexit ||
        at < (uint64_t)(uintptr_t)g_encl.base + GT_SGX_PAGE_BYTES + sizeof mov_eax_4 ||
        memcmp(enclu - sizeof mov_eax_4, mov_eax_4, sizeof mov_eax_4) != 0) {
        return;
    }
    enclu[0] = 0xff;  // jmp *%rbx
    enclu[1] = 0xe3;
    enclu[2] = 0x90;  // nop: never reached
}

// The wrap leaf (wrap_leaf.c): the seal leaves' request, KEYPOLICY 0; out gets the wrapped key.
// Within the trust boundary for the same reason as sealing: the runtime already holds every key
// the enclave can derive; the derived key is wiped here and only its wrap goes back.
static uint64_t emulate_wrap(uint64_t rbx)
{
    uint8_t *reqp = enclave_ptr(rbx, GT_ENCLAVE_SEAL_REQUEST_BYTES, 64);
    gt_enclave_seal_request q;
    if (reqp == NULL ||
        !gt_is_ok(gt_enclave_seal_request_parse(reqp, GT_ENCLAVE_SEAL_REQUEST_BYTES, &q)) ||
        q.keypolicy != 0) {
        fatal("wrap leaf: request outside the enclave, misaligned or reserved bytes set (#GP)");
    }
    const uint8_t *in = enclave_ptr(q.in, q.in_len, 1);
    uint8_t *out = enclave_ptr(q.out, q.out_cap, 1);
    if (in == NULL || out == NULL) {
        fatal("wrap leaf: a buffer outside the enclave (#GP)");
    }
    uint8_t wrapped[GT_KEYWRAP_BYTES];
    gt_err err = gt_enclave_wrap_derived(wrapped, in, q.in_len);
    uint64_t rax = gt_is_ok(err) ? 0
                   : err.code == GT_E_POLICY || err.code == GT_E_AUTH ? GTSDK_WRAP_E_DEVICE
                                                                      : GTSDK_SEAL_E_REFUSED;
    if (!gt_is_ok(err)) {
        fprintf(stderr, "enclave process: wrap leaf refused: %s\n", err.msg);
    }
    if (rax == 0 && q.out_cap < sizeof wrapped) {
        rax = GTSDK_SEAL_E_SPACE;
    }
    if (rax == 0) {
        memcpy(out, wrapped, sizeof wrapped);
    }
    gt_store_u64le(reqp + GT_ENCLAVE_SEAL_REQUEST_OUT_LEN, rax == 0 ? sizeof wrapped : 0);
    return rax;
}

// ENCLU (0f 01 d7) executed by enclave code raised #UD (SIGILL) or #GP(0) (SIGSEGV with
// SI_KERNEL: SGX present but not enabled; a page fault has another si_code and is never taken for
// an ENCLU). It runs on the alternate stack (as an AEX saves state outside the enclave's stack)
// and, being synchronous with enclave code that holds no libc lock, may call OpenSSL through
// gt_sgx_egetkey.
static void on_enclu(int sig, siginfo_t *si, void *uc_)
{
    ucontext_t *uc = uc_;
    greg_t *g = uc->uc_mcontext.gregs;
    const uint8_t *rip = (const uint8_t *)(uintptr_t)g[REG_RIP];
    if ((sig == SIGSEGV && si->si_code != SI_KERNEL) ||
        enclave_ptr((uint64_t)g[REG_RIP], 3, 1) == NULL || rip[0] != 0x0f || rip[1] != 0x01 ||
        rip[2] != 0xd7) {
        signal(sig, SIG_DFL);  // a real fault: the instruction runs again and ends the process
        return;
    }
    uint64_t leaf = (uint64_t)g[REG_RAX] & 0xffffffffu;
    switch (leaf) {
    case LEAF_EEXIT:
        rewrite_eexit((uint8_t *)(uintptr_t)g[REG_RIP]);
        g[REG_RCX] = (greg_t)(g[REG_RIP] + 3);  // RCX: the address after EEXIT
        g[REG_RIP] = g[REG_RBX];
        return;
    case LEAF_EGETKEY: {
        uint64_t rax = emulate_egetkey((uint64_t)g[REG_RBX], (uint64_t)g[REG_RCX]);
        g[REG_RAX] = (greg_t)rax;
        g[REG_EFL] = (greg_t)(((uint64_t)g[REG_EFL] & ~RFLAGS_STATUS) | (rax ? RFLAGS_ZF : 0));
        break;
    }
    case LEAF_EREPORT:
        emulate_ereport((uint64_t)g[REG_RBX], (uint64_t)g[REG_RCX], (uint64_t)g[REG_RDX]);
        break;
    case LEAF_GT_SEAL:
    case LEAF_GT_UNSEAL:
        g[REG_RAX] = (greg_t)emulate_seal(leaf == LEAF_GT_UNSEAL, (uint64_t)g[REG_RBX]);
        break;
    case LEAF_GT_VERIFY_REPORT:
        g[REG_RAX] = (greg_t)emulate_verify_report((uint64_t)g[REG_RBX]);
        break;
    case LEAF_GT_WRAP:
        g[REG_RAX] = (greg_t)emulate_wrap((uint64_t)g[REG_RBX]);
        break;
    case LEAF_EENTER:
    case LEAF_ERESUME:
        fatal("ENCLU[EENTER/ERESUME] inside an enclave (#GP)");
        break;
    default:
        fatal("ENCLU leaf not emulated (EACCEPT and the EDMM leaves are not supported)");
    }
    g[REG_RIP] += 3;
}

static gt_err install_handler(void)
{
    static uint8_t altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    GT_ENSURE(sigaltstack(&ss, NULL) == 0, GT_E_IO, "enclave process: sigaltstack failed");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_enclu;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    GT_ENSURE(sigaction(SIGILL, &sa, NULL) == 0 && sigaction(SIGSEGV, &sa, NULL) == 0, GT_E_IO,
              "enclave process: sigaction failed");
    return GT_OK;
}

// ECREATE + EADD/EEXTEND of every page of the flat image into ELRANGE at the SDK's base,
// measuring the bytes as they lie in the enclave (what runs is what was measured).
static gt_err load_image(gt_span image, gt_sgx_measurement *m)
{
    GT_ENSURE(image.len > 0 && image.len % GT_SGX_PAGE_BYTES == 0, GT_E_FORMAT,
              "enclave image: %zu bytes is not a whole number of pages", image.len);
    uint64_t size = 2 * GT_SGX_PAGE_BYTES;
    while (size < image.len) {
        size <<= 1;
    }
    void *base = mmap((void *)(uintptr_t)GTSDK_BASE, size, PROT_READ | PROT_WRITE | PROT_EXEC,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
    GT_ENSURE(base == (void *)(uintptr_t)GTSDK_BASE, GT_E_IO,
              "enclave process: ELRANGE at 0x%llx is not free", (unsigned long long)GTSDK_BASE);
    g_encl.base = base;
    g_encl.size = size;
    g_encl.image_len = image.len;
    gt_sgx_measurer *mz = NULL;
    GT_TRY(gt_sgx_measurer_new(&mz, m, 1, size));
    gt_err err = GT_OK;
    for (uint64_t off = 0; off < image.len; off += GT_SGX_PAGE_BYTES) {
        memcpy(g_encl.base + off, image.data + off, GT_SGX_PAGE_BYTES);
        uint64_t flags = off == 0 ? GT_SGX_SECINFO_TCS
                                  : GT_SGX_SECINFO_REG | GT_SGX_SECINFO_R | GT_SGX_SECINFO_W |
                                        GT_SGX_SECINFO_X;
        GT_TRY_GOTO(err, gt_sgx_measurer_page(mz, off, flags, g_encl.base + off, true), fail);
    }
    // Nothing was EADDed past the image: no access there.
    if (size > image.len) {
        GT_ENSURE_GOTO(err, mprotect(g_encl.base + image.len, size - image.len, PROT_NONE) == 0,
                       fail, GT_E_IO, "enclave process: mprotect failed");
    }
    return gt_sgx_measurer_finish(mz);
fail:
    gt_sgx_measurer_free(mz);
    return err;
}

// The TCS (page 0) names the entry point; software has no access to a TCS afterwards.
static gt_err read_tcs(void)
{
    gt_reader r = gt_reader_init(g_encl.base, GT_SGX_PAGE_BYTES);
    uint64_t state = 0, flags = 0, ossa = 0, oentry = 0;
    uint32_t cssa = 0, nssa = 0;
    GT_TRY(gt_reader_u64le(&r, &state));
    GT_TRY(gt_reader_u64le(&r, &flags));
    GT_TRY(gt_reader_u64le(&r, &ossa));
    GT_TRY(gt_reader_u32le(&r, &cssa));
    GT_TRY(gt_reader_u32le(&r, &nssa));
    GT_TRY(gt_reader_u64le(&r, &oentry));
    GT_ENSURE(oentry >= GT_SGX_PAGE_BYTES && oentry < g_encl.image_len, GT_E_FORMAT,
              "enclave TCS: OENTRY 0x%llx is outside the enclave's code",
              (unsigned long long)oentry);
    GT_ENSURE(nssa >= 1 && ossa % GT_SGX_PAGE_BYTES == 0 && ossa < g_encl.image_len &&
                  cssa == 0,
              GT_E_FORMAT, "enclave TCS: OSSA/NSSA/CSSA invalid");
    g_encl.entry = (uint64_t)(uintptr_t)g_encl.base + oentry;
    GT_ENSURE(mprotect(g_encl.base, GT_SGX_PAGE_BYTES, PROT_NONE) == 0, GT_E_IO,
              "enclave process: mprotect failed");
    return GT_OK;
}

static gt_err einit(const gt_enclave_start_msg *st, const gt_sgx_measurement *m,
                    gt_sgx_identity *id)
{
    gt_sgx_sigstruct s;
    GT_TRY(gt_sgx_sigstruct_parse(st->sigstruct, sizeof st->sigstruct, &s));
    // The enclave is created (ECREATE) with the attributes and MISCSELECT its SIGSTRUCT asks for.
    gt_sgx_einit_params p = {.mrenclave = m->mrenclave,
                             .secs_attributes = s.attributes,
                             .secs_miscselect = s.miscselect,
                             .secs_cet_attributes = s.cet_attributes,
                             .allow_debug = st->allow_debug,
                             .min_isvsvn = st->min_isvsvn};
    GT_TRY(gt_enclave_einit_check(&s, &p, id));
    gt_sgx_secs_identity *secs = &g_encl.secs;
    memset(secs, 0, sizeof *secs);
    memcpy(secs->mrenclave, id->mrenclave, 32);
    memcpy(secs->mrsigner, id->mrsigner, 32);
    secs->isvprodid = id->isvprodid;
    secs->isvsvn = id->isvsvn;
    secs->attributes = id->attributes;
    secs->miscselect = id->miscselect;
    memcpy(secs->isvfamilyid, s.isvfamilyid, 16);
    memcpy(secs->isvextprodid, s.isvextprodid, 16);
    return GT_OK;
}

static gt_err send_refusal(int fd, gt_err why)
{
    gt_enclave_hello_msg h;
    memset(&h, 0, sizeof h);
    // Cut to fit: the host shows it to an operator.
    int n = snprintf(h.refusal, sizeof h.refusal, "%s: %.*s", gt_code_name(why.code),
                     (int)(sizeof h.refusal - 24), why.msg);
    (void)n;
    uint8_t buf[256];
    gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
    GT_TRY(gt_enclave_hello_encode(&w, &h));
    return gt_enclave_frame_send(fd, buf, w.len);
}

// The hello: identity, an X25519 key and a REPORT for the host binding both keys; then the
// channel keys from the same transcript.
static gt_err send_hello(int fd, const gt_enclave_start_msg *st, const gt_sgx_identity *id,
                         gt_enclave_channel *ch)
{
    gt_enclave_hello_msg h;
    memset(&h, 0, sizeof h);
    h.ok = true;
    h.identity = *id;
    uint8_t sec[GT_X25519_BYTES], shared[GT_X25519_BYTES], data[GT_SGX_REPORTDATA_BYTES];
    uint8_t buf[1024];
    gt_sgx_secs_identity host;
    gt_sgx_targetinfo ti;
    gt_sgx_report report;
    gt_err err;
    GT_TRY_GOTO(err, gt_x25519_keypair(h.enclave_pub, sec), out);
    GT_TRY_GOTO(err, gt_enclave_session_reportdata(data, st->host_nonce, st->host_pub,
                                                   h.enclave_pub), out);
    GT_TRY_GOTO(err, gt_enclave_host_target(&host), out);
    gt_sgx_targetinfo_of(&ti, &host);
    GT_TRY_GOTO(err, gt_sgx_ereport(&report, &g_encl.platform, &g_encl.secs, &ti, data,
                                    g_encl.report_keyid), out);
    gt_sgx_report_write(&report, h.report);
    GT_TRY_GOTO(err, gt_x25519_shared(shared, st->host_pub, sec), out);
    GT_TRY_GOTO(err, gt_enclave_channel_init(ch, fd, false, shared, st->host_nonce, st->host_pub,
                                             h.enclave_pub, h.report), out);
    gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
    GT_TRY_GOTO(err, gt_enclave_hello_encode(&w, &h), out);
    GT_TRY_GOTO(err, gt_enclave_frame_send(fd, buf, w.len), out);
out:
    gt_secure_zero(sec, sizeof sec);
    gt_secure_zero(shared, sizeof shared);
    return err;
}

typedef struct {
    gt_enclave_channel ch;
    gt_buf frame, plain;
    uint8_t *in, *out, *ocall_buf;   // untrusted staging, outside ELRANGE
    uint8_t *ring;                   // the host's shared-memory ring, once attached
} server;

// An idle enclave process, asleep on the ring, checks this often that the host is still there.
#define RING_LIVE_CHECK_MS 100

// The host's RING message: its memfd follows on the socket. Mapped only once, before any ECALL,
// and only if it is a memfd of the ring's size sealed against resizing; the answer goes back
// through the ring, which from now on carries every message.
static gt_err attach_ring(server *s, const gt_enclave_msg *m)
{
    GT_ENSURE(s->ring == NULL && m->code == GT_ENCLAVE_RING_BYTES && m->payload.len == 0,
              GT_E_STATE, "enclave process: an unexpected RING message");
    int fd = -1;
    GT_TRY(gt_enclave_fd_recv(s->ch.fd, &fd));
    gt_err err = gt_enclave_ring_map(fd, &s->ring);
    close(fd);
    GT_TRY(err);
    gt_enclave_channel_use_ring(&s->ch, s->ring, false, RING_LIVE_CHECK_MS);
    gt_enclave_msg ack = {.type = GT_ENCLAVE_MSG_RING, .code = 0};
    return gt_enclave_channel_send(&s->ch, &ack);
}

// One OCALL: the request goes to the host, its ORET comes back into the OCALL buffer.
static gt_err serve_ocall(server *s, eenter_regs *io)
{
    uint64_t len = io->rdx <= GTSDK_IO_BYTES ? io->rdx : 0;
    gt_enclave_msg m = {.type = GT_ENCLAVE_MSG_OCALL, .code = io->rsi,
                        .payload = {s->ocall_buf, len}};
    GT_TRY(gt_enclave_channel_send(&s->ch, &m));
    GT_TRY(gt_enclave_channel_recv(&s->ch, &s->frame, &s->plain, &m));
    GT_ENSURE(m.type == GT_ENCLAVE_MSG_ORET, GT_E_STATE,
              "enclave process: message %u while an OCALL is outstanding", m.type);
    memcpy(s->ocall_buf, m.payload.data, m.payload.len);  // <= GTSDK_IO_BYTES: parse checked
    *io = (eenter_regs){.rdi = (uint64_t)GTSDK_ORET, .rsi = m.code, .rdx = m.payload.len};
    return GT_OK;
}

static gt_err serve_ecall(server *s, const gt_enclave_msg *req)
{
    gtsdk_ms ms = {.in = (uintptr_t)s->in, .in_len = req->payload.len,
                   .out = (uintptr_t)s->out, .out_cap = GTSDK_IO_BYTES,
                   .ocall_buf = (uintptr_t)s->ocall_buf, .ocall_cap = GTSDK_IO_BYTES};
    memcpy(s->in, req->payload.data, req->payload.len);
    eenter_regs io = {.rdi = req->code, .rsi = (uintptr_t)&ms};
    for (;;) {
        gt_encl_eenter((uint64_t)(uintptr_t)g_encl.base, g_encl.entry, &io);
        if (io.rdi == GTSDK_EXIT_RETURN) {
            break;
        }
        GT_ENSURE(io.rdi == GTSDK_EXIT_OCALL, GT_E_STATE,
                  "enclave process: the enclave left with reason %llu",
                  (unsigned long long)io.rdi);
        GT_TRY(serve_ocall(s, &io));
    }
    uint64_t out_len = ms.out_len <= GTSDK_IO_BYTES ? ms.out_len : 0;
    gt_enclave_msg m = {.type = GT_ENCLAVE_MSG_ERET, .code = io.rsi,
                        .payload = {s->out, out_len}};
    GT_TRY(gt_enclave_channel_send(&s->ch, &m));
    // What the staging held (the SDK writes out_len bytes of out): wiping all 64 KiB each ECALL
    // would cost more than the rest of a round trip.
    gt_secure_zero(s->in, req->payload.len);
    gt_secure_zero(s->out, ms.out_len <= GTSDK_IO_BYTES ? ms.out_len : GTSDK_IO_BYTES);
    return GT_OK;
}

static gt_err serve(server *s)
{
    for (;;) {
        gt_enclave_msg m;
        gt_err err = gt_enclave_channel_recv(&s->ch, &s->frame, &s->plain, &m);
        if (err.code == GT_E_PEER) {
            return GT_OK;  // the host went away: nothing left to serve
        }
        GT_TRY(err);
        if (m.type == GT_ENCLAVE_MSG_CLOSE) {
            return GT_OK;
        }
        if (m.type == GT_ENCLAVE_MSG_RING) {
            GT_TRY(attach_ring(s, &m));
            continue;
        }
        GT_ENSURE(m.type == GT_ENCLAVE_MSG_ECALL, GT_E_STATE,
                  "enclave process: message %u where an ECALL was expected", m.type);
        GT_TRY(serve_ecall(s, &m));
    }
}

// Not dumpable: no ptrace attach and no /proc/PID/mem by the host's uid without CAP_SYS_PTRACE,
// and no core file that would hold enclave pages. No capabilities either (a root host's
// enclave process keeps none): the enclave needs no privilege, and holding none leaves the
// dumpable flag as what refuses a reader (tests/enclave/test_enclave_run.c).
static gt_err harden(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct none[2];
    memset(none, 0, sizeof none);
    GT_ENSURE(syscall(SYS_capset, &h, none) == 0, GT_E_IO,
              "enclave process: dropping capabilities failed");
    GT_ENSURE(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0, GT_E_IO,
              "enclave process: PR_SET_DUMPABLE failed");
    struct rlimit no_core = {0, 0};
    GT_ENSURE(setrlimit(RLIMIT_CORE, &no_core) == 0, GT_E_IO, "enclave process: RLIMIT_CORE");
    return GT_OK;
}

static gt_err start(int fd, gt_buf *frame, server *s)
{
    gt_enclave_start_msg st;
    gt_sgx_measurement m;
    gt_sgx_identity id;
    GT_TRY(gt_enclave_frame_recv(fd, GT_ENCLAVE_FRAME_MAX, frame));
    GT_TRY(gt_enclave_start_parse(frame->data, frame->len, &st));
    g_encl.platform = st.platform;
    GT_TRY(gt_random_bytes(g_encl.report_keyid, sizeof g_encl.report_keyid));
    gt_err err = load_image(st.image, &m);
    if (gt_is_ok(err)) {
        err = einit(&st, &m, &id);
    }
    if (gt_is_ok(err)) {
        err = read_tcs();
    }
    if (!gt_is_ok(err)) {
        gt_err ignored = send_refusal(fd, err);
        (void)ignored;
        return err;
    }
    GT_TRY(send_hello(fd, &st, &id, &s->ch));
    gt_secure_zero(frame->data, frame->len);  // the platform root was in it
    return GT_OK;
}

int gt_enclave_process_main(int fd)
{
    server s;
    memset(&s, 0, sizeof s);
    gt_buf start_frame = {0};
    const char *eexit = getenv("GPUTRAVEL_ENCLAVE_EEXIT");
    g_encl.trap_every_eexit = eexit != NULL && strcmp(eexit, "trap") == 0;
    gt_err err = harden();
    if (gt_is_ok(err)) {
        err = install_handler();
    }
    if (gt_is_ok(err)) {
        err = start(fd, &start_frame, &s);
    }
    gt_buf_free(&start_frame);
    if (gt_is_ok(err)) {
        s.in = calloc(1, GTSDK_IO_BYTES);
        s.out = calloc(1, GTSDK_IO_BYTES);
        s.ocall_buf = calloc(1, GTSDK_IO_BYTES);
        err = s.in && s.out && s.ocall_buf ? serve(&s)
                                           : gt_errf(GT_E_NOMEM, "enclave process: no memory");
    }
    gt_enclave_channel_wipe(&s.ch);
    gt_enclave_ring_unmap(s.ring);
    gt_buf_free(&s.frame);
    gt_buf_free(&s.plain);
    free(s.in);
    free(s.out);
    free(s.ocall_buf);
    gt_secure_zero(&g_encl.platform, sizeof g_encl.platform);
    if (!gt_is_ok(err)) {
        fprintf(stderr, "gputravel-enclave-process (insecure-simulation): %s: %s\n",
                gt_code_name(err.code), err.msg);
        return 1;
    }
    return 0;
}
