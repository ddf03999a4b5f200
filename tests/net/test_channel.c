// net/: attested TLS channels. A toy attestor stands in for TEE evidence: its "evidence" is the
// binding plus a name, so the tests see exactly what was bound and what was refused.
#include "testlib.h"

#include <gputravel/net.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef gt_test_toy toy;  // testlib.h

typedef struct {
    gt_listener *l;
    toy t;
    gt_err result;
    size_t bulk;      // bytes of the streamed frame to expect and echo a digest of
} server_arg;

static void *server_main(void *p)
{
    server_arg *a = p;
    gt_net_attestor att = gt_test_toy_attestor(&a->t);
    gt_channel *ch = NULL;
    a->result = gt_listener_accept(a->l, &att, 5000, &ch);
    if (!gt_is_ok(a->result)) {
        return NULL;
    }
    uint32_t type = 0;
    gt_buf msg = {0};
    a->result = gt_channel_recv(ch, &type, &msg, 1024);
    if (gt_is_ok(a->result)) {
        a->result = gt_channel_send(ch, type + 1, msg.data, msg.len);  // echo
    }
    if (gt_is_ok(a->result) && a->bulk > 0) {
        uint64_t len = 0;
        a->result = gt_channel_recv_begin(ch, &type, &len);
        uint8_t *buf = malloc(1 << 20);
        uint64_t sum = 0;
        for (uint64_t done = 0; gt_is_ok(a->result) && done < len;) {
            size_t n = len - done > (1 << 20) ? (1 << 20) : (size_t)(len - done);
            a->result = gt_channel_read(ch, buf, n);
            for (size_t i = 0; i < n; i++) {
                sum += buf[i];
            }
            done += n;
        }
        free(buf);
        if (gt_is_ok(a->result)) {
            a->result = gt_channel_send(ch, 99, &sum, sizeof sum);
        }
    }
    gt_buf_free(&msg);
    gt_channel_close(ch);
    return NULL;
}

static void start_server(server_arg *a, pthread_t *th, char *addr, size_t cap)
{
    GT_ASSERT_OK(gt_listener_open(&a->l, "127.0.0.1:0"));
    snprintf(addr, cap, "127.0.0.1:%d", gt_listener_port(a->l));
    pthread_create(th, NULL, server_main, a);
}

static void attested_exchange_and_bulk_stream(void **state)
{
    (void)state;
    server_arg a = {.t = {.name = "trainer", .accept = "holder"}, .bulk = 8u << 20};
    pthread_t th;
    char addr[64];
    start_server(&a, &th, addr, sizeof addr);
    toy me = {.name = "holder", .accept = "trainer"};
    gt_net_attestor att = gt_test_toy_attestor(&me);
    gt_channel *ch = NULL;
    GT_ASSERT_OK(gt_channel_connect(&ch, addr, &att));
    GT_ASSERT_OK(gt_channel_send(ch, 7, "hello", 5));
    uint32_t type = 0;
    gt_buf reply = {0};
    GT_ASSERT_OK(gt_channel_recv(ch, &type, &reply, 1024));
    assert_int_equal(type, 8);
    assert_int_equal(reply.len, 5);
    assert_memory_equal(reply.data, "hello", 5);

    // One 8 MiB frame written in uneven pieces; the server sums the bytes it reads.
    uint8_t *buf = malloc(a.bulk);
    uint64_t sum = 0;
    for (size_t i = 0; i < a.bulk; i++) {
        buf[i] = (uint8_t)(i * 31 + 7);
        sum += buf[i];
    }
    GT_ASSERT_OK(gt_channel_send_begin(ch, 50, a.bulk));
    GT_ASSERT_CODE(gt_channel_send_begin(ch, 51, 1), GT_E_STATE);  // frame still open
    GT_ASSERT_OK(gt_channel_write(ch, buf, 12345));
    GT_ASSERT_OK(gt_channel_write(ch, buf + 12345, a.bulk - 12345));
    GT_ASSERT_CODE(gt_channel_write(ch, buf, 1), GT_E_STATE);  // past the frame's length
    GT_ASSERT_OK(gt_channel_recv(ch, &type, &reply, 1024));
    assert_int_equal(reply.len, sizeof sum);
    assert_memory_equal(reply.data, &sum, sizeof sum);
    free(buf);
    gt_buf_free(&reply);
    gt_channel_close(ch);
    pthread_join(th, NULL);
    GT_ASSERT_OK(a.result);
    gt_listener_close(a.l);
}

static void refused_peers_fail_on_both_sides(void **state)
{
    (void)state;
    // The server does not accept this client's identity.
    server_arg a = {.t = {.name = "trainer", .accept = "holder"}};
    pthread_t th;
    char addr[64];
    start_server(&a, &th, addr, sizeof addr);
    toy intruder = {.name = "mallory", .accept = "trainer"};
    gt_net_attestor att = gt_test_toy_attestor(&intruder);
    gt_channel *ch = NULL;
    gt_err e = gt_channel_connect(&ch, addr, &att);
    // The refused client learns the server's reason, not just a closed connection.
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "the peer refused our evidence: unexpected peer 'mallory'"));
    assert_null(ch);
    pthread_join(th, NULL);
    assert_int_equal(a.result.code, GT_E_POLICY);
    assert_non_null(strstr(a.result.msg, "unexpected peer 'mallory'"));
    gt_listener_close(a.l);

    // Evidence bound to another session (a replay) is refused even with the right name.
    server_arg b = {.t = {.name = "trainer", .accept = "holder"}};
    start_server(&b, &th, addr, sizeof addr);
    toy replayer = {.name = "holder", .accept = "trainer", .replay = true};
    memset(replayer.recorded, 0x42, sizeof replayer.recorded);
    att.ctx = &replayer;
    e = gt_channel_connect(&ch, addr, &att);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "bound to another session"));
    pthread_join(th, NULL);
    assert_int_equal(b.result.code, GT_E_POLICY);
    assert_non_null(strstr(b.result.msg, "bound to another session"));
    gt_listener_close(b.l);

    // The client refuses a server that is not the trainer it expects.
    server_arg c = {.t = {.name = "impostor", .accept = "holder"}};
    start_server(&c, &th, addr, sizeof addr);
    toy holder = {.name = "holder", .accept = "trainer"};
    att.ctx = &holder;
    e = gt_channel_connect(&ch, addr, &att);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "unexpected peer 'impostor'"));
    pthread_join(th, NULL);
    gt_listener_close(c.l);
}

