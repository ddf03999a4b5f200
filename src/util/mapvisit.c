// gt_file_map_visit: read a file in place through a mapping, surviving its truncation.
#include <gputravel/util.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// The visit running on this thread, if any: SIGBUS is synchronous, so it arrives on the thread
// whose access faulted. The handler is ours only while some visit runs (others, a test
// framework for one, may own SIGBUS the rest of the time); the previous one is put back after.
static __thread sigjmp_buf *visit_jump;
static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned visits_running;
static struct sigaction previous;

static void on_sigbus(int sig, siginfo_t *info, void *uctx)
{
    if (visit_jump != NULL) {
        siglongjmp(*visit_jump, 1);
    }
    // Another thread's fault while a visit runs here: hand it to whoever had SIGBUS before.
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction != NULL) {
        previous.sa_sigaction(sig, info, uctx);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);  // the access faults again, fatally
    }
}

static void handler_enter(void)
{
    pthread_mutex_lock(&handler_lock);
    if (visits_running++ == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigaction(SIGBUS, &sa, &previous);
    }
    pthread_mutex_unlock(&handler_lock);
}

static void handler_leave(void)
{
    pthread_mutex_lock(&handler_lock);
    if (--visits_running == 0) {
        sigaction(SIGBUS, &previous, NULL);
    }
    pthread_mutex_unlock(&handler_lock);
}

// Kept apart so nothing of the caller's lives across the jump.
static gt_err visit_guarded(const uint8_t *data, size_t len,
                            gt_err (*fn)(void *ctx, const uint8_t *data, size_t len), void *ctx)
{
    sigjmp_buf jump;
    if (sigsetjmp(jump, 1) != 0) {
        visit_jump = NULL;
        return gt_errf(GT_E_IO, "the file shrank while it was being read");
    }
    visit_jump = &jump;
    gt_err e = fn(ctx, data, len);
    visit_jump = NULL;
    return e;
}

gt_err gt_file_map_visit(int fd, uint64_t offset, uint64_t len,
                         gt_err (*fn)(void *ctx, const uint8_t *data, size_t len), void *ctx)
{
    if (len == 0) {
        return fn(ctx, NULL, 0);
    }
    GT_ENSURE(len <= SIZE_MAX / 2, GT_E_LIMIT, "map: %llu bytes", (unsigned long long)len);
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const uint64_t start = offset - offset % page;
    const size_t lead = (size_t)(offset - start), map_len = lead + (size_t)len;
    void *map = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fd, (off_t)start);
    GT_ENSURE(map != MAP_FAILED, GT_E_IO, "map: %s", strerror(errno));
    (void)madvise(map, map_len, MADV_SEQUENTIAL);  // a hint: read-ahead, drop behind
    handler_enter();
    gt_err e = visit_guarded((const uint8_t *)map + lead, (size_t)len, fn, ctx);
    handler_leave();
    munmap(map, map_len);
    return e;
}
