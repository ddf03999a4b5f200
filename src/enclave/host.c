// The host's side of a running enclave: starts the enclave process, checks its hello (the
// REPORT for the host's target, the identity against the SIGSTRUCT, the session key binding),
// then carries ECALLs and serves OCALLs over the AES-GCM channel (INSECURE SIMULATION: the
// enclave is a process, docs/enclave.md "Running enclaves").
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HELLO_TIMEOUT_MS 10000
// How often the host, asleep on the ring during an ECALL, checks the enclave process is alive
// (a killed one is reported within about this long).
#define RING_LIVE_CHECK_MS 10
#define PROCESS_NAME "gputravel-enclave-process"

struct gt_enclave {
    pid_t pid;
    bool dead;
    bool session;   // the channel keys exist: CLOSE can be sent
    gt_enclave_channel ch;
    gt_sgx_identity identity;
    gt_sgx_platform platform;   // the one handed to the enclave process (wiped at stop)
    gt_enclave_ocall_fn ocall;
    void *ocall_ctx;
    gt_buf frame, plain;
    uint8_t *ring;   // the shared-memory ring (NULL: the messages stay on the socket)
};

static gt_err process_path(const gt_enclave_spec *spec, char *out, size_t cap)
{
    const char *p = spec->process_path ? spec->process_path : getenv("GPUTRAVEL_ENCLAVE_PROCESS");
    if (p != NULL && *p != '\0') {
        GT_ENSURE(strlen(p) < cap, GT_E_ARG, "enclave: process path too long");
        snprintf(out, cap, "%s", p);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        GT_ENSURE(n > 0, GT_E_IO, "enclave: cannot find this executable (/proc/self/exe)");
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        *slash = '\0';
        GT_ENSURE((size_t)snprintf(out, cap, "%s/" PROCESS_NAME, self) < cap, GT_E_ARG,
                  "enclave: process path too long");
    }
    GT_ENSURE(access(out, X_OK) == 0, GT_E_NOTFOUND,
              "enclave: %s is not an executable (set GPUTRAVEL_ENCLAVE_PROCESS or install "
              PROCESS_NAME " beside this program)", out);
    return GT_OK;
}

static gt_err spawn(gt_enclave *e, const char *path, int *fd)
{
    int sv[2];
    GT_ENSURE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, GT_E_IO,
              "enclave: socketpair: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return gt_errf(GT_E_IO, "enclave: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        // The child keeps exactly fd 3 (dup2 clears CLOEXEC on it); everything else closes.
        if (dup2(sv[1], 3) < 0) {
            _exit(127);
        }
        char *argv[] = {(char *)path, (char *)"3", NULL};
        execv(path, argv);
        _exit(127);
    }
    close(sv[1]);
    e->pid = pid;
    *fd = sv[0];
    return GT_OK;
}

// How the process ended, for an operator (reaps it).
static void describe_exit(gt_enclave *e, char *out, size_t cap)
{
    int st = 0;
    pid_t r = e->dead ? -1 : waitpid(e->pid, &st, 0);
    e->dead = true;
    if (r == e->pid && WIFSIGNALED(st)) {
        snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    } else if (r == e->pid && WIFEXITED(st)) {
        snprintf(out, cap, "exited with status %d%s", WEXITSTATUS(st),
                 WEXITSTATUS(st) == 127 ? " (could not be executed)" : "");
    } else {
        snprintf(out, cap, "is gone");
    }
}

static gt_err peer_gone(gt_enclave *e, const char *during)
{
    char how[96];
    describe_exit(e, how, sizeof how);
    return gt_errf(GT_E_PEER, "enclave process %d %s %s (insecure-simulation)", (int)e->pid, how,
                   during);
}

