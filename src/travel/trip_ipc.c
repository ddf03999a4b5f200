// A trip served by the trainer itself (trip_ipc.h; docs/cuda.md "Travelling with a real GPU"):
// devd's lend / attach / return protocol with the handoff of a holder's GPU buffer (CUDA IPC) in
// place of LOAD_SEALED. Messages, handshake and records are sim_proto.c's and sim_server.c's.
#include "trip_ipc.h"

#include <gputravel/devproto.h>

#include <gputravel/travel.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define TRIP_HELLO_TIMEOUT_MS 10000
#define TRIP_SEND_TIMEOUT_S 30
#define TRIP_SLOTS 2u  // the handshake announces bounce slots; a handoff trip moves no bulk
#define TRIP_SLOT_BYTES 4096u

struct gt_ipc_trip {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int listen_fd;
    int fd;  // the attached holder (-1: none)
    gt_sim_keys keys;
    gt_sim_watch watch;
    gt_trip_state state;  // changed only by trip_step (the trip state machine)
    uint32_t fail_code;
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    uint8_t agreement[GT_SHA256_BYTES];
    double lease_end;
    gt_sim_identity *identity;
    gt_sim_admission *admission;
    gt_device_attester attester;
    uint8_t *rx;
    int bounce_fd;
    const gt_ipc_trip_importer *imp;
    gt_dbuf import;  // the holder's buffer while RETURNED (0: none)
    int peer_fd;     // gt_ipc_trip_watch_peer (-1: none)
};

// ---- records ----------------------------------------------------------------------------------

static gt_err send_msg(gt_ipc_trip *t, const gt_sim_msg *m)
{
    return gt_sim_msg_send(t->fd, &t->keys, m, -1);
}

static gt_err send_status(gt_ipc_trip *t, gt_err e)
{
    gt_sim_msg m;
    gt_sim_msg_status(&m, e);
    return send_msg(t, &m);
}

// recv_fd: where a descriptor attached to the frame goes (-1 when none; NULL: closed).
static gt_err recv_msg_fd(gt_ipc_trip *t, gt_sim_msg *m, int *recv_fd)
{
    return gt_sim_msg_recv(t->fd, &t->keys, t->rx, GT_SIM_MAX_FRAME, recv_fd, &t->watch, m);
}

static gt_err recv_msg(gt_ipc_trip *t, gt_sim_msg *m)
{
    return recv_msg_fd(t, m, NULL);
}

// ---- setup ------------------------------------------------------------------------------------

