// See faults.h. The __real_* symbols exist only in executables linked with --wrap; this object
// is pulled from the test library only by tests that call gt_fault_arm.
#include "faults.h"

#include "testlib.h"

#include <dirent.h>
#include <string.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

static gt_fault_kind armed_kind;
static uint64_t fail_at, seen;
static bool fired;
static bool crash;  // gt_fault_arm_crash: die at the call instead of failing it

void gt_fault_arm(gt_fault_kind kind, uint64_t nth)
{
    armed_kind = kind;
    fail_at = nth;
    seen = 0;
    fired = false;
    crash = false;
}

void gt_fault_arm_crash(uint64_t nth)
{
    gt_fault_arm(GT_FAULT_WRITE, nth);
    crash = true;
}

bool gt_fault_disarm(void)
{
    armed_kind = 0;
    return fired;
}

uint64_t gt_fault_calls(void)
{
    return seen;
}

uint64_t gt_fault_sweep(gt_fault_kind kind, gt_code want, gt_err (*op)(void *ctx),
                        void (*after_failure)(void *ctx, uint64_t n), void *ctx)
{
    for (uint64_t n = 1;; n++) {
        gt_fault_arm(kind, n);
        gt_err e = op(ctx);
        if (!gt_fault_disarm()) {
            if (e.code != GT_E_NONE) {
                fail_msg("with no fault left to inject (%llu calls): %s (%s)",
                         (unsigned long long)(n - 1), gt_code_name(e.code), e.msg);
            }
            return n - 1;
        }
        if (e.code != want || e.msg[0] == '\0') {
            fail_msg("with %s call %llu failing: expected %s, got %s (%s)",
                     kind == GT_FAULT_ALLOC ? "allocation" : "write-side", (unsigned long long)n,
                     gt_code_name(want), gt_code_name(e.code), e.msg);
        }
        if (after_failure != NULL) {
            after_failure(ctx, n);
        }
    }
}

int gt_test_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

// True when this call of `kind` is the one to fail.
static bool fault_now(gt_fault_kind kind, int err)
{
    if (armed_kind != kind) {
        return false;
    }
    if (++seen != fail_at) {
        return false;
    }
    fired = true;
    errno = err;
    return true;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t count, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
ssize_t __real_write(int fd, const void *b, size_t n);
ssize_t __real_pwrite(int fd, const void *b, size_t n, off_t at);
size_t __real_fwrite(const void *b, size_t size, size_t count, FILE *f);
int __real_fflush(FILE *f);
int __real_fsync(int fd);
int __real_rename(const char *from, const char *to);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t count, size_t n);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
ssize_t __wrap_write(int fd, const void *b, size_t n);
ssize_t __wrap_pwrite(int fd, const void *b, size_t n, off_t at);
size_t __wrap_fwrite(const void *b, size_t size, size_t count, FILE *f);
int __wrap_fflush(FILE *f);
int __wrap_fsync(int fd);
int __wrap_rename(const char *from, const char *to);

void *__wrap_malloc(size_t n)
{
    return fault_now(GT_FAULT_ALLOC, ENOMEM) ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t count, size_t n)
{
    return fault_now(GT_FAULT_ALLOC, ENOMEM) ? NULL : __real_calloc(count, n);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fault_now(GT_FAULT_ALLOC, ENOMEM) ? NULL : __real_realloc(p, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    return fault_now(GT_FAULT_ALLOC, ENOMEM) ? ENOMEM : __real_posix_memalign(p, align, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return fault_now(GT_FAULT_ALLOC, ENOMEM) ? NULL : __real_aligned_alloc(align, n);
}

// The armed write-side call in crash mode: the process ends here (after a torn write).
static void crash_here(int fd, const void *b, size_t n, off_t at, bool positioned)
{
    if (!crash) {
        return;
    }
    if (b != NULL && n > 1) {
        ssize_t ignored = positioned ? __real_pwrite(fd, b, n / 2, at)
                                     : __real_write(fd, b, n / 2);
        (void)ignored;
    }
    _exit(GT_FAULT_CRASH_STATUS);
}

ssize_t __wrap_write(int fd, const void *b, size_t n)
{
    if (fault_now(GT_FAULT_WRITE, EIO)) {
        crash_here(fd, b, n, 0, false);
        return -1;
    }
    return __real_write(fd, b, n);
}

ssize_t __wrap_pwrite(int fd, const void *b, size_t n, off_t at)
{
    if (fault_now(GT_FAULT_WRITE, EIO)) {
        crash_here(fd, b, n, at, true);
        return -1;
    }
    return __real_pwrite(fd, b, n, at);
}

size_t __wrap_fwrite(const void *b, size_t size, size_t count, FILE *f)
{
    // A failed fwrite writes nothing here; a real one may write part, which callers must treat
    // the same way (any short count is a failure).
    if (fault_now(GT_FAULT_WRITE, EIO)) {
        crash_here(-1, NULL, 0, 0, false);
        return 0;
    }
    return __real_fwrite(b, size, count, f);
}

int __wrap_fflush(FILE *f)
{
    if (fault_now(GT_FAULT_WRITE, EIO)) {
        crash_here(-1, NULL, 0, 0, false);
        return EOF;
    }
    return __real_fflush(f);
}

int __wrap_fsync(int fd)
{
    if (fault_now(GT_FAULT_WRITE, EIO)) {
        crash_here(-1, NULL, 0, 0, false);
        return -1;
    }
    return __real_fsync(fd);
}

int __wrap_rename(const char *from, const char *to)
{
    if (fault_now(GT_FAULT_WRITE, EIO)) {
        crash_here(-1, NULL, 0, 0, false);
        return -1;
    }
    return __real_rename(from, to);
}
