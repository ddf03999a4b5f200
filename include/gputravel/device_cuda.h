// gputravel/device_cuda.h (GPUTRAVEL_CUDA builds only; it stands apart from device.h so that a CPU
// build never sees it): what the cuda backend offers beyond the device API,
// for tests, benches and (later) the travel protocol. docs/cuda.md describes the whole backend.
//
// Trusts: the CUDA driver and runtime. Does not trust: an IPC handle's claimed size (checked
// against the driver's own record of the allocation), ciphertext and tags (the tag is checked
// before any plaintext is produced on the device).
#ifndef GPUTRAVEL_DEVICE_CUDA_H
#define GPUTRAVEL_DEVICE_CUDA_H

#include <gputravel/device.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// True when a GPU the backend can use (compute capability 9.0 or newer: the build targets sm_90)
// is present. Otherwise false, with the reason ("no CUDA driver", "no GPU", "sm_80 is older
// than sm_90") in why. Tests use it to skip, never to pass.
bool gt_cuda_probe(char *why, size_t cap);

// ---- CUDA IPC handoff: a buffer of one process used by another ------------------------------
// The exporter (a holder that loaded its chunk) keeps the buffer allocated until the importer
// (the trainer) has returned it; the importer's gt_device_free wipes the memory and unmaps it.
// This is the primitive only: who may export what, and the flags the importer must set, belong
// to the lend/attach/return protocol (docs/cuda.md, follow-up).
#define GT_CUDA_IPC_HANDLE_BYTES 64

typedef struct {
    uint8_t handle[GT_CUDA_IPC_HANDLE_BYTES];  // cudaIpcMemHandle_t, opaque
    uint64_t bytes;                            // the buffer's size as the exporter states it
} gt_cuda_ipc_desc;

// Serialized form: the 64 handle bytes, then the size as u64 little-endian.
#define GT_CUDA_IPC_DESC_BYTES (GT_CUDA_IPC_HANDLE_BYTES + 8)
void gt_cuda_ipc_desc_write(uint8_t out[GT_CUDA_IPC_DESC_BYTES], const gt_cuda_ipc_desc *d);
GT_MUST_USE gt_err gt_cuda_ipc_desc_read(gt_reader *r, gt_cuda_ipc_desc *d);

// CUDA IPC shares the whole driver allocation that holds a pointer, and cudaMalloc may carve a
// small buffer out of a block it shares with other buffers; NVIDIA's guide therefore asks for
// IPC allocations sized in 2 MiB multiples. An exportable buffer is its own cudaMalloc of
// `bytes` rounded up to GT_CUDA_IPC_GRANULE (all of it zeroed, all of it wiped on free);
// gt_device_alloc's buffers cannot be exported.
#define GT_CUDA_IPC_GRANULE ((uint64_t)2 << 20)
GT_MUST_USE gt_err gt_device_cuda_alloc_exportable(gt_device *dev, uint64_t bytes,
                                                   uint32_t flags, gt_dbuf *out);

// Whether CUDA IPC may be used on this system: GT_E_UNSUPPORTED in protected PCIe (PPCIe) mode,
// where NVIDIA does not support it (NVML's CC state, read once per device). Export and import
// check it themselves; a trip checks it at lend, before any holder is contacted.
GT_MUST_USE gt_err gt_device_cuda_ipc_check(gt_device *dev);

// dev must be a cuda device; buf one of its own buffers made by gt_device_cuda_alloc_exportable
// (any other: GT_E_STATE).
GT_MUST_USE gt_err gt_device_cuda_ipc_export(gt_device *dev, gt_dbuf buf, gt_cuda_ipc_desc *out);
// Maps another process's buffer as a new handle with `flags` (GT_DBUF_NO_READBACK for holder
// data). Fails with GT_E_ARG if d->bytes exceeds what the driver's allocation holds from the
// mapped address on (base <= p, bytes <= base + size - p), and with GT_E_IO if the handle does
// not open (same process, other device, exporter gone).
GT_MUST_USE gt_err gt_device_cuda_ipc_import(gt_device *dev, const gt_cuda_ipc_desc *d,
                                             uint32_t flags, gt_dbuf *out);

// ---- AES-256-GCM open on the GPU ------------------------------------------------------------
// pt (offset 0, len bytes) = GCM-open of ct (offset 0, len bytes) under key, iv, aad, tag. The
// tag is computed on the device over the ciphertext first and compared (constant time) on the
// host; only when it matches does the CTR pass write plaintext into pt. On failure pt is left
// as it was (callers pass a fresh, zeroed buffer) and the error is GT_E_AUTH with no detail.
// pt may be ct (in place). pt must be a GT_DBUF_NO_READBACK buffer (else GT_E_POLICY before
// anything runs). The round keys live on the device only for the call and are wiped.
GT_MUST_USE gt_err gt_device_cuda_aes_gcm_open(gt_device *dev, gt_dbuf pt, gt_dbuf ct,
                                               uint64_t len, const uint8_t *aad, size_t aad_len,
                                               const uint8_t iv[12], const uint8_t tag[16],
                                               const uint8_t key[32]);
// The same over bytes [off, off + len) of both buffers (one GCM message there: a GTCHUNK2
// segment opened in place at its plaintext offset).
GT_MUST_USE gt_err gt_device_cuda_aes_gcm_open_at(gt_device *dev, gt_dbuf pt, gt_dbuf ct,
                                                  uint64_t off, uint64_t len, const uint8_t *aad,
                                                  size_t aad_len, const uint8_t iv[12],
                                                  const uint8_t tag[16], const uint8_t key[32]);

#endif
