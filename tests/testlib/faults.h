// Fault injection for tests (SQLite's do_malloc_test / do_write_test, STYLE.md §5): fails the
// N-th allocation or the N-th write-side file call made by gputravel's own code, once.
//
// Works by link-time wrapping: a test named test_*_faults is linked with
// -Wl,--wrap=malloc,... (tests/CMakeLists.txt), so only calls from objects in that executable
// (libgputravel, testlib, the test) are counted, never OpenSSL's or libc's own. Unarmed, every
// wrapper calls straight through.
#ifndef GT_TESTLIB_FAULTS_H
#define GT_TESTLIB_FAULTS_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    GT_FAULT_ALLOC = 1,  // malloc, calloc, realloc, posix_memalign, aligned_alloc -> NULL/ENOMEM
    GT_FAULT_WRITE = 2,  // write, pwrite, fwrite, fflush, fsync, rename -> -1 (or short)/EIO
} gt_fault_kind;

// From now on, the nth (1-based) call of that kind fails; the count restarts at arming.
void gt_fault_arm(gt_fault_kind kind, uint64_t nth);
// Instead of failing it, the process dies at the nth write-side call, as at a power cut or a
// SIGKILL: a write or pwrite first writes half of its bytes (a torn write), the others do
// nothing; then _exit(GT_FAULT_CRASH_STATUS). For a forked child whose parent checks what the
// crash left on disk.
#define GT_FAULT_CRASH_STATUS 99
void gt_fault_arm_crash(uint64_t nth);
// Stops counting. Returns whether the armed failure happened.
bool gt_fault_disarm(void);
// Calls of the armed kind seen since arming.
uint64_t gt_fault_calls(void);

// The sweep: runs op(ctx) with the n-th call of `kind` failing, for n = 1, 2, ... until a run no
// longer reaches the fault. Each failed run must return `want` with a message (the test fails
// otherwise, naming n), then after_failure(ctx, n) checks the state it left (may be NULL). The
// final run must succeed. Returns the number of runs that failed.
uint64_t gt_fault_sweep(gt_fault_kind kind, gt_code want, gt_err (*op)(void *ctx),
                        void (*after_failure)(void *ctx, uint64_t n), void *ctx);

// Entries in dir other than . and .. (files and folders): "nothing was left behind".
int gt_test_count_entries(const char *dir);

#endif
