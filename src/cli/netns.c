// Two network namespaces joined by a veth pair, optionally shaped with tc, for measuring what
// crosses a network on one machine. Needs root and iproute2; everything is torn down on destroy.
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

// Runs argv (an iproute2 command) quietly; GT_E_IO with the command line on failure.
static gt_err run(const char *const *argv)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    char line[256] = "";
    for (int i = 0; argv[i] != NULL; i++) {
        size_t n = strlen(line);
        snprintf(line + n, sizeof line - n, "%s%s", i ? " " : "", argv[i]);
    }
    GT_ENSURE(rc == 0, GT_E_IO, "netns: cannot run '%s': %s", line, strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    GT_ENSURE(WIFEXITED(status) && WEXITSTATUS(status) == 0, GT_E_IO,
              "netns: '%s' failed (are you root, with iproute2 installed?)", line);
    return GT_OK;
}

gt_err gt_netns_pair_create(gt_netns_pair *p, const char *tag, uint64_t rate_bits_per_s)
{
    memset(p, 0, sizeof *p);
    GT_ENSURE(strlen(tag) <= 8, GT_E_ARG, "netns: tag '%s' longer than 8 characters", tag);
    snprintf(p->ns[0], sizeof p->ns[0], "gt-%s-a", tag);
    snprintf(p->ns[1], sizeof p->ns[1], "gt-%s-b", tag);
    snprintf(p->addr[0], sizeof p->addr[0], GT_NETNS_ADDR_A);
    snprintf(p->addr[1], sizeof p->addr[1], GT_NETNS_ADDR_B);
    p->rate_bits_per_s = rate_bits_per_s;
    char veth[2][16];
    snprintf(veth[0], sizeof veth[0], "gt%sa", tag);
    snprintf(veth[1], sizeof veth[1], "gt%sb", tag);
    gt_err err = GT_OK;
    for (int i = 0; i < 2; i++) {
        GT_TRY_GOTO(err, run((const char *[]){"ip", "netns", "add", p->ns[i], NULL}), fail);
        p->created[i] = true;
    }
    GT_TRY_GOTO(err, run((const char *[]){"ip", "link", "add", veth[0], "netns", p->ns[0], "type",
                                          "veth", "peer", "name", veth[1], "netns", p->ns[1],
                                          NULL}),
                fail);
    for (int i = 0; i < 2; i++) {
        char cidr[48];
        snprintf(cidr, sizeof cidr, "%s/30", p->addr[i]);
        GT_TRY_GOTO(err, run((const char *[]){"ip", "-n", p->ns[i], "addr", "add", cidr, "dev",
                                              veth[i], NULL}),
                    fail);
        GT_TRY_GOTO(err, run((const char *[]){"ip", "-n", p->ns[i], "link", "set", veth[i], "up",
                                              NULL}),
                    fail);
        GT_TRY_GOTO(err, run((const char *[]){"ip", "-n", p->ns[i], "link", "set", "lo", "up",
                                              NULL}),
                    fail);
        if (rate_bits_per_s > 0) {
            // A token bucket on each egress: the link carries rate bits/s in each direction.
            char rate[32], burst[32];
            snprintf(rate, sizeof rate, "%llubit", (unsigned long long)rate_bits_per_s);
            uint64_t burst_bytes = rate_bits_per_s / 8 / 250;  // 4 ms of traffic
            snprintf(burst, sizeof burst, "%llu",
                     (unsigned long long)(burst_bytes < 65536 ? 65536 : burst_bytes));
            GT_TRY_GOTO(err, run((const char *[]){"ip", "netns", "exec", p->ns[i], "tc", "qdisc",
                                                  "add", "dev", veth[i], "root", "tbf", "rate",
                                                  rate, "burst", burst, "latency", "50ms", NULL}),
                        fail);
        }
    }
    return GT_OK;
fail:
    gt_netns_pair_destroy(p);
    return err;
}

void gt_netns_pair_destroy(gt_netns_pair *p)
{
    // Deleting a namespace deletes the veth end inside it, and with it the pair.
    for (int i = 0; i < 2; i++) {
        if (p->created[i]) {
            gt_err ignored = run((const char *[]){"ip", "netns", "del", p->ns[i], NULL});
            (void)ignored;
            p->created[i] = false;
        }
    }
}

gt_err gt_netns_enter(const char *ns)
{
    char path[128];
    snprintf(path, sizeof path, "/run/netns/%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    GT_ENSURE(fd >= 0, GT_E_IO, "netns %s: %s", ns, strerror(errno));
    int rc = setns(fd, CLONE_NEWNET);
    int saved = errno;
    close(fd);
    GT_ENSURE(rc == 0, GT_E_IO, "netns %s: setns: %s", ns, strerror(saved));
    return GT_OK;
}
