#include "testlib.h"

#include <gputravel/kernels.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// A test computes in its own process and compares with what the gputravel processes it starts
// compute. gputravel restarts itself on a better OpenBLAS core where OpenBLAS picked a fallback
// (kernels.h, gt_blas_core_reexec), which would change the children's matmul bits; pinning
// OPENBLAS_CORETYPE to this process's core makes them run the test's own (the rule for any
// parent: children inherit its core). The re-exec itself is tested with the variable removed.
__attribute__((constructor)) static void pin_blas_core_for_children(void)
{
    if (getenv("OPENBLAS_CORETYPE") == NULL) {
        setenv("OPENBLAS_CORETYPE", gt_blas_core_name(), 1);
    }
}

static const char *tmp_base(void)
{
    const char *base = getenv("TMPDIR");
    return base && *base ? base : "/tmp";
}

void gt_test_tmpdir(char *out, size_t cap)
{
    snprintf(out, cap, "%s/gt-test-XXXXXX", tmp_base());
    if (mkdtemp(out) == NULL) {
        fail_msg("mkdtemp %s failed", out);
    }
}

void gt_test_assert_mode(const char *path, unsigned mode)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail_msg("%s: not a regular file", path);
    }
    if ((st.st_mode & 07777) != mode) {
        fail_msg("%s: mode %04o, expected %04o", path, (unsigned)(st.st_mode & 07777), mode);
    }
}

void gt_test_rmtree(const char *path)
{
    GT_ASSERT_OK(gt_rmtree_below(path, tmp_base()));
}

void gt_test_data_path(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", GT_TEST_DATA_DIR, rel);
}

void gt_test_read_data(const char *rel, gt_buf *b)
{
    char path[4096];
    gt_test_data_path(path, sizeof path, rel);
    GT_ASSERT_OK(gt_file_read_all(path, 64u << 20, b));
}

int gt_test_count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            n++;
        }
    }
    closedir(d);
    return n;
}

void gt_test_fail_log(const gt_buf *log, const char *logs_dir, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "---- %s; the whole output (%zu bytes):\n%.*s\n---- end of output\n", msg,
            log->len, (int)log->len, (const char *)log->data);
    DIR *d = logs_dir != NULL ? opendir(logs_dir) : NULL;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        char path[1024];
        gt_buf f = {0};
        if (e->d_name[0] == '.' ||
            !gt_is_ok(gt_path_join(path, sizeof path, logs_dir, e->d_name)) ||
            !gt_is_ok(gt_file_read_all(path, 1 << 20, &f))) {
            continue;
        }
        fprintf(stderr, "---- %s (%zu bytes):\n%.*s\n", path, f.len, (int)f.len,
                (const char *)f.data);
        gt_buf_free(&f);
    }
    if (d != NULL) {
        closedir(d);
    }
    fflush(stderr);
    fail_msg("%s (the output is above)", msg);
    abort();  // fail_msg does not return; this says so to the compiler
}

int gt_test_free_port(void)
{
    int low = 32768;  // the range's first port; Linux's default
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        if (fscanf(f, "%d", &low) != 1) {
            low = 32768;
        }
        fclose(f);
    }
    bool below = low > 11024;  // else no room below the range: take what the kernel picks
    static unsigned seed;
    if (seed == 0) {
        seed = (unsigned)getpid() * 2654435761u;  // tests running side by side pick apart
    }
    for (int tries = 0; tries < 200; tries++) {
        seed = seed * 1103515245u + 12345u;
        int port = below ? 10000 + (int)((seed >> 8) % (unsigned)(low - 10000)) : 0;
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        gt_listener *l = NULL;
        if (gt_is_ok(gt_listener_open(&l, addr))) {
            port = gt_listener_port(l);
            gt_listener_close(l);
            return port;
        }
    }
    fail_msg("no free TCP port below %d", low);
    return -1;
}

int gt_test_run_cli(gt_buf *out, const char *const *args)
{
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        fail_msg("pipe failed");
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        dup2(pipefd[1], STDERR_FILENO);
        close(pipefd[0]);
        close(pipefd[1]);
        const char *argv[64];
        int n = 0;
        argv[n++] = GT_CLI_PATH;
        for (; args[n - 1] != NULL && n < 63; n++) {
            argv[n] = args[n - 1];
        }
        argv[n] = NULL;
        execv(GT_CLI_PATH, (char *const *)argv);
        _exit(127);
    }
    close(pipefd[1]);
    gt_buf b = {0};
    char chunk[4096];
    ssize_t n;
    while ((n = read(pipefd[0], chunk, sizeof chunk)) > 0) {
        GT_ASSERT_OK(gt_buf_append(&b, chunk, (size_t)n));
    }
    GT_ASSERT_OK(gt_buf_append(&b, "", 1));  // NUL-terminate for string checks
    b.len--;
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (out != NULL) {
        *out = b;
    } else {
        gt_buf_free(&b);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int gt_test_proc_wait(gt_proc *p, int timeout_ms)
{
    double until = gt_now_seconds() + timeout_ms / 1000.0;
    while (gt_proc_alive(p) && gt_now_seconds() < until) {
        usleep(20000);
    }
    return gt_proc_stop(p, 1000);
}
