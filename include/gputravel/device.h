// gputravel/device.h: one API over every accelerator. Backends:
//   cpu  - in-process, ordinary memory, no protection (tests, baselines);
//   sim  - the emulated confidential device: a separate process (gputravel devd) reached through
//          an attested, AEAD-protected session and shared-memory bounce buffers;
//   cuda - a real NVIDIA GPU (built with GPUTRAVEL_CUDA).
//
// Buffers are opaque handles (ids, never addresses) with an owner session and flags. copy_in
// moves host bytes into device memory (encrypted on the way for sim/cuda-CC); copy_out is refused
// for GT_DBUF_NO_READBACK buffers. Kernels run on device memory through gt_device_launch with an
// op descriptor: the device checks every buffer range against the op's shapes once, at launch,
// and the kernels then trust their inputs (STYLE.md §6).
//
// Kernels live in this layer (src/device/ops_cpu.c, ops_cuda.cu) rather than in train/: the
// device executes them, and devd must run them without knowing about training. train/ builds op
// descriptors and sequences them.
#ifndef GPUTRAVEL_DEVICE_H
#define GPUTRAVEL_DEVICE_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { GT_DEVICE_CPU = 0, GT_DEVICE_SIM, GT_DEVICE_CUDA } gt_device_kind;

const char *gt_device_kind_name(gt_device_kind kind);
GT_MUST_USE gt_err gt_device_kind_parse(const char *name, gt_device_kind *kind);

typedef struct {
    gt_device_kind kind;
    int threads;              // OpenMP threads for cpu kernels (0: OpenMP's default)
    uint64_t mem_limit;       // bytes of device memory (0: backend default)
    const char *socket_path;  // sim: devd's Unix socket
} gt_device_config;

typedef struct gt_device gt_device;  // opaque
typedef uint64_t gt_dbuf;            // opaque handle; 0 is never a valid buffer

enum {
    GT_DBUF_NO_READBACK = 1u << 0,  // holder data: copy_out refused, wiped on free
};

GT_MUST_USE gt_err gt_device_open(gt_device **dev, const gt_device_config *cfg);
void gt_device_close(gt_device *dev);  // frees (and wipes) every buffer
gt_device_kind gt_device_get_kind(const gt_device *dev);

GT_MUST_USE gt_err gt_device_alloc(gt_device *dev, uint64_t bytes, uint32_t flags, gt_dbuf *out);
GT_MUST_USE gt_err gt_device_free(gt_device *dev, gt_dbuf buf);  // wipes
GT_MUST_USE gt_err gt_device_buf_size(gt_device *dev, gt_dbuf buf, uint64_t *bytes);
GT_MUST_USE gt_err gt_device_copy_in(gt_device *dev, gt_dbuf dst, uint64_t dst_offset,
                                     const void *src, uint64_t len);
GT_MUST_USE gt_err gt_device_copy_out(gt_device *dev, void *dst, gt_dbuf src,
                                      uint64_t src_offset, uint64_t len);
GT_MUST_USE gt_err gt_device_memset(gt_device *dev, gt_dbuf buf, uint64_t offset, int value,
                                    uint64_t len);

// ---- kernel launch --------------------------------------------------------------------------
// A reference into a buffer: bytes from `offset` on. Ops name what they read and write by dref.
typedef struct {
    gt_dbuf buf;
    uint64_t offset;  // bytes
} gt_dref;

#define GT_OP_MAX_REFS 12
#define GT_OP_MAX_INTS 8
#define GT_OP_MAX_FLOATS 8

// One kernel invocation. `kind` is a gt_op_kind (the op table, with each op's argument layout and
// size checks, is in src/device/ops.h). Fixed size, so it crosses devd's socket as one message.
typedef struct {
    uint32_t kind;
    gt_dref refs[GT_OP_MAX_REFS];
    int64_t ints[GT_OP_MAX_INTS];
    float floats[GT_OP_MAX_FLOATS];
} gt_op;

GT_MUST_USE gt_err gt_device_launch(gt_device *dev, const gt_op *op);
// Waits for launched work to finish (a no-op for synchronous backends).
GT_MUST_USE gt_err gt_device_sync(gt_device *dev);

#endif