static gt_err send_start(gt_enclave *e, const gt_enclave_spec *spec, uint8_t host_sec[32],
                         gt_enclave_start_msg *st)
{
    gt_writer w = gt_writer_init_dynamic();
    gt_err err;
    memset(st, 0, sizeof *st);
    st->allow_debug = spec->allow_debug;
    st->min_isvsvn = spec->min_isvsvn;
    st->platform = e->platform;
    memcpy(st->sigstruct, spec->sigstruct, GT_SGX_SIGSTRUCT_BYTES);
    st->image = (gt_span){spec->image, spec->image_len};
    GT_TRY_GOTO(err, gt_x25519_keypair(st->host_pub, host_sec), out);
    GT_TRY_GOTO(err, gt_random_bytes(st->host_nonce, sizeof st->host_nonce), out);
    GT_TRY_GOTO(err, gt_enclave_start_encode(&w, st), out);
    GT_TRY_GOTO(err, gt_enclave_frame_send(e->ch.fd, w.data, w.len), out);
out:
    gt_writer_free(&w);  // wipes: the platform root was in it
    gt_secure_zero(&st->platform, sizeof st->platform);
    return err;
}

static gt_err wait_readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    do {
        n = poll(&p, 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    GT_ENSURE(n > 0, GT_E_TIMEOUT, "enclave: no answer from the enclave process in %d ms",
              timeout_ms);
    return GT_OK;
}

// The enclave's REPORT must be MACed for the host's target by a holder of the platform root,
// name the identity EINIT established from this SIGSTRUCT, and bind both session keys.
static gt_err check_hello(const gt_enclave *e, const gt_enclave_spec *spec,
                          const gt_enclave_start_msg *st, const gt_enclave_hello_msg *h)
{
    gt_sgx_report r;
    gt_sgx_secs_identity host;
    gt_sgx_sigstruct s;
    gt_sgx_sigstruct_checks c;
    uint8_t data[GT_SGX_REPORTDATA_BYTES];
    GT_TRY(gt_sgx_report_decode(h->report, sizeof h->report, &r));
    GT_TRY(gt_enclave_host_target(&host));
    GT_TRY(gt_err_wrap(gt_sgx_report_verify(&r, &e->platform, &host), "enclave hello"));
    GT_TRY(gt_sgx_sigstruct_parse(spec->sigstruct, GT_SGX_SIGSTRUCT_BYTES, &s));
    GT_TRY(gt_sgx_sigstruct_verify(&s, &c));
    GT_ENSURE(gt_ct_equal(r.mrenclave, s.enclavehash, 32) &&
                  gt_ct_equal(r.mrenclave, h->identity.mrenclave, 32),
              GT_E_AUTH, "enclave hello: the report's MRENCLAVE is not the SIGSTRUCT's");
    GT_ENSURE(gt_ct_equal(r.mrsigner, c.mrsigner, 32) &&
                  gt_ct_equal(r.mrsigner, h->identity.mrsigner, 32),
              GT_E_AUTH, "enclave hello: the report's MRSIGNER is not the SIGSTRUCT's signer");
    GT_ENSURE(r.isvprodid == s.isvprodid && r.isvsvn == s.isvsvn, GT_E_AUTH,
              "enclave hello: the report's ISVPRODID/ISVSVN are not the SIGSTRUCT's");
    GT_TRY(gt_enclave_session_reportdata(data, st->host_nonce, st->host_pub, h->enclave_pub));
    GT_ENSURE(gt_ct_equal(data, r.reportdata, sizeof data), GT_E_AUTH,
              "enclave hello: REPORTDATA does not bind this session's keys");
    return GT_OK;
}

static gt_code refusal_code(const char *refusal)
{
    static const gt_code codes[] = {GT_E_AUTH, GT_E_POLICY, GT_E_FORMAT, GT_E_UNSUPPORTED,
                                    GT_E_IO, GT_E_LIMIT};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *name = gt_code_name(codes[i]);
        size_t n = strlen(name);
        if (strncmp(refusal, name, n) == 0 && refusal[n] == ':') {
            return codes[i];
        }
    }
    return GT_E_PEER;
}

