// The enclave's entry stub and its ENCLU[EEXIT] exits, following SGX's conventions: EENTER
// arrives at OENTRY with RAX = CSSA, RBX = the TCS, RCX = the address to EEXIT back to, and
// the caller's RDI/RSI/RDX/R8 untouched; EEXIT jumps to RBX. Nothing here trusts the untrusted
// stack: the stub switches to the enclave's own before calling C.
#include "sdk_abi.h"

#define ENCLU_EEXIT 4

    .section .gtsdk.tcs, "aw"
    .balign 4096
gtsdk_tcs:
    .quad 0                                 // STATE
    .quad 0                                 // FLAGS (no DBGOPTIN)
    .quad gtsdk_ssa - GTSDK_BASE            // OSSA
    .long 0                                 // CSSA
    .long 1                                 // NSSA
    .quad gtsdk_entry - GTSDK_BASE          // OENTRY
    .quad 0                                 // AEP (set by EENTER)
    .quad 0                                 // OFSBASE
    .quad 0                                 // OGSBASE
    .long 0xfff                             // FSLIMIT
    .long 0xfff                             // GSLIMIT
    .fill 4096 - 72, 1, 0

    .section .gtsdk.ssa, "aw"
    .balign 4096
gtsdk_ssa:
    .fill 4096, 1, 0

    .section .gtsdk.stack, "aw"
    .balign 4096
gtsdk_stack:
    .fill GTSDK_STACK_BYTES, 1, 0
gtsdk_stack_top:

    .section .bss
    .balign 8
gtsdk_host_return:  .quad 0             // where EEXIT goes: RCX of the latest entry
gtsdk_ocall_rsp:    .quad 0             // the enclave stack inside an outstanding OCALL
gtsdk_in_ocall:     .quad 0
    .globl gtsdk_oret_len
gtsdk_oret_len:     .quad 0             // RDX of the ORET: the reply's length

    .section .text.gtsdk.entry, "ax"
    .globl gtsdk_entry
gtsdk_entry:
    mov     %rcx, gtsdk_host_return(%rip)
    cmp     $GTSDK_ORET, %rdi
    je      .Loret
    lea     gtsdk_stack_top(%rip), %rsp
    xor     %ebp, %ebp
    cld
    // gtsdk_dispatch(number, ms): RDI, RSI as they came in
    call    gtsdk_dispatch
    mov     %rax, %rsi
    mov     $GTSDK_EXIT_RETURN, %edi
    xor     %edx, %edx
    jmp     gtsdk_eexit

.Loret:
    cmpq    $0, gtsdk_in_ocall(%rip)
    je      .Lbad_oret
    movq    $0, gtsdk_in_ocall(%rip)
    mov     %rdx, gtsdk_oret_len(%rip)
    mov     gtsdk_ocall_rsp(%rip), %rsp
    mov     %rsi, %rax                      // the OCALL's status, gtsdk_ocall_raw's result
    pop     %r15
    pop     %r14
    pop     %r13
    pop     %r12
    pop     %rbx
    pop     %rbp
    ret
.Lbad_oret:
    lea     gtsdk_stack_top(%rip), %rsp
    mov     $GTSDK_EXIT_RETURN, %edi
    mov     $GTSDK_E_STATE, %rsi
    xor     %edx, %edx
    jmp     gtsdk_eexit

// EEXIT with RDI, RSI, RDX as the caller set them; the other registers are cleared so that no
// enclave value leaves in them.
gtsdk_eexit:
    mov     gtsdk_host_return(%rip), %rbx
    xor     %ecx, %ecx
    xor     %r8d, %r8d
    xor     %r9d, %r9d
    xor     %r10d, %r10d
    xor     %r11d, %r11d
    xor     %r12d, %r12d
    xor     %r13d, %r13d
    xor     %r14d, %r14d
    xor     %r15d, %r15d
    xor     %ebp, %ebp
    mov     $ENCLU_EEXIT, %eax
    enclu
    ud2

// long gtsdk_ocall_raw(unsigned long number, unsigned long request_len): leaves with EEXIT
// (OCALL) and returns when the host re-enters with ORET, on this same stack.
    .text
    .globl gtsdk_ocall_raw
gtsdk_ocall_raw:
    push    %rbp
    push    %rbx
    push    %r12
    push    %r13
    push    %r14
    push    %r15
    mov     %rsp, gtsdk_ocall_rsp(%rip)
    movq    $1, gtsdk_in_ocall(%rip)
    mov     %rsi, %rdx
    mov     %rdi, %rsi
    mov     $GTSDK_EXIT_OCALL, %edi
    jmp     gtsdk_eexit

    .section .note.GNU-stack, "", @progbits
