// The writer: a fixed caller buffer with a hard cap, or a growing heap buffer.
#include <gputravel/util.h>

#include <stdlib.h>
#include <string.h>

gt_err gt_writer_reserve(gt_writer *w, size_t n, uint8_t **at)
{
    if (n > w->cap - w->len) {
        GT_ENSURE(w->dynamic, GT_E_LIMIT, "writer: %zu bytes do not fit (%zu left)", n,
                  w->cap - w->len);
        GT_ENSURE(n <= SIZE_MAX / 2 - w->len, GT_E_NOMEM, "writer: length overflow");
        gt_buf b = {.data = w->data, .len = w->len, .cap = w->cap};
        GT_TRY(gt_buf_reserve(&b, w->len + n));
        w->data = b.data;
        w->cap = b.cap;
    }
    *at = w->data + w->len;
    w->len += n;
    return GT_OK;
}

void gt_writer_free(gt_writer *w)
{
    if (w->dynamic) {
        gt_secure_zero(w->data, w->cap);
        free(w->data);
    }
    w->data = NULL;
    w->cap = 0;
    w->len = 0;
}

gt_err gt_writer_bytes(gt_writer *w, const void *p, size_t n)
{
    uint8_t *at = NULL;
    GT_TRY(gt_writer_reserve(w, n, &at));
    if (n > 0) {
        memcpy(at, p, n);
    }
    return GT_OK;
}

gt_err gt_writer_u8(gt_writer *w, uint8_t v)
{
    return gt_writer_bytes(w, &v, 1);
}

static gt_err write_le(gt_writer *w, uint64_t v, size_t bytes)
{
    uint8_t b[8];
    for (size_t i = 0; i < bytes; i++) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
    return gt_writer_bytes(w, b, bytes);
}

static gt_err write_be(gt_writer *w, uint64_t v, size_t bytes)
{
    uint8_t b[8];
    for (size_t i = 0; i < bytes; i++) {
        b[bytes - 1 - i] = (uint8_t)(v >> (8 * i));
    }
    return gt_writer_bytes(w, b, bytes);
}

gt_err gt_writer_u16le(gt_writer *w, uint16_t v) { return write_le(w, v, 2); }
gt_err gt_writer_u32le(gt_writer *w, uint32_t v) { return write_le(w, v, 4); }
gt_err gt_writer_u64le(gt_writer *w, uint64_t v) { return write_le(w, v, 8); }
gt_err gt_writer_i32le(gt_writer *w, int32_t v) { return write_le(w, (uint32_t)v, 4); }
gt_err gt_writer_u16be(gt_writer *w, uint16_t v) { return write_be(w, v, 2); }
gt_err gt_writer_u32be(gt_writer *w, uint32_t v) { return write_be(w, v, 4); }
gt_err gt_writer_u64be(gt_writer *w, uint64_t v) { return write_be(w, v, 8); }