static gt_err handshake(gt_enclave *e, const gt_enclave_spec *spec)
{
    uint8_t sec[GT_X25519_BYTES], shared[GT_X25519_BYTES];
    gt_enclave_start_msg st;
    gt_enclave_hello_msg h;
    gt_err err;
    GT_TRY_GOTO(err, send_start(e, spec, sec, &st), out);
    GT_TRY_GOTO(err, wait_readable(e->ch.fd, HELLO_TIMEOUT_MS), out);
    err = gt_enclave_frame_recv(e->ch.fd, 4096, &e->frame);
    if (err.code == GT_E_PEER) {
        err = peer_gone(e, "before it answered");
        goto out;
    }
    GT_TRY_GOTO(err, err, out);
    GT_TRY_GOTO(err, gt_enclave_hello_parse(e->frame.data, e->frame.len, &h), out);
    GT_ENSURE_GOTO(err, h.ok, out, refusal_code(h.refusal),
                   "enclave refused to start (insecure-simulation): %s", h.refusal);
    GT_TRY_GOTO(err, check_hello(e, spec, &st, &h), out);
    GT_TRY_GOTO(err, gt_x25519_shared(shared, h.enclave_pub, sec), out);
    int fd = e->ch.fd;
    GT_TRY_GOTO(err, gt_enclave_channel_init(&e->ch, fd, true, shared, st.host_nonce,
                                             st.host_pub, h.enclave_pub, h.report), out);
    e->identity = h.identity;
    e->session = true;
out:
    gt_secure_zero(sec, sizeof sec);
    gt_secure_zero(shared, sizeof shared);
    return err;
}

// The platform the enclave process gets: the root sealed to the host TEE (platform_dir), or
// the caller's. A sealed file that does not open on this host TEE stops the start here.
static gt_err open_platform(gt_sgx_platform *pf, const gt_enclave_spec *spec)
{
    GT_ENSURE((spec->platform_dir != NULL) != (spec->platform != NULL), GT_E_ARG,
              "enclave: give exactly one of platform_dir (sealed) and platform");
    if (spec->platform != NULL) {
        *pf = *spec->platform;
        return GT_OK;
    }
    gt_sgx_platform_options sim = {.host = GT_TEE_SIM};
    const gt_sgx_platform_options *o = spec->platform_options ? spec->platform_options : &sim;
    return gt_err_wrap(gt_sgx_platform_open(spec->platform_dir, o, pf, NULL),
                       "enclave: the platform in %s", spec->platform_dir);
}

// The fast path: the ring's memfd goes to the enclave process over the socket, announced by an
// authenticated RING message; its answer comes back through the ring itself, so from then on
// both sides use it. GPUTRAVEL_ENCLAVE_CHANNEL=socket keeps the socket (the bench compares the
// two; a test runs the suite's attacks on both).
static gt_err attach_ring(gt_enclave *e)
{
    const char *want = getenv("GPUTRAVEL_ENCLAVE_CHANNEL");
    if (want != NULL && strcmp(want, "socket") == 0) {
        return GT_OK;
    }
    GT_ENSURE(want == NULL || *want == '\0' || strcmp(want, "ring") == 0, GT_E_ARG,
              "enclave: GPUTRAVEL_ENCLAVE_CHANNEL is '%s' (ring or socket)", want);
    int fd = -1;
    GT_TRY(gt_enclave_ring_create(&fd, &e->ring));
    gt_enclave_msg m = {.type = GT_ENCLAVE_MSG_RING, .code = GT_ENCLAVE_RING_BYTES};
    gt_err err = gt_enclave_channel_send(&e->ch, &m);
    if (gt_is_ok(err)) {
        err = gt_enclave_fd_send(e->ch.fd, fd);
    }
    close(fd);
    GT_TRY(err);
    gt_enclave_channel_use_ring(&e->ch, e->ring, true, RING_LIVE_CHECK_MS);
    err = gt_enclave_channel_recv(&e->ch, &e->frame, &e->plain, &m);
    if (err.code == GT_E_PEER) {
        return peer_gone(e, "while attaching the ring");
    }
    GT_TRY(err);
    GT_ENSURE(m.type == GT_ENCLAVE_MSG_RING && m.code == 0, GT_E_STATE,
              "enclave: message %u where the ring's answer was expected", m.type);
    return GT_OK;
}

