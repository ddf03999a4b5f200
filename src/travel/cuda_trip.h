// Internal to device/ (GPUTRAVEL_CUDA only): the GPU steps of a trip served by the trainer
// itself (trip_ipc.h; docs/cuda.md "Travelling with a real GPU").
#ifndef GT_DEVICE_CUDA_TRIP_H
#define GT_DEVICE_CUDA_TRIP_H

#include <gputravel/device_cuda.h>
#include "trip_ipc.h"

// Trainer: the importer for gt_ipc_trip_wait on the trainer's cuda device. import: the
// descriptor (gt_cuda_ipc_desc wire form, read through gt_reader at its exact size) must claim
// exactly the chunk's size, and the driver's record of the allocation must hold it; the buffer
// is mapped GT_DBUF_NO_READBACK. release: gt_device_free, which wipes the holder's memory and
// unmaps it.
gt_ipc_trip_importer gt_cuda_trip_importer(gt_device *dev);

// Holder: its sealed chunk (ciphertext || tag, len bytes with the tag, as stored; GTCHUNK2,
// seg_bytes != 0: each segment's ciphertext goes to its plaintext offset, the tags stay on the
// host) is copied to its own GPU and opened there in place with gt_device_cuda_aes_gcm_open_at,
// one call per segment (each tag is checked before its plaintext is written; the key goes into
// those calls only). OK: *buf (a
// NO_READBACK buffer of len - 16 bytes holding the plaintext) is exported into ipc; keep it
// allocated until the trainer says RELEASED, then gt_device_free it. Tag failure: GT_E_AUTH,
// the buffer is wiped and freed, *buf = 0 and ipc zeroed: nothing to hand over.
GT_MUST_USE gt_err gt_cuda_trip_load(gt_device *dev, const uint8_t *ct_and_tag, uint64_t len,
                                     const uint8_t iv[GT_AEAD_IV_BYTES],
                                     const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                     const uint8_t key[GT_AEAD_KEY_BYTES], uint32_t seg_bytes,
                                     gt_dbuf *buf, uint8_t ipc[GT_SIM_IPC_DESC_BYTES]);

#endif
