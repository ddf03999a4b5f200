// Frames on the sim device's Unix socket: u32le length || body, with an optional descriptor
// (the bounce memfd) attached through SCM_RIGHTS.
#include <gputravel/devproto.h>

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

gt_err gt_sim_frame_send(int fd, const uint8_t *body, size_t len, int attach_fd)
{
    GT_ENSURE(len <= GT_SIM_MAX_FRAME, GT_E_LIMIT, "sim: frame of %zu bytes (at most %u)", len,
              GT_SIM_MAX_FRAME);
    uint8_t hdr[4];
    gt_store_u32le(hdr, (uint32_t)len);
    struct iovec iov[2] = {{.iov_base = hdr, .iov_len = sizeof hdr},
                           {.iov_base = (void *)body, .iov_len = len}};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctrl;
    memset(&ctrl, 0, sizeof ctrl);
    size_t total = sizeof hdr + len, sent = 0;
    bool fd_pending = attach_fd >= 0;
    while (sent < total) {
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        struct iovec cur[2];
        int n = 0;
        size_t skip = sent;
        for (int i = 0; i < 2; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            cur[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
            cur[n].iov_len = iov[i].iov_len - skip;
            skip = 0;
            n++;
        }
        msg.msg_iov = cur;
        msg.msg_iovlen = (size_t)n;
        if (fd_pending) {
            msg.msg_control = ctrl.buf;
            msg.msg_controllen = sizeof ctrl.buf;
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &attach_fd, sizeof(int));
        }
        ssize_t r = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EPIPE || errno == ECONNRESET) {
                return gt_errf(GT_E_PEER, "sim: peer closed the connection");
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return gt_errf(GT_E_TIMEOUT, "sim: peer does not read (send timed out)");
            }
            return gt_errf(GT_E_IO, "sim: send: %s", strerror(errno));
        }
        fd_pending = false;
        sent += (size_t)r;
    }
    return GT_OK;
}

static void take_fds(struct msghdr *msg, int *recv_fd)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int got = -1;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (recv_fd != NULL && *recv_fd < 0) {
                *recv_fd = got;
            } else {
                close(got);  // a descriptor nobody asked for
            }
        }
    }
}

static gt_err read_exact(int fd, uint8_t *p, size_t n, int *recv_fd, const gt_sim_watch *watch)
{
    size_t got = 0;
    while (got < n) {
        if (watch != NULL && watch->stop != NULL && *watch->stop) {
            return gt_errf(GT_E_STATE, "devd: stopping");
        }
        if (watch != NULL) {
            struct pollfd pfd[3] = {{.fd = fd, .events = POLLIN},
                                    {.fd = watch->fd, .events = POLLIN},
                                    {.fd = watch->on_watch2 != NULL ? watch->fd2 : -1,
                                     .events = POLLIN}};
            int timeout = watch->timeout_ms > 0 ? watch->timeout_ms : -1;
            bool by_deadline = false;
            if (watch->deadline > 0) {
                double left = watch->deadline - gt_now_seconds();
                int left_ms = left <= 0 ? 0 : (int)(left * 1000) + 1;
                if (timeout < 0 || left_ms < timeout) {
                    timeout = left_ms;
                    by_deadline = true;
                }
            }
            int pr = poll(pfd, 3, timeout);
            if (pr < 0) {
                if (errno == EINTR) {
                    continue;
                }
                return gt_errf(GT_E_IO, "sim: poll: %s", strerror(errno));
            }
            if (pr == 0) {
                if (by_deadline) {
                    return gt_errf(GT_E_TIMEOUT,
                                   "sim: deadline passed (a lease's end, or a handshake's)");
                }
                return gt_errf(GT_E_TIMEOUT, "sim: peer sent nothing for %d ms",
                               watch->timeout_ms);
            }
            if (watch->fd >= 0 && (pfd[1].revents & POLLIN) && watch->on_watch != NULL) {
                watch->on_watch(watch->ctx);
            }
            if (pfd[2].fd >= 0 && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
                watch->on_watch2(watch->ctx2);
                if (watch->abort2 != NULL && *watch->abort2) {
                    return gt_errf(GT_E_PEER, "devd: the lending trainer went away");
                }
            }
            if ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
                continue;
            }
        }
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(4 * sizeof(int))];
        } ctrl;
        struct iovec iov = {.iov_base = p + got, .iov_len = n - got};
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.buf;
        msg.msg_controllen = sizeof ctrl.buf;
        ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
                continue;
            }
            if (errno == ECONNRESET) {
                return gt_errf(GT_E_PEER, "sim: peer reset the connection");
            }
            return gt_errf(GT_E_IO, "sim: recv: %s", strerror(errno));
        }
        take_fds(&msg, recv_fd);
        if (r == 0) {
            return gt_errf(GT_E_PEER, "sim: peer closed the connection");
        }
        got += (size_t)r;
    }
    return GT_OK;
}