gt_err gt_enclave_start(gt_enclave **out, const gt_enclave_spec *spec)
{
    *out = NULL;
    GT_ENSURE(spec->image != NULL && spec->sigstruct != NULL, GT_E_ARG,
              "enclave: image and SIGSTRUCT are required");
    char path[PATH_MAX];
    GT_TRY(process_path(spec, path, sizeof path));
    gt_enclave *e = calloc(1, sizeof *e);
    GT_ENSURE(e != NULL, GT_E_NOMEM, "enclave: out of memory");
    e->ocall = spec->ocall;
    e->ocall_ctx = spec->ocall_ctx;
    e->ch.fd = -1;
    gt_err err = open_platform(&e->platform, spec);
    if (gt_is_ok(err)) {
        err = spawn(e, path, &e->ch.fd);
    }
    if (!gt_is_ok(err)) {
        gt_secure_zero(e, sizeof *e);
        free(e);
        return err;
    }
    err = handshake(e, spec);
    if (gt_is_ok(err)) {
        err = attach_ring(e);
    }
    if (!gt_is_ok(err)) {
        gt_enclave_stop(e);
        return err;
    }
    *out = e;
    return GT_OK;
}

static gt_err answer_ocall(gt_enclave *e, const gt_enclave_msg *m)
{
    gt_buf reply = {0};
    int64_t status = -1;
    gt_err err = GT_OK;
    if (e->ocall != NULL) {
        GT_TRY_GOTO(err, e->ocall(e->ocall_ctx, m->code, m->payload.data, m->payload.len, &reply,
                                  &status), out);
    }
    gt_enclave_msg r = {.type = GT_ENCLAVE_MSG_ORET, .code = (uint64_t)status,
                        .payload = {reply.data, reply.len}};
    GT_TRY_GOTO(err, gt_enclave_channel_send(&e->ch, &r), out);
out:
    gt_buf_free(&reply);
    return err;
}

gt_err gt_enclave_ecall(gt_enclave *e, uint64_t number, const void *in, size_t in_len,
                        gt_buf *out, int64_t *status)
{
    GT_ENSURE(!e->dead, GT_E_STATE, "enclave: the enclave process is gone");
    out->len = 0;
    gt_enclave_msg m = {.type = GT_ENCLAVE_MSG_ECALL, .code = number,
                        .payload = {in, in_len}};
    gt_err err = gt_enclave_channel_send(&e->ch, &m);
    while (gt_is_ok(err)) {
        err = gt_enclave_channel_recv(&e->ch, &e->frame, &e->plain, &m);
        if (!gt_is_ok(err) || m.type == GT_ENCLAVE_MSG_ERET) {
            break;
        }
        if (m.type != GT_ENCLAVE_MSG_OCALL) {
            err = gt_errf(GT_E_STATE, "enclave: message %u during an ECALL", m.type);
            break;
        }
        err = answer_ocall(e, &m);
    }
    if (err.code == GT_E_PEER) {
        return peer_gone(e, "during an ECALL");
    }
    if (!gt_is_ok(err)) {
        kill(e->pid, SIGKILL);  // a session out of step cannot be resumed
        char how[96];
        describe_exit(e, how, sizeof how);
        return err;
    }
    *status = (int64_t)m.code;
    return gt_buf_append(out, m.payload.data, m.payload.len);
}

const gt_sgx_identity *gt_enclave_identity(const gt_enclave *e)
{
    return &e->identity;
}

int gt_enclave_pid(const gt_enclave *e)
{
    return (int)e->pid;
}

// Waits up to ms for the child to exit on its own.
static bool reaped_within(gt_enclave *e, int ms)
{
    for (int waited = 0; waited <= ms; waited += 5) {
        if (waitpid(e->pid, NULL, WNOHANG) == e->pid) {
            return true;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

void gt_enclave_stop(gt_enclave *e)
{
    if (e == NULL) {
        return;
    }
    if (!e->dead && e->session) {
        gt_enclave_msg m = {.type = GT_ENCLAVE_MSG_CLOSE};
        gt_err ignored = gt_enclave_channel_send(&e->ch, &m);
        (void)ignored;
    }
    if (e->ch.fd >= 0) {
        close(e->ch.fd);  // EOF ends a process that did not see CLOSE
    }
    if (!e->dead && e->pid > 0 && !reaped_within(e, 1000)) {
        kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
    }
    gt_enclave_channel_wipe(&e->ch);
    gt_enclave_ring_unmap(e->ring);
    gt_secure_zero(&e->platform, sizeof e->platform);
    gt_buf_free(&e->frame);
    gt_buf_free(&e->plain);
    free(e);
}
