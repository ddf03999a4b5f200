// The GPU steps of a trip served by the trainer itself (cuda_trip.h): the holder's load,
// decryption and export, the trainer's import and release.
#include "cuda_trip.h"

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
                         const uint8_t key[GT_AEAD_KEY_BYTES], gt_dbuf *buf,
                         uint8_t ipc[GT_SIM_IPC_DESC_BYTES])
{
    *buf = 0;
    memset(ipc, 0, GT_SIM_IPC_DESC_BYTES);
    GT_ENSURE(len > GT_AEAD_TAG_BYTES, GT_E_ARG, "trip: a sealed chunk of %llu bytes",
              (unsigned long long)len);
    uint64_t n = len - GT_AEAD_TAG_BYTES;
    gt_dbuf b = 0;
    gt_err err = GT_OK;
    // its own 2 MiB-granular driver allocation: IPC shares whole allocations (device_cuda.h)
    GT_TRY(gt_device_cuda_alloc_exportable(dev, n, GT_DBUF_NO_READBACK, &b));
    // the ciphertext goes to the device unchanged; the tag stays on the host for the check
    GT_TRY_GOTO(err, gt_device_copy_in(dev, b, 0, ct_and_tag, n), fail);
    GT_TRY_GOTO(err, gt_device_cuda_aes_gcm_open(dev, b, b, n, aad, GT_SIM_LOAD_AAD_BYTES, iv,
                                                 ct_and_tag + n, key),
                fail);
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
