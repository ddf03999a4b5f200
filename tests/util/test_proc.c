// util/proc.c: spawn, readiness, stop (TERM, then KILL), and the scratch-root guard of rm -rf.
#include "testlib.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(dir);
    return 0;
}

static void spawn_sh(gt_proc *p, const char *script, const char *log, const char *const *env)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    gt_proc_spec s = {.argv = argv, .log_path = log, .env = env};
    GT_ASSERT_OK(gt_proc_spawn(p, &s));
    assert_true(p->pid > 0);
}

static void test_log_line_then_term(void **state)
{
    (void)state;
    char log[320];
    snprintf(log, sizeof log, "%s/child.log", dir);
    gt_proc p;
    spawn_sh(&p, "echo starting; sleep 0.2; echo serving now; exec sleep 30", log, NULL);
    gt_proc_ready r = {.kind = GT_PROC_READY_LOG_LINE, .path = log, .text = "serving"};
    GT_ASSERT_OK(gt_proc_wait_ready(&p, &r));
    assert_true(gt_proc_alive(&p));
    int status = gt_proc_stop(&p, 2000);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    assert_int_equal(p.pid, 0);
    assert_false(gt_proc_alive(&p));
    assert_int_equal(gt_proc_stop(&p, 0), status);  // stopping twice reports the same end
}

static void test_term_ignored_gets_kill(void **state)
{
    (void)state;
    char ready[320];
    snprintf(ready, sizeof ready, "%s/ready", dir);
    char script[512];
    snprintf(script, sizeof script, "trap '' TERM; touch %s; while :; do sleep 1; done", ready);
    gt_proc p;
    spawn_sh(&p, script, NULL, NULL);
    gt_proc_ready r = {.kind = GT_PROC_READY_FILE, .path = ready};
    GT_ASSERT_OK(gt_proc_wait_ready(&p, &r));
    double t0 = gt_now_seconds();
    int status = gt_proc_stop(&p, 300);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_true(gt_now_seconds() - t0 >= 0.25);  // it had its grace period first
    assert_int_equal(p.pid, 0);
}

static void test_exit_before_ready(void **state)
{
    (void)state;
    char never[320];
    snprintf(never, sizeof never, "%s/never", dir);
    gt_proc p;
    spawn_sh(&p, "exit 3", NULL, NULL);
    gt_proc_ready r = {.kind = GT_PROC_READY_FILE, .path = never, .what = "the child"};
    gt_err e = gt_proc_wait_ready(&p, &r);
    assert_int_equal(e.code, GT_E_PEER);
    assert_non_null(strstr(e.msg, "status 3"));
    assert_true(p.exited && WIFEXITED(p.status) && WEXITSTATUS(p.status) == 3);
    assert_int_equal(p.pid, 0);  // reaped
    assert_int_equal(WEXITSTATUS(gt_proc_stop(&p, 0)), 3);
}

static void test_missing_program(void **state)
{
    (void)state;
    char *argv[] = {"/nonexistent/gputravel", NULL};
    gt_proc_spec s = {.argv = argv};
    gt_proc p;
    GT_ASSERT_OK(gt_proc_spawn(&p, &s));
    gt_proc_ready r = {.kind = GT_PROC_READY_FILE, .path = "/nonexistent/x"};
    GT_ASSERT_CODE(gt_proc_wait_ready(&p, &r), GT_E_PEER);
    assert_int_equal(WEXITSTATUS(p.status), 127);
    char *none[] = {NULL};
    s.argv = none;
    GT_ASSERT_CODE(gt_proc_spawn(&p, &s), GT_E_ARG);
}

static void test_timeout_leaves_it_running(void **state)
{
    (void)state;
    char never[320];
    snprintf(never, sizeof never, "%s/never", dir);
    gt_proc p;
    spawn_sh(&p, "exec sleep 30", NULL, NULL);
    gt_proc_ready r = {.kind = GT_PROC_READY_FILE, .path = never, .timeout_ms = 150};
    double t0 = gt_now_seconds();
    GT_ASSERT_CODE(gt_proc_wait_ready(&p, &r), GT_E_TIMEOUT);
    assert_true(gt_now_seconds() - t0 >= 0.14);
    assert_true(gt_proc_alive(&p));
    assert_true(WIFSIGNALED(gt_proc_stop(&p, 0)));
}

