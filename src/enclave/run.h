// Private to the enclave layer: the framed AES-GCM channel between the host and the enclave
// process (session.c), used by both ends (host.c, runtime.c).
#ifndef GT_ENCLAVE_RUN_H
#define GT_ENCLAVE_RUN_H

#include <gputravel/enclave.h>

// A frame on the socket: u32le length, then that many bytes.
#define GT_ENCLAVE_FRAME_MAX (GT_ENCLAVE_IMAGE_MAX_BYTES + 4096)

// The shared-memory ring (ring.c): a memfd the host makes, seals against resizing and passes
// over the socket once the session exists; mapped by both processes. One slot per direction
// (the protocol has at most one message outstanding each way: ECALL, OCALL, ORET, ERET), each
// a 64-byte head (u32 seq: the futex word, u32 waiting: the receiver sleeps in a futex, u32
// length, u32 the sender's CPU + 1 (a scheduling hint), 48 reserved bytes, zero) and the frame: the same AES-GCM frame as on the socket
// without its length prefix (the length in the head is the AAD, as the prefix is there). The
// mapping is untrusted: what is read from it is copied out, then parsed and authenticated.
#define GT_ENCLAVE_RING_HEAD_BYTES 64
#define GT_ENCLAVE_RING_FRAME_MAX (13 + GT_ENCLAVE_MSG_MAX_PAYLOAD + GT_AEAD_TAG_BYTES)
#define GT_ENCLAVE_RING_SLOT_BYTES 36864   // the head and the largest frame, whole pages
#define GT_ENCLAVE_RING_BYTES (2 * GT_ENCLAVE_RING_SLOT_BYTES)
// How long a receiver spins on the seq word before it sleeps in the futex (TSC cycles), and
// how often a sleeping receiver checks that the other side's socket is still open.
#define GT_ENCLAVE_RING_SPIN_CYCLES 30000u

typedef struct {
    int fd;   // the socket: the whole channel, or only bootstrap and liveness once a ring is used
    gt_aead_keyed *seal, *open;   // the two direction keys, their schedules kept
    uint64_t send_counter, recv_counter;
    uint32_t send_dir, recv_dir;   // 1: host -> enclave, 2: enclave -> host
    // The ring, when attached (NULL: the socket carries the messages).
    uint8_t *ring_tx, *ring_rx;    // the slot this side writes, the one it reads
    uint32_t tx_seq, rx_seen;      // this side's own copies: never read back from the ring
    int live_check_ms;             // a sleeping receiver polls the socket this often
    uint32_t spin_cycles;          // how long a receiver spins before it sleeps
} gt_enclave_channel;

// The host's side: a sealed memfd of GT_ENCLAVE_RING_BYTES, mapped shared (fd to pass on).
GT_MUST_USE gt_err gt_enclave_ring_create(int *fd, uint8_t **map);
// The enclave's side: fd must be a memfd of exactly that size, sealed against shrinking and
// growing (else the host could make this process fault on a truncated mapping).
GT_MUST_USE gt_err gt_enclave_ring_map(int fd, uint8_t **map);
void gt_enclave_ring_unmap(uint8_t *map);
// From now on ch's messages go through the ring at map; the socket stays for liveness.
void gt_enclave_channel_use_ring(gt_enclave_channel *ch, uint8_t *map, bool host_side,
                                 int live_check_ms);
// A slot's head as copied out of the ring: GT_E_FORMAT when reserved bytes are set, GT_E_LIMIT
// when its length is larger than the slot can hold (cap) or shorter than a tag.
GT_MUST_USE gt_err gt_enclave_ring_head_parse(const uint8_t *head, size_t head_len, size_t cap,
                                              uint32_t *seq, uint32_t *len);
// Sends / receives one sealed frame (the AEAD part of session.c is shared with the socket).
GT_MUST_USE gt_err gt_enclave_ring_put(gt_enclave_channel *ch, const uint8_t *frame,
                                       uint32_t len);
// Waits for the next frame and copies it into out. GT_E_PEER when the socket hangs up.
GT_MUST_USE gt_err gt_enclave_ring_get(gt_enclave_channel *ch, gt_buf *out);
// Sends fd over the socket with SCM_RIGHTS / receives it (one byte carries it).
GT_MUST_USE gt_err gt_enclave_fd_send(int sock, int fd);
GT_MUST_USE gt_err gt_enclave_fd_recv(int sock, int *fd);

GT_MUST_USE gt_err gt_enclave_frame_send(int fd, const uint8_t *data, size_t len);
// Reads one frame of at most max bytes into out (replacing its contents). EOF: GT_E_PEER.
GT_MUST_USE gt_err gt_enclave_frame_recv(int fd, size_t max, gt_buf *out);

// Both ends derive the same keys: HKDF-SHA256 of the X25519 secret, salt = SHA-256 of
// host_nonce · host_pub · enclave_pub · the report, one key per direction.
GT_MUST_USE gt_err gt_enclave_channel_init(gt_enclave_channel *ch, int fd, bool host_side,
                                           const uint8_t shared[GT_X25519_BYTES],
                                           const uint8_t host_nonce[32],
                                           const uint8_t host_pub[GT_X25519_BYTES],
                                           const uint8_t enclave_pub[GT_X25519_BYTES],
                                           const uint8_t report[GT_SGX_REPORT_BYTES]);
GT_MUST_USE gt_err gt_enclave_channel_send(gt_enclave_channel *ch, const gt_enclave_msg *m);
// plain holds the decrypted message; m's payload points into it.
GT_MUST_USE gt_err gt_enclave_channel_recv(gt_enclave_channel *ch, gt_buf *frame, gt_buf *plain,
                                           gt_enclave_msg *m);
void gt_enclave_channel_wipe(gt_enclave_channel *ch);

#endif
