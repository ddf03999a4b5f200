// net/: a shaped veth link between two namespaces carries an attested channel, at about the
// configured rate. Needs root and iproute2; skipped (and reported so) otherwise.
#include "testlib.h"

#include <gputravel/net.h>

#include "cli/netns.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void shaped_link_carries_a_channel(void **state)
{
    (void)state;
    if (geteuid() != 0 || system("ip -V >/dev/null 2>&1") != 0) {
        skip();  // reported as skipped by cmocka, never as passed
    }
    gt_netns_pair p;
    char tag[9];
    snprintf(tag, sizeof tag, "t%d", (int)(getpid() % 100000));
    GT_ASSERT_OK(gt_netns_pair_create(&p, tag, 200ull * 1000 * 1000));  // 200 Mbit/s
    gt_test_toy anyone = {.name = "", .accept = ""};  // evidence: the binding alone
    gt_net_attestor att = gt_test_toy_attestor(&anyone);

    pid_t child = fork();
    if (child == 0) {
        // Server in namespace b.
        gt_listener *l = NULL;
        char addr[64];
        snprintf(addr, sizeof addr, "%s:7443", p.addr[1]);
        if (!gt_is_ok(gt_netns_enter(p.ns[1])) || !gt_is_ok(gt_listener_open(&l, addr))) {
            _exit(2);
        }
        gt_channel *ch = NULL;
        if (!gt_is_ok(gt_listener_accept(l, &att, 10000, &ch))) {
            _exit(3);
        }
        uint32_t type = 0;
        uint64_t len = 0;
        static uint8_t buf[1 << 16];
        if (!gt_is_ok(gt_channel_recv_begin(ch, &type, &len))) {
            _exit(4);
        }
        for (uint64_t done = 0; done < len; done += sizeof buf) {
            size_t n = len - done < sizeof buf ? (size_t)(len - done) : sizeof buf;
            if (!gt_is_ok(gt_channel_read(ch, buf, n))) {
                _exit(5);
            }
        }
        if (!gt_is_ok(gt_channel_send(ch, 2, "ok", 2))) {
            _exit(6);
        }
        gt_channel_close(ch);
        gt_listener_close(l);
        _exit(0);
    }
    // Client in namespace a (this process; the test ends with the namespaces deleted).
    GT_ASSERT_OK(gt_netns_enter(p.ns[0]));
    char addr[64];
    snprintf(addr, sizeof addr, "%s:7443", p.addr[1]);
    gt_channel *ch = NULL;
    gt_err e = GT_OK;
    for (int tries = 0; tries < 50; tries++) {  // the server needs a moment to listen
        e = gt_channel_connect(&ch, addr, &att);
        if (gt_is_ok(e)) {
            break;
        }
        usleep(100000);
    }
    GT_ASSERT_OK(e);
    enum { BYTES = 10 << 20 };
    uint8_t *data = calloc(1, BYTES);
    double t0 = gt_now_seconds();
    GT_ASSERT_OK(gt_channel_send(ch, 1, data, BYTES));
    uint32_t type = 0;
    gt_buf reply = {0};
    GT_ASSERT_OK(gt_channel_recv(ch, &type, &reply, 16));
    double secs = gt_now_seconds() - t0;
    free(data);
    gt_buf_free(&reply);
    gt_channel_close(ch);
    int status = 0;
    waitpid(child, &status, 0);
    char ns_path[96];
    snprintf(ns_path, sizeof ns_path, "/run/netns/%s", p.ns[0]);
    assert_true(gt_path_exists(ns_path));
    gt_netns_pair_destroy(&p);
    assert_false(gt_path_exists(ns_path));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    // 80 Mbit over a 200 Mbit/s link needs at least 0.4 s: the shaping is in effect. (A lower
    // bound only; an upper bound would time the machine, not the code.)
    double mbit = BYTES * 8.0 / 1e6;
    print_message("sent %.0f Mbit in %.2f s over the shaped link\n", mbit, secs);
    assert_true(secs >= mbit / 200.0 * 0.9);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shaped_link_carries_a_channel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