static void wait_exit(gt_proc *p)
{
    for (int i = 0; i < 5000 && gt_proc_alive(p); i++) {
        usleep(1000);
    }
    assert_true(p->exited && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0);
}

static void test_env_and_log_modes(void **state)
{
    (void)state;
    char log[320];
    snprintf(log, sizeof log, "%s/env.log", dir);
    setenv("GT_PROC_TEST_A", "parent", 1);
    setenv("GT_PROC_TEST_B", "kept", 1);
    const char *env[] = {"GT_PROC_TEST_A=child", "GT_PROC_TEST_C=new", NULL};
    gt_proc p;
    spawn_sh(&p, "echo \"A=$GT_PROC_TEST_A B=$GT_PROC_TEST_B C=$GT_PROC_TEST_C\"", log, env);
    wait_exit(&p);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(log, 4096, &b));
    assert_int_equal(b.len, strlen("A=child B=kept C=new\n"));
    assert_memory_equal(b.data, "A=child B=kept C=new\n", b.len);
    gt_buf_free_nowipe(&b);
    assert_string_equal(getenv("GT_PROC_TEST_A"), "parent");  // the parent's stays
    // log_append keeps what was there; the default truncates.
    gt_proc_spec s = {.argv = (char *[]){"/bin/echo", "two", NULL}, .log_path = log,
                      .log_append = true};
    GT_ASSERT_OK(gt_proc_spawn(&p, &s));
    wait_exit(&p);
    GT_ASSERT_OK(gt_file_read_all(log, 4096, &b));
    assert_int_equal(b.len, strlen("A=child B=kept C=new\ntwo\n"));
    gt_buf_free_nowipe(&b);
    s.log_append = false;
    GT_ASSERT_OK(gt_proc_spawn(&p, &s));
    wait_exit(&p);
    GT_ASSERT_OK(gt_file_read_all(log, 4096, &b));
    assert_int_equal(b.len, strlen("two\n"));
    gt_buf_free_nowipe(&b);
    unsetenv("GT_PROC_TEST_A");
    unsetenv("GT_PROC_TEST_B");
}

// inherit_fds: the child keeps those descriptors (under their numbers), and no other: a
// close-on-exec descriptor it was not given stays closed in it.
static void test_inherited_descriptors(void **state)
{
    (void)state;
    int given = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int other = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(given > 2 && other > 2);
    char script[128], log[320];
    snprintf(log, sizeof log, "%s/fds.log", dir);
    snprintf(script, sizeof script, "test -e /proc/self/fd/%d && echo given; "
             "test -e /proc/self/fd/%d && echo other; exit 0", given, other);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    gt_proc_spec s = {.argv = argv, .log_path = log, .inherit_fds = &given, .inherit_count = 1};
    gt_proc p;
    GT_ASSERT_OK(gt_proc_spawn(&p, &s));
    wait_exit(&p);
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(log, 4096, &b));
    assert_int_equal(b.len, strlen("given\n"));
    assert_memory_equal(b.data, "given\n", b.len);
    gt_buf_free_nowipe(&b);
    // ...and the parent's copy stays close-on-exec: spawning did not change it
    assert_int_equal(fcntl(given, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    // stdin, stdout and stderr are no descriptors to "inherit": the child fails to start
    int std_fd = 1;
    s.inherit_fds = &std_fd;
    GT_ASSERT_OK(gt_proc_spawn(&p, &s));
    for (int i = 0; i < 5000 && gt_proc_alive(&p); i++) {
        usleep(1000);
    }
    assert_true(p.exited && WIFEXITED(p.status) && WEXITSTATUS(p.status) == 127);
    close(given);
    close(other);
}

static int unix_socket(const char *path, bool do_listen)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    if (do_listen) {
        assert_int_equal(listen(fd, 1), 0);
    }
    return fd;
}

