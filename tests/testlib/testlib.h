// Test helpers shared by every unit test: temp dirs, test data paths, running the CLI.
// Include after <stdarg.h>, <stddef.h>, <setjmp.h> (cmocka's requirement); testlib.h does so.
#ifndef GT_TESTLIB_H
#define GT_TESTLIB_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
// cmocka.h needs the three above first.
#include <cmocka.h>

#include <gputravel/net.h>
#include <gputravel/util.h>

// Asserts that a gt_err call succeeded, printing its message if not.
#define GT_ASSERT_OK(expr)                                                        \
    do {                                                                          \
        gt_err e__ = (expr);                                                      \
        if (e__.code != GT_E_NONE) {                                              \
            fail_msg("%s failed: %s (%s)", #expr, e__.msg, gt_code_name(e__.code)); \
        }                                                                         \
    } while (0)
// Asserts that a gt_err call failed with the given code.
#define GT_ASSERT_CODE(expr, want)                                                \
    do {                                                                          \
        gt_err e__ = (expr);                                                      \
        if (e__.code != (want)) {                                                 \
            fail_msg("%s: expected %s, got %s (%s)", #expr, gt_code_name(want),   \
                     gt_code_name(e__.code), e__.msg);                            \
        }                                                                         \
    } while (0)

// Asserts that a gt_err call failed with the given code and a message naming needle.
#define GT_ASSERT_ERR(expr, want, needle)                                              \
    do {                                                                               \
        gt_err e__ = (expr);                                                           \
        if (e__.code != (want) || strstr(e__.msg, (needle)) == NULL) {                 \
            fail_msg("%s: expected %s naming '%s', got %s (%s)", #expr,                \
                     gt_code_name(want), (needle), gt_code_name(e__.code), e__.msg);   \
        }                                                                              \
    } while (0)

// Creates a fresh temporary directory (under $TMPDIR or /tmp); writes its path into out.
void gt_test_tmpdir(char *out, size_t cap);
// Removes a directory tree (rm -rf) below $TMPDIR (or /tmp); fails the test for anything else.
void gt_test_rmtree(const char *path);
// Fails the test unless path is a regular file with exactly these permission bits (e.g. 0600).
void gt_test_assert_mode(const char *path, unsigned mode);
// Path of a file under tests/testdata/ ("attestation/tdx/x.bin").
void gt_test_data_path(char *out, size_t cap, const char *rel);
// Reads a file under tests/testdata/ into b (fails the test if it cannot).
void gt_test_read_data(const char *rel, gt_buf *b);
// Number of regular files in dir (for "nothing was left behind" checks).
int gt_test_count_files(const char *dir);
// Waits up to timeout_ms for the child to end by itself, then reaps it (gt_proc_stop, which
// would add a SIGTERM to one still running) and returns its wait status.
int gt_test_proc_wait(gt_proc *p, int timeout_ms);

// Fails the test with a short message after writing all of log to stderr, and then every file in
// logs_dir (may be NULL): cmocka cuts a failure message at 1 KiB, which hides the end of a long
// log, where the error is.
_Noreturn void gt_test_fail_log(const gt_buf *log, const char *logs_dir, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// A free TCP port on 127.0.0.1 for a server the test starts later, chosen below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): a port-0 pick that is closed again can be
// taken as the local port of any process's next connection before the server binds it.
int gt_test_free_port(void);

// Runs the gputravel binary with the given NULL-terminated arguments; returns its exit status
// and, when out is not NULL, its stdout and stderr together (caller frees with gt_buf_free).
int gt_test_run_cli(gt_buf *out, const char *const *args);

// A data holder's agent as a process: `gputravel holder ARGS...` (args NULL-terminated), its
// stdout and stderr written to log_path; returns once it serves. gt_test_holder_stop sends
// SIGTERM, reaps it, and fails the test unless it exited 0 (`what` names it in the message).
void gt_test_holder_start(gt_proc *p, const char *log_path, const char *const *args);
void gt_test_holder_stop(gt_proc *p, const char *what);

// The toy attestor, for tests without a TEE: its evidence is the channel binding followed by
// `name`. It accepts evidence bound to this channel from a peer named `accept` exactly (or, when
// accept ends in '*', any name with that prefix). replay: send `recorded` as the binding instead
// (evidence made for another session). The attestor points at t, which must outlive it.
typedef struct {
    const char *name;
    const char *accept;
    bool replay;
    uint8_t recorded[GT_NET_BINDING_BYTES];
} gt_test_toy;
gt_net_attestor gt_test_toy_attestor(gt_test_toy *t);

// The emulated device for tests: starts `gputravel --quiet devd --socket DIR/devd.sock ARGS...`
// (extra: NULL-terminated, may be NULL) and returns its pid once the socket listens; the socket
// path is written into sock. Unless GT_SIM_ROOT is set, it is set to DIR/sim-root first, so
// devd (vendor root, identity under DIR/sim-root/devd-identity) and the test's own sim evidence
// share one throw-away sim root. gt_test_devd_stop sends SIGTERM and reaps it (SIGKILL after 5 s).
// All of it runs on util's gt_proc.
#include <sys/types.h>
pid_t gt_test_devd_start(char *sock, size_t cap, const char *dir, const char *const *extra);
// The same with --verbose, devd's stdout and stderr appended to log_path.
pid_t gt_test_devd_start_logged(char *sock, size_t cap, const char *dir, const char *log_path);
void gt_test_devd_stop(pid_t pid);

// A test's own folder with a devd in it, as cmocka state: a test's setup calls
// gt_test_devd_setup(state, its devd arguments); gt_test_devd_teardown is the teardown itself
// (stops devd, removes the folder).
typedef struct {
    char dir[512];
    char sock[600];
    pid_t pid;
} gt_test_devd;
int gt_test_devd_setup(void **state, const char *const *extra);
int gt_test_devd_teardown(void **state);

#endif