// "fd:N" serves on an inherited listening TCP socket; anything else under that name is refused
// with a message naming the descriptor, and nothing of it is taken over.
static void listener_on_inherited_descriptor(void **state)
{
    (void)state;
    gt_listener *bound = NULL, *l = NULL;
    GT_ASSERT_OK(gt_listener_open(&bound, "127.0.0.1:0"));
    int fd = dup(gt_listener_fd(bound));  // a copy, as a child holds after exec
    char addr[32];
    snprintf(addr, sizeof addr, "fd:%d", fd);
    GT_ASSERT_OK(gt_listener_open(&l, addr));
    assert_int_equal(gt_listener_port(l), gt_listener_port(bound));
    assert_int_equal(gt_listener_fd(l), fd);
    // it serves: a connection to the port comes off its queue
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)gt_listener_port(l))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    int got = -1;
    char peer[GT_NET_PEER_MAX];
    GT_ASSERT_OK(gt_listener_accept_fd(l, 2000, &got, peer));
    close(got);
    close(c);
    gt_listener_close(l);
    gt_listener_close(bound);

    const char *bad_numbers[] = {"fd:",   "fd:2",  "fd:0",          "fd:-5",
                                 "fd:+7", "fd:7x", "fd:99999999999"};
    for (size_t i = 0; i < sizeof bad_numbers / sizeof bad_numbers[0]; i++) {
        GT_ASSERT_ERR(gt_listener_open(&l, bad_numbers[i]), GT_E_ARG, "descriptor number");
    }
    int file = open("/dev/null", O_RDONLY);
    int unbound_tcp = socket(AF_INET, SOCK_STREAM, 0);  // not listening
    int udp = socket(AF_INET, SOCK_DGRAM, 0);
    int unix_listening = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};  // abstract name: nothing on disk
    snprintf(un.sun_path + 1, sizeof un.sun_path - 1, "gt-test-listener-%d", (int)getpid());
    assert_int_equal(bind(unix_listening, (struct sockaddr *)&un, sizeof un), 0);
    assert_int_equal(listen(unix_listening, 1), 0);
    struct {
        int fd;
        const char *says;
    } refused[] = {{file, "not an open socket"},
                   {unbound_tcp, "not a listening stream socket"},
                   {udp, "not a listening stream socket"},
                   {unix_listening, "not a TCP socket"},
                   {1000, "not an open socket"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(addr, sizeof addr, "fd:%d", refused[i].fd);
        GT_ASSERT_ERR(gt_listener_open(&l, addr), GT_E_ARG, refused[i].says);
        assert_null(l);
        if (refused[i].fd != 1000) {  // still open: a refused descriptor is not taken over
            assert_int_equal(fcntl(refused[i].fd, F_GETFD), 0);
            close(refused[i].fd);
        }
    }
}

static void limits_and_timeouts(void **state)
{
    (void)state;
    gt_listener *l = NULL;
    GT_ASSERT_OK(gt_listener_open(&l, "127.0.0.1:0"));
    toy t = {.name = "x", .accept = "x"};
    gt_net_attestor att = gt_test_toy_attestor(&t);
    gt_channel *ch = NULL;
    GT_ASSERT_CODE(gt_listener_accept(l, &att, 50, &ch), GT_E_TIMEOUT);
    gt_listener_close(l);
    GT_ASSERT_CODE(gt_listener_open(&l, "no-port"), GT_E_ARG);
    GT_ASSERT_CODE(gt_channel_connect(&ch, "127.0.0.1:1", &att), GT_E_PEER);

    // A frame above the receiver's limit is refused, not allocated.
    server_arg a = {.t = {.name = "trainer", .accept = "holder"}};
    pthread_t th;
    char addr[64];
    start_server(&a, &th, addr, sizeof addr);
    toy me = {.name = "holder", .accept = "trainer"};
    att.ctx = &me;
    GT_ASSERT_OK(gt_channel_connect(&ch, addr, &att));
    uint8_t big[2048] = {0};
    GT_ASSERT_OK(gt_channel_send(ch, 1, big, sizeof big));
    pthread_join(th, NULL);
    assert_int_equal(a.result.code, GT_E_LIMIT);
    gt_channel_close(ch);
    gt_listener_close(a.l);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);  // as the CLI's main does
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attested_exchange_and_bulk_stream),
        cmocka_unit_test(refused_peers_fail_on_both_sides),
        cmocka_unit_test(listener_on_inherited_descriptor),
        cmocka_unit_test(limits_and_timeouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
