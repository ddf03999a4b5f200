// The shared-memory fast path between the host and the enclave process (run.h): one slot per
// direction in a sealed memfd both map. A sender writes the sealed frame, its length, then bumps
// seq; a receiver spins briefly on seq (both processes running: no system call at all), then
// sleeps in a futex on it, waking now and then to check that the other side's socket is still
// open (a killed process never bumps seq). The ring is as untrusted as the socket: a receiver
// copies the head and the frame out before it parses or authenticates a byte, so the other side
// cannot change them after the check, and the AES-GCM counters (session.c) refuse a replayed,
// reordered or altered frame exactly as on the socket.
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define OFF_SEQ 0
#define OFF_WAITING 4
#define OFF_LEN 8
#define OFF_CPU 12   // the sender's CPU + 1 when it wrote (0: unknown): a scheduling hint only
#define RESERVED_FROM 16
#define REQUIRED_SEALS (F_SEAL_SHRINK | F_SEAL_GROW)

static uint32_t *word(uint8_t *slot, size_t off)
{
    return (uint32_t *)(void *)(slot + off);
}

gt_err gt_enclave_ring_create(int *fd, uint8_t **map)
{
    *fd = -1;
    *map = NULL;
    int f = memfd_create("gputravel-enclave-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    GT_ENSURE(f >= 0, GT_E_IO, "enclave ring: memfd_create: %s", strerror(errno));
    if (ftruncate(f, GT_ENCLAVE_RING_BYTES) != 0 ||
        fcntl(f, F_ADD_SEALS, REQUIRED_SEALS | F_SEAL_SEAL) != 0) {
        int e = errno;
        close(f);
        return gt_errf(GT_E_IO, "enclave ring: sizing and sealing the memfd: %s", strerror(e));
    }
    void *m = mmap(NULL, GT_ENCLAVE_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        close(f);
        return gt_errf(GT_E_IO, "enclave ring: mmap: %s", strerror(e));
    }
    *fd = f;
    *map = m;
    return GT_OK;
}

gt_err gt_enclave_ring_map(int fd, uint8_t **map)
{
    *map = NULL;
    struct stat st;
    GT_ENSURE(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == GT_ENCLAVE_RING_BYTES,
              GT_E_FORMAT, "enclave ring: the file passed is not a %d-byte memfd",
              GT_ENCLAVE_RING_BYTES);
    int seals = fcntl(fd, F_GET_SEALS);
    GT_ENSURE(seals >= 0 && (seals & REQUIRED_SEALS) == REQUIRED_SEALS, GT_E_FORMAT,
              "enclave ring: the memfd is not sealed against resizing");
    void *m = mmap(NULL, GT_ENCLAVE_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    GT_ENSURE(m != MAP_FAILED, GT_E_IO, "enclave ring: mmap: %s", strerror(errno));
    *map = m;
    return GT_OK;
}

void gt_enclave_ring_unmap(uint8_t *map)
{
    if (map != NULL) {
        munmap(map, GT_ENCLAVE_RING_BYTES);
    }
}

void gt_enclave_channel_use_ring(gt_enclave_channel *ch, uint8_t *map, bool host_side,
                                 int live_check_ms)
{
    uint8_t *h2e = map, *e2h = map + GT_ENCLAVE_RING_SLOT_BYTES;
    ch->ring_tx = host_side ? h2e : e2h;
    ch->ring_rx = host_side ? e2h : h2e;
    // A fresh memfd reads as zeros: both sides count from 0 without reading the ring (the
    // other side may already have written its first message by the time this side attaches).
    ch->tx_seq = 0;
    ch->rx_seen = 0;
    ch->live_check_ms = live_check_ms > 0 ? live_check_ms : 10;
    // GPUTRAVEL_ENCLAVE_RING_SPIN=CYCLES overrides the spin (0: straight to the futex), for the
    // bench's measurements of either case.
    const char *spin = getenv("GPUTRAVEL_ENCLAVE_RING_SPIN");
    char *end = NULL;
    unsigned long long v = spin != NULL ? strtoull(spin, &end, 10) : 0;
    ch->spin_cycles = spin != NULL && *spin != '\0' && *end == '\0' && v <= UINT32_MAX
                          ? (uint32_t)v
                          : GT_ENCLAVE_RING_SPIN_CYCLES;
}

gt_err gt_enclave_ring_head_parse(const uint8_t *head, size_t head_len, size_t cap,
                                  uint32_t *seq, uint32_t *len)
{
    gt_reader r = gt_reader_init(head, head_len);
    uint32_t waiting = 0, cpu = 0;
    uint8_t reserved[GT_ENCLAVE_RING_HEAD_BYTES - RESERVED_FROM];
    GT_TRY(gt_reader_u32le(&r, seq));
    GT_TRY(gt_reader_u32le(&r, &waiting));
    GT_TRY(gt_reader_u32le(&r, len));
    GT_TRY(gt_reader_u32le(&r, &cpu));
    GT_TRY(gt_reader_bytes(&r, reserved, sizeof reserved));
    GT_TRY(gt_reader_expect_end(&r, "enclave ring head"));
    for (size_t i = 0; i < sizeof reserved; i++) {
        GT_ENSURE(reserved[i] == 0, GT_E_FORMAT, "enclave ring: reserved head byte %zu set",
                  RESERVED_FROM + i);
    }
    GT_ENSURE(*len <= cap && *len <= GT_ENCLAVE_RING_FRAME_MAX, GT_E_LIMIT,
              "enclave ring: a %u-byte frame in a %zu-byte slot", *len, cap);
    GT_ENSURE(*len >= GT_AEAD_TAG_BYTES, GT_E_FORMAT, "enclave ring: a %u-byte frame", *len);
    return GT_OK;
}

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    // Not FUTEX_PRIVATE: the word lives in a mapping shared between two processes.
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

gt_err gt_enclave_ring_put(gt_enclave_channel *ch, const uint8_t *frame, uint32_t len)
{
    GT_ENSURE(len <= GT_ENCLAVE_RING_FRAME_MAX, GT_E_LIMIT, "enclave ring: a %u-byte frame", len);
    uint8_t *slot = ch->ring_tx;
    memcpy(slot + GT_ENCLAVE_RING_HEAD_BYTES, frame, len);
    __atomic_store_n(word(slot, OFF_LEN), len, __ATOMIC_RELAXED);
    int cpu = sched_getcpu();
    __atomic_store_n(word(slot, OFF_CPU), cpu >= 0 ? (uint32_t)cpu + 1 : 0, __ATOMIC_RELAXED);
    ch->tx_seq++;
    // seq_cst store then load (Dekker with the receiver's waiting-then-seq): either it sees the
    // new seq before it sleeps, or this side sees it waiting and wakes it.
    __atomic_store_n(word(slot, OFF_SEQ), ch->tx_seq, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(word(slot, OFF_WAITING), __ATOMIC_SEQ_CST) != 0) {
        futex(word(slot, OFF_SEQ), FUTEX_WAKE, 1, NULL);
    }
    return GT_OK;
}

// The socket hung up: the other process is gone (killed, crashed or closed the session).
static bool peer_hung_up(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
}

// Whether spinning can help: not when the other side last ran on this CPU, where it cannot run
// while this side spins (two processes the scheduler put on one CPU would otherwise take turns
// wasting whole spins).
static uint32_t spin_budget(gt_enclave_channel *ch)
{
    uint32_t peer = __atomic_load_n(word(ch->ring_rx, OFF_CPU), __ATOMIC_RELAXED);
    int me = sched_getcpu();
    return peer != 0 && me >= 0 && peer == (uint32_t)me + 1 ? 0 : ch->spin_cycles;
}

// Until seq moves past rx_seen: spin (pause) for a bounded number of cycles, then sleep in the
// futex in slices, checking the socket between them.
static gt_err wait_seq(gt_enclave_channel *ch, uint32_t *seq_now)
{
    uint32_t *seq = word(ch->ring_rx, OFF_SEQ), *waiting = word(ch->ring_rx, OFF_WAITING);
    uint64_t t0 = __rdtsc();
    uint32_t s, budget = spin_budget(ch);
    while ((s = __atomic_load_n(seq, __ATOMIC_ACQUIRE)) == ch->rx_seen) {
        if (__rdtsc() - t0 < budget) {
            _mm_pause();
            continue;
        }
        __atomic_store_n(waiting, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(seq, __ATOMIC_SEQ_CST) == ch->rx_seen) {
            struct timespec ts = {ch->live_check_ms / 1000,
                                  (long)(ch->live_check_ms % 1000) * 1000000L};
            long r = futex(seq, FUTEX_WAIT, ch->rx_seen, &ts);
            GT_ENSURE(r == 0 || errno == EAGAIN || errno == EINTR || errno == ETIMEDOUT,
                      GT_E_IO, "enclave ring: futex wait: %s", strerror(errno));
        }
        __atomic_store_n(waiting, 0, __ATOMIC_RELAXED);
        if (__atomic_load_n(seq, __ATOMIC_ACQUIRE) == ch->rx_seen && peer_hung_up(ch->fd)) {
            return gt_errf(GT_E_PEER, "enclave ring: the other side closed its socket");
        }
    }
    *seq_now = s;
    return GT_OK;
}

gt_err gt_enclave_ring_get(gt_enclave_channel *ch, gt_buf *out)
{
    uint32_t s = 0, seq = 0, len = 0;
    GT_TRY(wait_seq(ch, &s));
    uint8_t head[GT_ENCLAVE_RING_HEAD_BYTES];
    memcpy(head, ch->ring_rx, sizeof head);  // once: what is checked is what is used
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    GT_TRY(gt_enclave_ring_head_parse(head, sizeof head,
                                      GT_ENCLAVE_RING_SLOT_BYTES - GT_ENCLAVE_RING_HEAD_BYTES,
                                      &seq, &len));
    ch->rx_seen = s;
    out->len = 0;
    GT_TRY(gt_buf_reserve(out, len));
    memcpy(out->data, ch->ring_rx + GT_ENCLAVE_RING_HEAD_BYTES, len);
    out->len = len;
    return GT_OK;
}

gt_err gt_enclave_fd_send(int sock, int fd)
{
    char byte = 'R';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } c;
    memset(&c, 0, sizeof c);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
                         .msg_controllen = sizeof c.buf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
    ssize_t n;
    do {
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    GT_ENSURE(n == 1, GT_E_PEER, "enclave ring: passing the memfd: %s", strerror(errno));
    return GT_OK;
}

gt_err gt_enclave_fd_recv(int sock, int *fd)
{
    *fd = -1;
    char byte = 0;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } c;
    memset(&c, 0, sizeof c);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
                         .msg_controllen = sizeof c.buf};
    ssize_t n;
    do {
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    GT_ENSURE(n == 1, GT_E_PEER, "enclave ring: no memfd arrived");
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    GT_ENSURE(h != NULL && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
                  h->cmsg_len == CMSG_LEN(sizeof(int)) && !(msg.msg_flags & MSG_CTRUNC),
              GT_E_FORMAT, "enclave ring: the byte came without exactly one file descriptor");
    memcpy(fd, CMSG_DATA(h), sizeof *fd);
    return GT_OK;
}
