// The GPU steps of a trip served by the trainer itself (cuda_trip.h): the holder's load,
// decryption and export, the trainer's import and release.
#include "cuda_trip.h"

#include <gputravel/seal.h>

#include <string.h>

_Static_assert(GT_SIM_IPC_DESC_BYTES == GT_CUDA_IPC_DESC_BYTES,
               "RETURN_IPC carries a gt_cuda_ipc_desc in its wire form");

static gt_err import(void *ctx, const uint8_t ipc[GT_SIM_IPC_DESC_BYTES], int fd, uint64_t bytes,
                     gt_dbuf *out)
{
    gt_device *dev = ctx;
    *out = 0;
    GT_ENSURE(fd < 0, GT_E_FORMAT, "trip: a file descriptor came with a CUDA IPC handoff (a "
              "host-memory handoff to a cuda trainer)");
    gt_cuda_ipc_desc desc;
    gt_reader r = gt_reader_init(ipc, GT_SIM_IPC_DESC_BYTES);
    GT_TRY(gt_cuda_ipc_desc_read(&r, &desc));
    GT_TRY(gt_reader_expect_end(&r, "cuda ipc descriptor"));
    GT_ENSURE(desc.bytes == bytes, GT_E_ARG,
              "trip: the handed-over buffer claims %llu bytes, the chunk has %llu",
              (unsigned long long)desc.bytes, (unsigned long long)bytes);
    return gt_device_cuda_ipc_import(dev, &desc, GT_DBUF_NO_READBACK, out);
}

static gt_err release(void *ctx, gt_dbuf buf)
{
    return gt_device_free(ctx, buf);  // wipes, then unmaps (cuda_backend.c)
}

gt_ipc_trip_importer gt_cuda_trip_importer(gt_device *dev)
{
    return (gt_ipc_trip_importer){.ctx = dev, .import = import, .release = release};
}

gt_err gt_cuda_trip_load(gt_device *dev, const uint8_t *ct_and_tag, uint64_t len,
                         const uint8_t iv[GT_AEAD_IV_BYTES],
                         const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                         const uint8_t key[GT_AEAD_KEY_BYTES], uint32_t seg_bytes,
                         gt_dbuf *buf, uint8_t ipc[GT_SIM_IPC_DESC_BYTES])
{
    *buf = 0;
    memset(ipc, 0, GT_SIM_IPC_DESC_BYTES);
    uint64_t n = 0;
    GT_TRY(gt_err_wrap(gt_chunk_plain_bytes(len, seg_bytes, &n), "trip"));
    GT_ENSURE(n > 0, GT_E_ARG, "trip: a sealed chunk of %llu bytes", (unsigned long long)len);
    const uint64_t nseg = gt_chunk_seg_count(n, seg_bytes);
    gt_dbuf b = 0;
    gt_err err = GT_OK;
    // its own 2 MiB-granular driver allocation: IPC shares whole allocations (device_cuda.h)
    GT_TRY(gt_device_cuda_alloc_exportable(dev, n, GT_DBUF_NO_READBACK, &b));
    // each segment's ciphertext goes to the device unchanged, where its plaintext will be; the
    // tags stay on the host for the checks
    for (uint64_t j = 0; j < nseg; j++) {
        uint64_t at = seg_bytes ? j * seg_bytes : 0;
        uint64_t m = gt_chunk_seg_plain_bytes(n, seg_bytes, j);
        const uint8_t *ct = ct_and_tag + gt_chunk_seg_body_offset(seg_bytes, j);
        uint8_t nonce[GT_AEAD_IV_BYTES], sa[GT_CHUNK_SEG_AAD_BYTES];
        size_t sa_len = 0;
        gt_chunk_seg_nonce(nonce, iv, seg_bytes, j);
        gt_chunk_seg_aad(sa, &sa_len, aad, seg_bytes, j, nseg);
        GT_TRY_GOTO(err, gt_device_copy_in(dev, b, at, ct, m), fail);
        GT_TRY_GOTO(err, gt_device_cuda_aes_gcm_open_at(dev, b, b, at, m, sa, sa_len, nonce,
                                                        ct + m, key),
                    fail);
    }
    gt_cuda_ipc_desc desc;
    GT_TRY_GOTO(err, gt_device_cuda_ipc_export(dev, b, &desc), fail);
    gt_cuda_ipc_desc_write(ipc, &desc);
    *buf = b;
    return GT_OK;
fail:
    {
        gt_err e = gt_device_free(dev, b);  // wipes
        (void)e;
    }
    return err;
}
