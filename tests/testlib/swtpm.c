// The swtpm fixture (swtpm.h) on util's gt_proc.
#include "testlib.h"
#include "swtpm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool gt_test_swtpm_find(gt_test_swtpm *t, char *why, size_t cap)
{
    memset(t, 0, sizeof *t);
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path && *path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        snprintf(t->exe, sizeof t->exe, "%s/swtpm", d);
        if (access(t->exe, X_OK) == 0) {
            return true;
        }
    }
    t->exe[0] = '\0';
    snprintf(why, cap, "swtpm is not installed (Debian packages swtpm swtpm-tools; "
                       "scripts/deps.sh installs them): the TPM rollback-guard cases cannot run");
    return false;
}

static bool port_free(int port)
{
    gt_listener *l = NULL;
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    if (!gt_is_ok(gt_listener_open(&l, addr))) {
        return false;
    }
    gt_listener_close(l);
    return true;
}

// P and P+1 both free: P from the kernel's pick, P+1 checked.
static int free_port_pair(void)
{
    for (int tries = 0; tries < 50; tries++) {
        gt_listener *l = NULL;
        GT_ASSERT_OK(gt_listener_open(&l, "127.0.0.1:0"));
        int p = gt_listener_port(l);
        gt_listener_close(l);
        if (p < 65535 && port_free(p + 1)) {
            return p;
        }
    }
    fail_msg("no two adjacent free TCP ports for swtpm");
    return -1;
}

static bool accepts(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

void gt_test_swtpm_start(gt_test_swtpm *t, const char *state_dir)
{
    assert_true(t->exe[0] != '\0');
    GT_ASSERT_OK(gt_mkdir_p(state_dir, 0700));
    snprintf(t->state_dir, sizeof t->state_dir, "%s", state_dir);
    snprintf(t->log, sizeof t->log, "%s.log", state_dir);
    t->port = free_port_pair();
    snprintf(t->spec, sizeof t->spec, "tpm:swtpm:host=127.0.0.1,port=%d", t->port);
    char state[600], server[64], ctrl[64];
    snprintf(state, sizeof state, "dir=%s", state_dir);
    snprintf(server, sizeof server, "type=tcp,port=%d", t->port);
    snprintf(ctrl, sizeof ctrl, "type=tcp,port=%d", t->port + 1);
    // not-need-init,startup-clear: the TPM comes up started, as a platform's firmware leaves it.
    char *argv[] = {t->exe, "socket", "--tpm2", "--tpmstate", state, "--server", server,
                    "--ctrl", ctrl, "--flags", "not-need-init,startup-clear", NULL};
    gt_proc_spec spec = {.argv = argv, .log_path = t->log, .log_append = true};
    GT_ASSERT_OK(gt_proc_spawn(&t->proc, &spec));
    // Ready once both ports take a connection (swtpm treats a connect-and-close as a client gone).
    for (int i = 0; i < 200; i++) {
        if (accepts(t->port + 1) && accepts(t->port)) {
            return;
        }
        if (!gt_proc_alive(&t->proc)) {
            fail_msg("swtpm exited at start (log %s)", t->log);
        }
        usleep(20000);
    }
    gt_proc_stop(&t->proc, 1000);
    fail_msg("swtpm did not listen on ports %d and %d within 4 s (log %s)", t->port, t->port + 1,
             t->log);
}

void gt_test_swtpm_stop(gt_test_swtpm *t)
{
    if (t->proc.pid > 0) {
        gt_proc_stop(&t->proc, 5000);
    }
    t->proc = (gt_proc){0};
}
