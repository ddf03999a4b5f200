// Fault injection for tests (SQLite's do_malloc_test / do_write_test, STYLE.md §5): fails the
// N-th allocation or the N-th write-side file call made by gputravel's own code, once.
//
// Works by link-time wrapping: a test named test_*_faults is linked with
// -Wl,--wrap=malloc,... (tests/CMakeLists.txt), so only calls from objects in that executable
// (libgputravel, testlib, the test) are counted, never OpenSSL's or libc's own. Unarmed, every
// wrapper calls straight through.
#ifndef GT_TESTLIB_FAULTS_H
#define GT_TESTLIB_FAULTS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    GT_FAULT_ALLOC = 1,  // malloc, calloc, realloc, posix_memalign, aligned_alloc -> NULL/ENOMEM
    GT_FAULT_WRITE = 2,  // write, pwrite, fwrite, fflush, fsync, rename -> -1 (or short)/EIO
} gt_fault_kind;

// From now on, the nth (1-based) call of that kind fails; the count restarts at arming.
void gt_fault_arm(gt_fault_kind kind, uint64_t nth);
// Stops counting. Returns whether the armed failure happened.
bool gt_fault_disarm(void);
// Calls of the armed kind seen since arming.
uint64_t gt_fault_calls(void);

#endif
