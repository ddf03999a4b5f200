// The bounds-checked reader. Every comparison is `n > left`, never `pos + n > len`, which could
// wrap; a failed read leaves pos where it was.
#include <gputravel/util.h>

#include <string.h>

static gt_err need(const gt_reader *r, size_t n)
{
    size_t left = r->len - r->pos;
    if (n > left) {
        return gt_errf(GT_E_TRUNCATED, "need %zu bytes at offset %zu, %zu left", n, r->pos, left);
    }
    return GT_OK;
}

gt_err gt_reader_bytes(gt_reader *r, void *out, size_t n)
{
    GT_TRY(need(r, n));
    if (n > 0) {
        memcpy(out, r->data + r->pos, n);
    }
    r->pos += n;
    return GT_OK;
}

gt_err gt_reader_skip(gt_reader *r, size_t n)
{
    GT_TRY(need(r, n));
    r->pos += n;
    return GT_OK;
}

gt_err gt_reader_span(gt_reader *r, size_t n, gt_span *out)
{
    GT_TRY(need(r, n));
    out->data = r->data + r->pos;
    out->len = n;
    r->pos += n;
    return GT_OK;
}

gt_err gt_reader_sub(gt_reader *r, size_t n, gt_reader *sub)
{
    gt_span s = {0};
    GT_TRY(gt_reader_span(r, n, &s));
    *sub = gt_reader_init(s.data, s.len);
    return GT_OK;
}

gt_err gt_reader_expect_end(const gt_reader *r, const char *what)
{
    GT_ENSURE(r->pos == r->len, GT_E_FORMAT, "%s: %zu unexpected trailing bytes", what,
              r->len - r->pos);
    return GT_OK;
}

gt_err gt_reader_u8(gt_reader *r, uint8_t *v)
{
    return gt_reader_bytes(r, v, 1);
}

// Little- and big-endian integers of `bytes` bytes, assembled byte by byte (no alignment or
// host-order assumptions).
static gt_err read_le(gt_reader *r, size_t bytes, uint64_t *v)
{
    uint8_t b[8] = {0};
    GT_TRY(gt_reader_bytes(r, b, bytes));
    uint64_t x = 0;
    for (size_t i = bytes; i-- > 0;) {
        x = (x << 8) | b[i];
    }
    *v = x;
    return GT_OK;
}

static gt_err read_be(gt_reader *r, size_t bytes, uint64_t *v)
{
    uint8_t b[8] = {0};
    GT_TRY(gt_reader_bytes(r, b, bytes));
    uint64_t x = 0;
    for (size_t i = 0; i < bytes; i++) {
        x = (x << 8) | b[i];
    }
    *v = x;
    return GT_OK;
}

gt_err gt_reader_u16le(gt_reader *r, uint16_t *v)
{
    uint64_t x = 0;
    GT_TRY(read_le(r, 2, &x));
    *v = (uint16_t)x;
    return GT_OK;
}

gt_err gt_reader_u32le(gt_reader *r, uint32_t *v)
{
    uint64_t x = 0;
    GT_TRY(read_le(r, 4, &x));
    *v = (uint32_t)x;
    return GT_OK;
}

gt_err gt_reader_u64le(gt_reader *r, uint64_t *v)
{
    return read_le(r, 8, v);
}

gt_err gt_reader_i32le(gt_reader *r, int32_t *v)
{
    uint32_t x = 0;
    GT_TRY(gt_reader_u32le(r, &x));
    *v = (int32_t)x;
    return GT_OK;
}

gt_err gt_reader_u16be(gt_reader *r, uint16_t *v)
{
    uint64_t x = 0;
    GT_TRY(read_be(r, 2, &x));
    *v = (uint16_t)x;
    return GT_OK;
}

gt_err gt_reader_u24be(gt_reader *r, uint32_t *v)
{
    uint64_t x = 0;
    GT_TRY(read_be(r, 3, &x));
    *v = (uint32_t)x;
    return GT_OK;
}

gt_err gt_reader_u32be(gt_reader *r, uint32_t *v)
{
    uint64_t x = 0;
    GT_TRY(read_be(r, 4, &x));
    *v = (uint32_t)x;
    return GT_OK;
}

gt_err gt_reader_u64be(gt_reader *r, uint64_t *v)
{
    return read_be(r, 8, v);
}