static void test_socket_readiness(void **state)
{
    (void)state;
    char sock[320], plain[320];
    snprintf(sock, sizeof sock, "%s/s.sock", dir);
    snprintf(plain, sizeof plain, "%s/plain", dir);
    GT_ASSERT_OK(gt_file_write_atomic(plain, "x", 1, 0600));
    gt_proc p;
    spawn_sh(&p, "exec sleep 30", NULL, NULL);
    // A plain file, and a socket bound but not listening, are not ready.
    gt_proc_ready r = {.kind = GT_PROC_READY_SOCKET, .path = plain, .timeout_ms = 100};
    GT_ASSERT_CODE(gt_proc_wait_ready(&p, &r), GT_E_TIMEOUT);
    int fd = unix_socket(sock, false);
    r.path = sock;
    GT_ASSERT_CODE(gt_proc_wait_ready(&p, &r), GT_E_TIMEOUT);
    close(fd);
    unlink(sock);
    fd = unix_socket(sock, true);
    GT_ASSERT_OK(gt_proc_wait_ready(&p, &r));
    close(fd);
    gt_proc_stop(&p, 0);
}

static void test_rmtree_below(void **state)
{
    (void)state;
    char scratch[320], tree[400], sub[420], file[440], outside[320], link[440];
    snprintf(scratch, sizeof scratch, "%s/scratch", dir);
    snprintf(tree, sizeof tree, "%s/tree", scratch);
    snprintf(sub, sizeof sub, "%s/a/b", tree);
    snprintf(file, sizeof file, "%s/f", sub);
    snprintf(outside, sizeof outside, "%s/outside", dir);
    snprintf(link, sizeof link, "%s/to-outside", tree);
    GT_ASSERT_OK(gt_mkdir_p(sub, 0700));
    GT_ASSERT_OK(gt_mkdir_p(outside, 0700));
    GT_ASSERT_OK(gt_file_write_atomic(file, "x", 1, 0600));
    char keep[360];
    snprintf(keep, sizeof keep, "%s/keep", outside);
    GT_ASSERT_OK(gt_file_write_atomic(keep, "k", 1, 0600));
    assert_int_equal(symlink(outside, link), 0);
    // Refused: empty, "/", the root itself, anything outside it, ".." tricks, a link out.
    GT_ASSERT_CODE(gt_rmtree_below("", scratch), GT_E_ARG);
    GT_ASSERT_CODE(gt_rmtree_below("/", scratch), GT_E_ARG);
    GT_ASSERT_CODE(gt_rmtree_below(scratch, scratch), GT_E_ARG);
    GT_ASSERT_CODE(gt_rmtree_below(outside, scratch), GT_E_ARG);
    char dotdot[512];
    snprintf(dotdot, sizeof dotdot, "%s/../outside", scratch);
    GT_ASSERT_CODE(gt_rmtree_below(dotdot, scratch), GT_E_ARG);
    snprintf(dotdot, sizeof dotdot, "%s/tree/..", scratch);
    GT_ASSERT_CODE(gt_rmtree_below(dotdot, scratch), GT_E_ARG);
    snprintf(dotdot, sizeof dotdot, "%s/keep", link);  // below the root only through the link
    GT_ASSERT_CODE(gt_rmtree_below(dotdot, scratch), GT_E_ARG);
    GT_ASSERT_CODE(gt_rmtree_below(tree, "/"), GT_E_ARG);
    GT_ASSERT_CODE(gt_rmtree_below(tree, "/nonexistent-root"), GT_E_ARG);
    assert_true(gt_path_exists(file) && gt_path_exists(keep));
    // A prefix of the root's name is not below it.
    char sibling[400];
    snprintf(sibling, sizeof sibling, "%s-sibling", scratch);
    GT_ASSERT_OK(gt_mkdir_p(sibling, 0700));
    char in_sibling[420];
    snprintf(in_sibling, sizeof in_sibling, "%s/x", sibling);
    GT_ASSERT_OK(gt_mkdir_p(in_sibling, 0700));
    GT_ASSERT_CODE(gt_rmtree_below(in_sibling, scratch), GT_E_ARG);
    assert_true(gt_path_exists(in_sibling));
    // Allowed: the tree goes, the link goes, what it pointed at stays.
    GT_ASSERT_OK(gt_rmtree_below(tree, scratch));
    assert_false(gt_path_exists(tree));
    assert_true(gt_path_exists(keep));
    assert_true(gt_path_exists(scratch));
    GT_ASSERT_OK(gt_rmtree_below(tree, scratch));  // already gone: nothing to do
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_log_line_then_term, setup, teardown),
        cmocka_unit_test_setup_teardown(test_term_ignored_gets_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exit_before_ready, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_program, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_leaves_it_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_and_log_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_readiness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inherited_descriptors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rmtree_below, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
