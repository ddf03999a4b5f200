// Internal to device/: the host-memory handoff of a trip served by the trainer (trip_ipc.h) for a
// trainer on the cpu device. The holder opens its sealed chunk with OpenSSL in its own process
// into a sealed memfd and passes the descriptor with RETURN_IPC (SCM_RIGHTS over the trip's Unix
// socket); the trainer copies it into a NO_READBACK cpu buffer; at RELEASED the holder wipes and
// closes its memfd. The cpu device keeps nothing confidential (it is host memory the trainer's
// and the holder's OS can read): this path shows the protocol and the accounting, not
// protection. With a GPU the same trip hands over a CUDA IPC buffer (cuda_trip.h).
//
// Descriptor (GT_SIM_IPC_DESC_BYTES): "gputravel-host\0\0" | 48 zero bytes | u64le plaintext
// bytes. Read at its exact size; anything else is GT_E_FORMAT.
#ifndef GT_DEVICE_HOST_TRIP_H
#define GT_DEVICE_HOST_TRIP_H

#include "trip_ipc.h"

// Trainer: the importer for gt_ipc_trip_wait on a cpu device. import: the descriptor must claim
// exactly the chunk's size (GT_E_ARG), a memfd must come with it (GT_E_FORMAT), sealed against
// shrinking (GT_E_POLICY: else the holder could truncate it under the copy) and at least that
// large (GT_E_ARG); its bytes are copied into a fresh NO_READBACK buffer. release:
// gt_device_free (wipes).
gt_ipc_trip_importer gt_host_trip_importer(gt_device *dev);

typedef struct {
    int fd;        // the memfd (-1: none)
    uint8_t *mem;  // its mapping in the holder
    uint64_t bytes;
} gt_host_trip_buf;

// Holder: opens ct_and_tag (the chunk's body as stored, len bytes: ciphertext || tag, or for
// GTCHUNK2, seg_bytes != 0, each segment's, opened on two threads) with OpenSSL into a fresh
// memfd, seals its size and writes the descriptor into ipc. Tag failure: GT_E_AUTH, nothing
// kept (*out->fd = -1, ipc zeroed). Keep *out until the trainer says RELEASED, then
// gt_host_trip_free it.
GT_MUST_USE gt_err gt_host_trip_load(const uint8_t *ct_and_tag, uint64_t len,
                                     const uint8_t iv[GT_AEAD_IV_BYTES],
                                     const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                     const uint8_t key[GT_AEAD_KEY_BYTES], uint32_t seg_bytes,
                                     gt_host_trip_buf *out, uint8_t ipc[GT_SIM_IPC_DESC_BYTES]);
// Holder: wipes the plaintext, unmaps, closes the memfd.
void gt_host_trip_free(gt_host_trip_buf *b);

#endif