gt_err gt_sim_frame_recv(int fd, uint8_t *buf, size_t cap, size_t *len, int *recv_fd,
                         const gt_sim_watch *watch)
{
    *len = 0;
    if (recv_fd != NULL) {
        *recv_fd = -1;
    }
    uint8_t hdr[4] = {0};
    uint32_t n = 0;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, read_exact(fd, hdr, sizeof hdr, recv_fd, watch), fail);
    gt_reader r = gt_reader_init(hdr, sizeof hdr);
    GT_TRY_GOTO(err, gt_reader_u32le(&r, &n), fail);
    GT_ENSURE_GOTO(err, n <= cap && n <= GT_SIM_MAX_FRAME, fail, GT_E_LIMIT,
                   "sim: frame of %u bytes (at most %zu here)", n,
                   cap < GT_SIM_MAX_FRAME ? cap : (size_t)GT_SIM_MAX_FRAME);
    GT_TRY_GOTO(err, read_exact(fd, buf, n, recv_fd, watch), fail);
    *len = n;
    return GT_OK;
fail:
    if (recv_fd != NULL && *recv_fd >= 0) {
        close(*recv_fd);
        *recv_fd = -1;
    }
    return err;
}

gt_err gt_sim_msg_send(int fd, gt_sim_keys *keys, const gt_sim_msg *m, int attach_fd)
{
    uint8_t plain[GT_SIM_MAX_REC_PLAIN + GT_SIM_MAX_STATUS_MSG + 16];
    uint8_t body[sizeof plain + GT_AEAD_TAG_BYTES];
    gt_writer w = gt_writer_init_fixed(plain, sizeof plain);
    size_t body_len = 0;
    gt_err e = gt_sim_msg_write(&w, m);
    if (gt_is_ok(e)) {
        e = gt_sim_record_seal(keys, body, sizeof body, &body_len, plain, w.len);
    }
    if (gt_is_ok(e)) {
        e = gt_sim_frame_send(fd, body, body_len, attach_fd);
    }
    gt_secure_zero(plain, sizeof plain);
    return e;
}

gt_err gt_sim_msg_recv(int fd, gt_sim_keys *keys, uint8_t *rx, size_t cap, int *recv_fd,
                       const gt_sim_watch *watch, gt_sim_msg *m)
{
    size_t len = 0, plain_len = 0;
    uint8_t plain[GT_SIM_MAX_REC_PLAIN + GT_SIM_MAX_STATUS_MSG + 16];
    GT_TRY(gt_sim_frame_recv(fd, rx, cap, &len, recv_fd, watch));
    gt_err e = gt_sim_record_open(keys, plain, sizeof plain, &plain_len, (gt_span){rx, len});
    if (gt_is_ok(e)) {
        e = gt_sim_msg_parse((gt_span){plain, plain_len}, m);
    }
    gt_secure_zero(plain, sizeof plain);
    return e;
}
