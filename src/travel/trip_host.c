// The host-memory handoff of a trainer-served trip (trip_host.h): a sealed memfd passed with
// RETURN_IPC, copied into a NO_READBACK cpu buffer. No confidentiality (host memory); it carries
// the protocol, the checks and the accounting of the CUDA handoff on machines without a GPU.
#include "trip_host.h"

#include <gputravel/crypto.h>
#include <gputravel/seal.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char HOST_MAGIC[16] = "gputravel-host";
#define HOST_PAD (GT_SIM_IPC_DESC_BYTES - 16 - 8)

static gt_err import(void *ctx, const uint8_t ipc[GT_SIM_IPC_DESC_BYTES], int fd, uint64_t bytes,
                     gt_dbuf *out)
{
    gt_device *dev = ctx;
    *out = 0;
    uint8_t magic[16], pad[HOST_PAD], zeros[HOST_PAD] = {0};
    uint64_t claim = 0;
    gt_reader r = gt_reader_init(ipc, GT_SIM_IPC_DESC_BYTES);
    GT_TRY(gt_reader_bytes(&r, magic, sizeof magic));
    GT_TRY(gt_reader_bytes(&r, pad, sizeof pad));
    GT_TRY(gt_reader_u64le(&r, &claim));
    GT_TRY(gt_reader_expect_end(&r, "host trip descriptor"));
    GT_ENSURE(memcmp(magic, HOST_MAGIC, sizeof magic) == 0 && memcmp(pad, zeros, sizeof pad) == 0,
              GT_E_FORMAT, "trip: the handoff is not a host-memory descriptor (a cuda holder "
              "handing over to a cpu trainer?)");
    GT_ENSURE(claim == bytes, GT_E_ARG,
              "trip: the handed-over buffer claims %llu bytes, the chunk has %llu",
              (unsigned long long)claim, (unsigned long long)bytes);
    GT_ENSURE(fd >= 0, GT_E_FORMAT, "trip: no memory came with the host-memory handoff");
    struct stat st;
    GT_ENSURE(fstat(fd, &st) == 0 && S_ISREG(st.st_mode), GT_E_FORMAT,
              "trip: the handed-over descriptor is not a memory file");
    int seals = fcntl(fd, F_GET_SEALS);
    GT_ENSURE(seals >= 0 && (seals & F_SEAL_SHRINK), GT_E_POLICY,
              "trip: the handed-over memory is not sealed against shrinking");
    GT_ENSURE((uint64_t)st.st_size >= bytes, GT_E_ARG,
              "trip: the handed-over memory holds %llu bytes, the chunk has %llu",
              (unsigned long long)st.st_size, (unsigned long long)bytes);
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ, MAP_SHARED, fd, 0);
    GT_ENSURE(p != MAP_FAILED, GT_E_IO, "trip: mmap of the handed-over memory: %s",
              strerror(errno));
    gt_dbuf b = 0;
    gt_err e = gt_device_alloc(dev, bytes ? bytes : 2, GT_DBUF_NO_READBACK, &b);
    if (gt_is_ok(e)) {
        e = gt_device_copy_in(dev, b, 0, p, bytes);
    }
    munmap(p, bytes ? bytes : 1);
    if (!gt_is_ok(e) && b != 0) {
        gt_err ignored = gt_device_free(dev, b);
        (void)ignored;
        b = 0;
    }
    *out = b;
    return e;
}

static gt_err release(void *ctx, gt_dbuf buf)
{
    return gt_device_free(ctx, buf);  // wipes
}

gt_ipc_trip_importer gt_host_trip_importer(gt_device *dev)
{
    return (gt_ipc_trip_importer){.ctx = dev, .import = import, .release = release};
}

gt_err gt_host_trip_load(const uint8_t *ct_and_tag, uint64_t len,
                         const uint8_t iv[GT_AEAD_IV_BYTES],
                         const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                         const uint8_t key[GT_AEAD_KEY_BYTES], uint32_t seg_bytes,
                         gt_host_trip_buf *out, uint8_t ipc[GT_SIM_IPC_DESC_BYTES])
{
    *out = (gt_host_trip_buf){.fd = -1};
    memset(ipc, 0, GT_SIM_IPC_DESC_BYTES);
    uint64_t n = 0;
    GT_TRY(gt_err_wrap(gt_chunk_plain_bytes(len, seg_bytes, &n), "trip"));
    GT_ENSURE(n <= SIZE_MAX / 2, GT_E_ARG, "trip: a sealed chunk of %llu bytes",
              (unsigned long long)len);
    const size_t map = n ? (size_t)n : 1;
    gt_host_trip_buf b = {.fd = -1, .bytes = n};
    gt_err err = GT_OK;
    b.fd = memfd_create("gttrip-chunk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    GT_ENSURE(b.fd >= 0, GT_E_IO, "trip: memfd_create: %s", strerror(errno));
    GT_ENSURE_GOTO(err, ftruncate(b.fd, (off_t)n) == 0, fail, GT_E_IO, "trip: ftruncate: %s",
                   strerror(errno));
    void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
    GT_ENSURE_GOTO(err, p != MAP_FAILED, fail, GT_E_IO, "trip: mmap: %s", strerror(errno));
    b.mem = p;
    GT_TRY_GOTO(err, gt_chunk_body_open(b.mem, ct_and_tag, len, n, seg_bytes, 2, iv, aad, key),
                fail);
    // The trainer maps it read-only and copies it: a shrink under its copy would be SIGBUS.
    GT_ENSURE_GOTO(err, fcntl(b.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0,
                   fail, GT_E_IO, "trip: sealing the memfd: %s", strerror(errno));
    memcpy(ipc, HOST_MAGIC, sizeof HOST_MAGIC);
    gt_store_u64le(ipc + GT_SIM_IPC_DESC_BYTES - 8, n);
    *out = b;
    return GT_OK;
fail:
    gt_host_trip_free(&b);
    return err;
}

void gt_host_trip_free(gt_host_trip_buf *b)
{
    if (b->mem != NULL) {
        size_t map = b->bytes ? (size_t)b->bytes : 1;
        gt_secure_zero(b->mem, (size_t)b->bytes);
        munmap(b->mem, map);
    }
    if (b->fd >= 0) {
        close(b->fd);
    }
    *b = (gt_host_trip_buf){.fd = -1};
}
