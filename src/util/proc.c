// Child processes and scratch trees (util.h, "Child processes"): one spawn, one readiness wait,
// one stop and one rm -rf for the demo, the benchmarks and the tests.
#include <gputravel/util.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROC_POLL_MS 10
#define PROC_DEFAULT_TIMEOUT_MS 15000
#define PROC_DEFAULT_GRACE_MS 5000
#define SO_ACCEPTCON_FLAG 0x10000u  // /proc/net/unix "Flags" of a listening socket

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static size_t env_name_len(const char *kv)
{
    const char *eq = strchr(kv, '=');
    return eq ? (size_t)(eq - kv) : strlen(kv);
}

// environ with spec->env laid over it, built before fork: the child of a threaded parent may
// call only async-signal-safe functions, so it must not build anything itself.
static gt_err env_build(const char *const *extra, char ***out)
{
    size_t n = 0, k = 0;
    while (environ != NULL && environ[n] != NULL) {
        n++;
    }
    while (extra[k] != NULL) {
        k++;
    }
    char **env = calloc(n + k + 1, sizeof *env);
    GT_ENSURE(env != NULL, GT_E_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < k && !replaced; j++) {
            size_t len = env_name_len(extra[j]);
            replaced = env_name_len(environ[i]) == len && strncmp(environ[i], extra[j], len) == 0;
        }
        if (!replaced) {
            env[m++] = environ[i];
        }
    }
    for (size_t j = 0; j < k; j++) {
        env[m++] = (char *)extra[j];
    }
    env[m] = NULL;
    *out = env;
    return GT_OK;
}

gt_err gt_proc_spawn(gt_proc *p, const gt_proc_spec *spec)
{
    memset(p, 0, sizeof *p);
    GT_ENSURE(spec->argv != NULL && spec->argv[0] != NULL, GT_E_ARG, "spawn: no program");
    char **env = environ;
    if (spec->env != NULL) {
        GT_TRY(env_build(spec->env, &env));
    }
    int fd = -1;
    if (spec->log_path != NULL) {
        int mode = O_WRONLY | O_CREAT | O_CLOEXEC | (spec->log_append ? O_APPEND : O_TRUNC);
        fd = open(spec->log_path, mode, 0600);
        if (fd < 0) {
            gt_err e = gt_errf(GT_E_IO, "%s: %s", spec->log_path, strerror(errno));
            if (env != environ) {
                free(env);
            }
            return e;
        }
    }
    pid_t parent = getpid();
    fflush(NULL);  // nothing buffered here is written twice
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);  // a child ends with whoever started it
        if (getppid() != parent) {         // ...even one that died before prctl ran
            _exit(127);
        }
        if (fd >= 0 && (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)) {
            _exit(127);
        }
        if (fd >= 0 && fd <= STDERR_FILENO) {
            fcntl(fd, F_SETFD, 0);  // dup2 onto itself keeps O_CLOEXEC: the log would close
        }
        for (size_t i = 0; i < spec->inherit_count; i++) {
            int keep = spec->inherit_fds[i];
            if (keep <= STDERR_FILENO || fcntl(keep, F_SETFD, 0) != 0) {
                _exit(127);
            }
        }
        execve(spec->argv[0], spec->argv, env);
        _exit(127);
    }
    int fork_errno = errno;
    if (fd >= 0) {
        close(fd);
    }
    if (env != environ) {
        free(env);
    }
    GT_ENSURE(pid > 0, GT_E_IO, "fork: %s", strerror(fork_errno));
    p->pid = pid;
    return GT_OK;
}

bool gt_proc_alive(gt_proc *p)
{
    if (p->pid <= 0) {
        return false;
    }
    int status = 0;
    pid_t r = waitpid(p->pid, &status, WNOHANG);
    if (r == 0) {
        return true;
    }
    if (r == p->pid) {
        p->status = status;
        p->exited = true;
    }
    p->pid = 0;  // reaped (or not ours to wait for: ECHILD)
    return false;
}