static gt_err listen_on(gt_ipc_trip *t, const char *path)
{
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    GT_ENSURE(path != NULL && path[0] != '\0' && strlen(path) < sizeof addr.sun_path, GT_E_ARG,
              "trip: bad socket path");
    memcpy(addr.sun_path, path, strlen(path) + 1);
    struct stat st;
    if (lstat(path, &st) == 0) {
        GT_ENSURE(S_ISSOCK(st.st_mode), GT_E_ARG, "trip: %s exists and is not a socket", path);
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0;
        if (probe >= 0) {
            close(probe);
        }
        GT_ENSURE(!live, GT_E_STATE, "trip: another trip is being served on %s", path);
        unlink(path);  // a stale trip socket
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    GT_ENSURE(fd >= 0, GT_E_IO, "trip: socket: %s", strerror(errno));
    mode_t old = umask(0077);  // only this user may connect
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    umask(old);
    if (rc != 0 || listen(fd, 4) != 0) {
        gt_err e = gt_errf(GT_E_IO, "trip: cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        return e;
    }
    memcpy(t->path, path, strlen(path) + 1);
    t->listen_fd = fd;
    return GT_OK;
}

static gt_err bounce_make(void *ctx, int *fd)
{
    gt_ipc_trip *t = ctx;
    if (t->bounce_fd < 0) {
        int b = memfd_create("gttrip-bounce", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        GT_ENSURE(b >= 0, GT_E_IO, "trip: memfd_create: %s", strerror(errno));
        if (ftruncate(b, (off_t)TRIP_SLOTS * TRIP_SLOT_BYTES) != 0 ||
            fcntl(b, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
            gt_err e = gt_errf(GT_E_IO, "trip: bounce memfd: %s", strerror(errno));
            close(b);
            return e;
        }
        t->bounce_fd = b;
    }
    *fd = t->bounce_fd;
    return GT_OK;
}

static gt_err trip_step(gt_ipc_trip *t, gt_trip_event ev, gt_code why);

gt_err gt_ipc_trip_lend(gt_ipc_trip **trip, const gt_ipc_trip_config *cfg,
                        uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    *trip = NULL;
    GT_ENSURE(cfg->lease_ms >= 1 && cfg->lease_ms <= GT_SIM_MAX_LEASE_MS, GT_E_ARG,
              "trip: lease of %u ms (1..%u)", cfg->lease_ms, GT_SIM_MAX_LEASE_MS);
    gt_ipc_trip *t = calloc(1, sizeof *t);
    GT_ENSURE(t != NULL, GT_E_NOMEM, "trip: out of memory");
    t->listen_fd = -1;
    t->fd = -1;
    t->bounce_fd = -1;
    t->peer_fd = -1;
    gt_err err = GT_OK;
    t->rx = malloc(GT_SIM_MAX_FRAME);
    GT_ENSURE_GOTO(err, t->rx != NULL, fail, GT_E_NOMEM, "trip: out of memory");
    t->attester = cfg->attester;
    if (t->attester.produce == NULL) {
        GT_ENSURE_GOTO(err, cfg->memory == GT_SIM_MEMORY_CUDA || cfg->memory == GT_SIM_MEMORY_HOST,
                       fail, GT_E_ARG, "trip: its evidence must say what holds its memory (cuda "
                       "or host; a trip the trainer serves is never devd), not %s",
                       gt_sim_device_memory_name(cfg->memory));
        GT_TRY_GOTO(err, gt_sim_identity_open(&t->identity, cfg->identity_dir, NULL), fail);
        gt_sim_identity_set_memory(t->identity, cfg->memory);
    }
    if (t->attester.appraise == NULL) {
        GT_TRY_GOTO(err, gt_sim_admission_open(&t->admission, NULL, NULL), fail);
    }
    memcpy(t->agreement, cfg->agreement_hash, sizeof t->agreement);
    GT_TRY_GOTO(err, listen_on(t, cfg->socket_path), fail);
    GT_TRY_GOTO(err, gt_random_bytes(t->ticket, sizeof t->ticket), fail);  // NEW_TICKET
    t->lease_end = gt_now_seconds() + cfg->lease_ms / 1000.0;           // ARM_LEASE
    GT_TRY_GOTO(err, trip_step(t, GT_TRIP_EV_LEND, GT_E_NONE), fail);
    memcpy(ticket, t->ticket, GT_SIM_TICKET_BYTES);
    *trip = t;
    gt_log_info("trip: device lent for %u ms on %s", cfg->lease_ms, cfg->socket_path);
    return GT_OK;
fail:
    gt_ipc_trip_close(t);
    return err;
}

// ---- the trip ---------------------------------------------------------------------------------

static void refuse_other(void *ctx)
{
    gt_ipc_trip *t = ctx;
    int fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        return;
    }
    uint8_t body[256];
    gt_writer w = gt_writer_init_fixed(body, sizeof body);
    if (gt_is_ok(gt_sim_refuse_write(&w, gt_errf(GT_E_STATE, "device busy: on a trip")))) {
        gt_err e = gt_sim_frame_send(fd, body, w.len, -1);
        (void)e;
    }
    close(fd);
}

static void holder_drop(gt_ipc_trip *t)
{
    if (t->fd >= 0) {
        close(t->fd);
        t->fd = -1;
    }
    gt_secure_zero(&t->keys, sizeof t->keys);
}

// Every state change of the trip: the state machine decides (GT_E_STATE when ev is not allowed
// now: nothing changes) and the effects that need no message are carried out here. NEW_TICKET,
// ARM_LEASE and BIND_HOLDER are the caller's (done before the step); RELEASE_IMPORT is
// gt_ipc_trip_release's, which must release before RELEASED and drop the holder after its BYE.
static gt_err trip_step(gt_ipc_trip *t, gt_trip_event ev, gt_code why)
{
    gt_trip_state to;
    unsigned fx = 0;
    GT_TRY(gt_trip_step(t->state, ev, &to, &fx));
    if ((fx & GT_TRIP_FX_WIPE_TRIP) && t->import != 0 && t->imp != NULL) {
        gt_err e = t->imp->release(t->imp->ctx, t->import);
        if (!gt_is_ok(e)) {
            gt_log_warn("trip: releasing the import: %s", e.msg);
        }
        t->import = 0;
    }
    if ((fx & (GT_TRIP_FX_END_HOLDER | GT_TRIP_FX_DROP_CONN)) &&
        !(fx & GT_TRIP_FX_RELEASE_IMPORT)) {
        holder_drop(t);
    }
    if (fx & GT_TRIP_FX_KILL_TICKET) {
        gt_secure_zero(t->ticket, sizeof t->ticket);  // the ticket is dead
    }
    t->state = to;
    if (to == GT_TRIP_FAILED) {
        t->fail_code = (uint32_t)(why ? why : GT_E_PEER);
    }
    return GT_OK;
}

// One connection while LENT: handshake, ATTACH with the ticket and the same agreement hash.
// Refused: the connection is dropped and the lend stands.
static gt_err try_attach(gt_ipc_trip *t, int fd)
{
    t->fd = fd;
    struct timeval tv = {.tv_sec = TRIP_SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    t->watch = (gt_sim_watch){.fd = t->listen_fd, .on_watch = refuse_other, .ctx = t,
                              .timeout_ms = TRIP_HELLO_TIMEOUT_MS, .fd2 = -1,
                              .deadline = t->lease_end};
    uint8_t agreement[GT_SHA256_BYTES] = {0};
    gt_sim_server_params p = {.slot_count = TRIP_SLOTS, .slot_bytes = TRIP_SLOT_BYTES,
                              .produce = t->attester.produce ? t->attester.produce
                                                             : gt_sim_identity_produce,
                              .produce_ctx = t->attester.produce ? t->attester.ctx : t->identity,
                              .appraise = t->attester.appraise ? t->attester.appraise
                                                               : gt_sim_admission_appraise,
                              .appraise_ctx = t->attester.appraise ? t->attester.ctx
                                                                   : t->admission,
                              .bounce = bounce_make, .bounce_ctx = t};
    GT_TRY(gt_sim_server_handshake(fd, t->rx, &t->watch, &p, &t->keys, agreement));
    gt_sim_msg m;
    GT_TRY(recv_msg(t, &m));
    gt_err st = GT_OK;
    if (m.type != GT_SIM_REQ_ATTACH) {
        st = gt_errf(GT_E_STATE, "trip: %s before attach", gt_sim_msg_name(m.type));
    } else if (!gt_ct_equal(m.ticket, t->ticket, GT_SIM_TICKET_BYTES)) {
        st = gt_errf(GT_E_AUTH, "trip: wrong travel ticket");
    } else if (!gt_ct_equal(agreement, t->agreement, GT_SHA256_BYTES)) {
        st = gt_errf(GT_E_POLICY, "trip: the holder's agreement hash is not the trainer's");
    }
    gt_secure_zero(&m, sizeof m);
    gt_err e = send_status(t, st);
    return gt_is_ok(st) ? e : st;
}

// ATTACHED: the holder's next record must be RETURN_IPC for the expected chunk.
static gt_err take_handoff(gt_ipc_trip *t, const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                           uint64_t bytes)
{
    gt_sim_msg m;
    int fd = -1;
    gt_err rx = recv_msg_fd(t, &m, &fd);
    if (!gt_is_ok(rx) || m.type != GT_SIM_REQ_RETURN_IPC) {
        if (fd >= 0) {
            close(fd);
        }
        GT_TRY(rx);
    }
    if (m.type == GT_SIM_REQ_BYE) {
        return gt_errf(GT_E_PEER, "trip: the holder left without handing anything over");
    }
    GT_ENSURE(m.type == GT_SIM_REQ_RETURN_IPC, GT_E_POLICY,
              "trip: the holder sent %s (only return_ipc on this trip)", gt_sim_msg_name(m.type));
    gt_err st = GT_OK;
    if (!gt_ct_equal(m.aad, aad, GT_SIM_LOAD_AAD_BYTES)) {
        st = gt_errf(GT_E_POLICY, "trip: the handed-over buffer holds another chunk");
    } else {
        st = t->imp->import(t->imp->ctx, m.ipc, fd, bytes, &t->import);
        if (!gt_is_ok(st)) {
            t->import = 0;
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    gt_secure_zero(&m, sizeof m);
    gt_err e = send_status(t, st);
    GT_TRY(st);
    return e;  // the STATUS must reach the holder, else the trip fails (import released)
}

gt_err gt_ipc_trip_wait(gt_ipc_trip *t, const gt_ipc_trip_importer *imp,
                        const uint8_t aad[GT_SIM_LOAD_AAD_BYTES], uint64_t bytes, gt_dbuf *out)
{
    *out = 0;
    gt_trip_state to;
    unsigned fx;
    gt_err open = gt_trip_step(t->state, GT_TRIP_EV_ATTACH, &to, &fx);  // asked, not taken
    if (!gt_is_ok(open)) {
        return gt_err_wrap(open, "trip: not lent");
    }
    t->imp = imp;
    while (t->state == GT_TRIP_LENT) {
        double left = t->lease_end - gt_now_seconds();
        if (left <= 0) {
            GT_TRY(trip_step(t, GT_TRIP_EV_EXPIRE, GT_E_TIMEOUT));
            return gt_errf(GT_E_TIMEOUT, "trip: lease expired before a holder attached");
        }
        struct pollfd pfd[2] = {{.fd = t->listen_fd, .events = POLLIN},
                                {.fd = t->peer_fd, .events = POLLIN}};
        int ms = left > 0.2 ? 200 : (int)(left * 1000) + 1;
        int ready = poll(pfd, t->peer_fd >= 0 ? 2 : 1, ms);
        if (ready > 0 && t->peer_fd >= 0 && pfd[1].revents != 0) {
            // the holder will not attach: the trainer takes its device back at once
            GT_TRY(trip_step(t, GT_TRIP_EV_RECALL, GT_E_PEER));
            return gt_errf(GT_E_PEER, "trip: the holder answered on its channel instead of "
                           "attaching");
        }
        if (ready <= 0 || !(pfd[0].revents & POLLIN)) {
            continue;
        }
        int fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        gt_err e = try_attach(t, fd);
        if (!gt_is_ok(e)) {
            gt_log_warn("trip: attach refused: %s", e.msg);
            GT_TRY(trip_step(t, GT_TRIP_EV_ATTACH_REFUSED, GT_E_NONE));  // DROP_CONN
            continue;  // the lend stands (the lease still runs)
        }
        GT_TRY(trip_step(t, GT_TRIP_EV_ATTACH, GT_E_NONE));  // BIND_HOLDER: t->fd is the holder
    }
    // ATTACHED: the lease bounds the holder's load, decryption and export
    t->watch.timeout_ms = 0;
    gt_err e = take_handoff(t, aad, bytes);
    if (!gt_is_ok(e)) {
        gt_code why = e.code;
        bool expired = e.code == GT_E_TIMEOUT && gt_now_seconds() >= t->lease_end;
        if (e.code == GT_E_TIMEOUT) {
            e = gt_errf(GT_E_TIMEOUT, "trip: lease expired before the handoff (%s)", e.msg);
        }
        // the lease, or the holder's session (left, failed, a handoff refused): FAILED, any
        // import made is released (WIPE_TRIP)
        gt_err s = trip_step(t, expired ? GT_TRIP_EV_EXPIRE : GT_TRIP_EV_HOLDER_LOST, why);
        if (!gt_is_ok(s)) {
            gt_log_warn("%s", s.msg);
        }
        gt_log_warn("trip failed: %s", e.msg);
        return e;
    }
    GT_TRY(trip_step(t, GT_TRIP_EV_HAND_OVER, GT_E_NONE));  // HAND_LOADED: the import is ours
    *out = t->import;
    gt_log_info("trip: the holder's buffer (%llu bytes) is imported", (unsigned long long)bytes);
    return GT_OK;
}

gt_err gt_ipc_trip_check(gt_ipc_trip *t)
{
    if (t->state == GT_TRIP_FAILED) {
        return gt_errf((gt_code)t->fail_code, "trip failed: discard its results");
    }
    // an import to release exists only while RETURNED (after release: at_trainer)
    gt_trip_state to;
    unsigned fx;
    gt_err held = gt_trip_step(t->state, GT_TRIP_EV_RELEASE, &to, &fx);  // asked, not taken
    if (!gt_is_ok(held)) {
        return gt_err_wrap(held, "trip: nothing handed over, or already released");
    }
    struct pollfd pfd = {.fd = t->fd, .events = POLLIN};
    if (poll(&pfd, 1, 0) <= 0) {
        return GT_OK;  // silent (or interrupted: asked again next time)
    }
    // anything from the holder before RELEASED (EOF, BYE, junk) means it is gone
    GT_TRY(trip_step(t, GT_TRIP_EV_HANDOFF_LOST, GT_E_PEER));
    return gt_errf(GT_E_PEER, "trip: the holder went away while its buffer was in use; the "
                   "import is released and the trip's results must be discarded");
}

gt_err gt_ipc_trip_release(gt_ipc_trip *t)
{
    GT_TRY(gt_ipc_trip_check(t));
    // RELEASE_IMPORT first: only an import that is wiped lets the trip end well
    gt_dbuf b = t->import;
    t->import = 0;
    gt_err err = t->imp->release(t->imp->ctx, b);  // wipes the holder's memory, unmaps it
    if (!gt_is_ok(err)) {
        gt_err s = trip_step(t, GT_TRIP_EV_DEVICE_FAULT, err.code);
        (void)s;  // allowed while returned
        return err;
    }
    GT_TRY(trip_step(t, GT_TRIP_EV_RELEASE, GT_E_NONE));  // at_trainer
    gt_sim_msg m = {.type = GT_SIM_REP_RELEASED};
    err = send_msg(t, &m);
    if (gt_is_ok(err)) {
        t->watch = (gt_sim_watch){.fd = -1, .fd2 = -1, .timeout_ms = 5000};
        err = recv_msg(t, &m);
        if (gt_is_ok(err) && m.type != GT_SIM_REQ_BYE) {
            err = gt_errf(GT_E_STATE, "trip: the holder sent %s after released",
                          gt_sim_msg_name(m.type));
        }
    }
    holder_drop(t);  // END_HOLDER, after its BYE
    if (!gt_is_ok(err)) {
        // The import is already wiped; the holder frees its own allocation when its process
        // ends. What was computed stands: the buffer was whole and authentic while in use.
        gt_log_warn("trip: after release: %s", err.msg);
    }
    return GT_OK;
}

void gt_ipc_trip_watch_peer(gt_ipc_trip *t, int fd)
{
    t->peer_fd = fd;
}

uint32_t gt_ipc_trip_state(const gt_ipc_trip *t)
{
    return t->state;
}

void gt_ipc_trip_close(gt_ipc_trip *t)
{
    if (t == NULL) {
        return;
    }
    if (t->import != 0 || t->fd >= 0) {
        // the trainer leaves mid-trip: WIPE_TRIP releases the import, END_HOLDER
        gt_err s = trip_step(t, GT_TRIP_EV_TRAINER_GONE, GT_E_STATE);
        (void)s;
        holder_drop(t);
    }
    if (t->listen_fd >= 0) {
        close(t->listen_fd);
        unlink(t->path);
    }
    if (t->bounce_fd >= 0) {
        close(t->bounce_fd);
    }
    gt_sim_identity_free(t->identity);
    gt_sim_admission_free(t->admission);
    free(t->rx);
    gt_secure_zero(t, sizeof *t);
    free(t);
}

// ---- the holder -------------------------------------------------------------------------------

gt_err gt_ipc_trip_attach(gt_sim_conn *c, const char *socket_path,
                          const gt_device_sim_options *opt,
                          const uint8_t ticket[GT_SIM_TICKET_BYTES])
{
    GT_TRY(gt_sim_conn_open(c, socket_path, opt));
    gt_err err = gt_sim_conn_attach(c, ticket);
    if (!gt_is_ok(err)) {
        gt_sim_conn_close(c);
    }
    return err;
}

gt_err gt_ipc_trip_hand_over(gt_sim_conn *c, const uint8_t ipc[GT_SIM_IPC_DESC_BYTES],
                             const uint8_t aad[GT_SIM_LOAD_AAD_BYTES], int attach_fd)
{
    GT_ENSURE(c->holder, GT_E_STATE, "trip: not attached");
    gt_sim_msg req = {.type = GT_SIM_REQ_RETURN_IPC}, rep;
    memcpy(req.ipc, ipc, sizeof req.ipc);
    memcpy(req.aad, aad, sizeof req.aad);
    GT_TRY(gt_sim_conn_send_fd(c, &req, attach_fd));
    GT_TRY(gt_sim_conn_recv(c, &rep));
    GT_ENSURE(rep.type == GT_SIM_REP_STATUS, GT_E_STATE, "trip: the trainer sent %s (expected "
              "status)", gt_sim_msg_name(rep.type));
    return gt_sim_status_err(&rep.status);
}

gt_err gt_ipc_trip_wait_released(gt_sim_conn *c, int timeout_ms)
{
    gt_sim_watch saved = c->watch;
    c->watch.timeout_ms = timeout_ms > 0 ? timeout_ms : 3600 * 1000;
    gt_sim_msg m;
    gt_err err = gt_sim_conn_recv(c, &m);
    c->watch = saved;
    GT_TRY(err);
    GT_ENSURE(m.type == GT_SIM_REP_RELEASED, GT_E_STATE, "trip: the trainer sent %s (expected "
              "released)", gt_sim_msg_name(m.type));
    return GT_OK;
}
