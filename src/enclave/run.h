// Private to the enclave layer: the framed AES-GCM channel between the host and the enclave
// process (session.c), used by both ends (host.c, runtime.c).
#ifndef GT_ENCLAVE_RUN_H
#define GT_ENCLAVE_RUN_H

#include <gputravel/enclave.h>

// A frame on the socket: u32le length, then that many bytes.
#define GT_ENCLAVE_FRAME_MAX (GT_ENCLAVE_IMAGE_MAX_BYTES + 4096)

typedef struct {
    int fd;
    uint8_t send_key[GT_AEAD_KEY_BYTES], recv_key[GT_AEAD_KEY_BYTES];
    uint64_t send_counter, recv_counter;
    uint32_t send_dir, recv_dir;   // 1: host -> enclave, 2: enclave -> host
} gt_enclave_channel;

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