// True when path is a socket and /proc/net/unix, where it lists path, says it listens. A socket
// bound under another name and renamed into place (devd does so once it listens) is listed
// under its first name, and a socket without /proc cannot be looked up: both count as ready on
// the socket inode alone, so callers remove a stale socket before they spawn. Readiness never
// connects: a probe connection would count as a session to the server.
static bool socket_listening(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        return false;
    }
    FILE *f = fopen("/proc/net/unix", "re");
    if (f == NULL) {
        return true;
    }
    char line[PATH_MAX + 128];
    bool listed = false, listening = false;
    size_t plen = strlen(path);
    while (!listening && fgets(line, sizeof line, f) != NULL) {
        size_t n = strcspn(line, "\n");
        line[n] = '\0';
        // "Num: RefCount Protocol Flags Type St Inode Path": the path is the last field.
        if (n < plen + 1 || strcmp(line + n - plen, path) != 0 || line[n - plen - 1] != ' ') {
            continue;
        }
        unsigned refs = 0, proto = 0, flags = 0;
        listed = true;
        listening = sscanf(line, "%*s %x %x %x", &refs, &proto, &flags) == 3 &&
                    (flags & SO_ACCEPTCON_FLAG) != 0;
    }
    fclose(f);
    return listening || !listed;
}

static bool file_has_text(const char *path, const char *text)
{
    gt_buf b = {0};
    bool found = false;
    if (gt_is_ok(gt_file_read_all(path, 16u << 20, &b)) && gt_is_ok(gt_buf_append(&b, "", 1))) {
        found = strstr((const char *)b.data, text) != NULL;
    }
    gt_buf_free_nowipe(&b);  // a log
    return found;
}

static bool ready_now(const gt_proc_ready *r)
{
    switch (r->kind) {
    case GT_PROC_READY_SOCKET: return socket_listening(r->path);
    case GT_PROC_READY_FILE: return gt_path_exists(r->path);
    case GT_PROC_READY_LOG_LINE: return file_has_text(r->path, r->text);
    default: return false;
    }
}

gt_err gt_proc_wait_ready(gt_proc *p, const gt_proc_ready *r)
{
    GT_ENSURE(r->path != NULL && (r->kind != GT_PROC_READY_LOG_LINE || r->text != NULL),
              GT_E_ARG, "wait: nothing to wait for");
    GT_ENSURE(r->kind >= GT_PROC_READY_SOCKET && r->kind <= GT_PROC_READY_LOG_LINE, GT_E_ARG,
              "wait: unknown readiness kind %d", (int)r->kind);
    const char *what = r->what ? r->what : "the child process";
    int timeout = r->timeout_ms > 0 ? r->timeout_ms : PROC_DEFAULT_TIMEOUT_MS;
    double deadline = gt_now_seconds() + timeout / 1000.0;
    for (;;) {
        if (ready_now(r)) {
            return GT_OK;
        }
        if (!gt_proc_alive(p)) {
            int s = p->status;
            return gt_errf(GT_E_PEER, "%s exited before it was ready (%s %d)", what,
                           p->exited && WIFSIGNALED(s) ? "signal" : "status",
                           p->exited ? (WIFSIGNALED(s) ? WTERMSIG(s) : WEXITSTATUS(s)) : -1);
        }
        if (gt_now_seconds() >= deadline) {
            return gt_errf(GT_E_TIMEOUT, "%s was not ready within %.1f s", what,
                           timeout / 1000.0);
        }
        sleep_ms(PROC_POLL_MS);
    }
}

int gt_proc_stop(gt_proc *p, int grace_ms)
{
    if (p->pid <= 0) {
        return p->exited ? p->status : 0;
    }
    kill(p->pid, SIGTERM);
    int grace = grace_ms > 0 ? grace_ms : PROC_DEFAULT_GRACE_MS;
    double deadline = gt_now_seconds() + grace / 1000.0;
    while (gt_proc_alive(p)) {
        if (gt_now_seconds() >= deadline) {
            kill(p->pid, SIGKILL);
            int status = 0;
            while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {
            }
            p->status = status;
            p->exited = true;
            p->pid = 0;
            break;
        }
        sleep_ms(PROC_POLL_MS);
    }
    return p->exited ? p->status : 0;
}

gt_err gt_proc_reexec(char **argv, const gt_env_var *vars, size_t n)
{
    if (n == 0) {
        return GT_OK;
    }
    size_t set = 0;
    while (set < n && setenv(vars[set].name, vars[set].value, 1) == 0) {
        set++;
    }
    gt_err err = set < n ? gt_errf(GT_E_NOMEM, "cannot set %s=%s", vars[set].name, vars[set].value)
                         : GT_OK;
    if (gt_is_ok(err)) {
        execv("/proc/self/exe", argv);
        err = gt_errf(GT_E_IO, "cannot re-execute /proc/self/exe: %s", strerror(errno));
    }
    for (size_t i = 0; i < set; i++) {
        unsetenv(vars[i].name);
    }
    return err;
}
