// Owned byte buffers; freeing wipes unless the caller says the bytes are public.
#include <gputravel/util.h>

#include <stdlib.h>
#include <string.h>

gt_err gt_buf_reserve(gt_buf *b, size_t cap)
{
    if (cap <= b->cap) {
        return GT_OK;
    }
    size_t new_cap = b->cap ? b->cap : 64;
    while (new_cap < cap) {
        GT_ENSURE(new_cap <= SIZE_MAX / 2, GT_E_NOMEM, "buffer: %zu bytes is too large", cap);
        new_cap *= 2;
    }
    // Not realloc: the old block may hold secrets and must be wiped before it is released.
    uint8_t *p = malloc(new_cap);
    GT_ENSURE(p != NULL, GT_E_NOMEM, "buffer: cannot allocate %zu bytes", new_cap);
    if (b->len > 0) {
        memcpy(p, b->data, b->len);
    }
    gt_secure_zero(b->data, b->cap);
    free(b->data);
    b->data = p;
    b->cap = new_cap;
    return GT_OK;
}

gt_err gt_buf_append(gt_buf *b, const void *p, size_t n)
{
    GT_ENSURE(n <= SIZE_MAX - b->len, GT_E_NOMEM, "buffer: length overflow");
    GT_TRY(gt_buf_reserve(b, b->len + n));
    if (n > 0) {
        memcpy(b->data + b->len, p, n);
    }
    b->len += n;
    return GT_OK;
}

void gt_buf_free(gt_buf *b)
{
    gt_secure_zero(b->data, b->cap);
    gt_buf_free_nowipe(b);
}

void gt_buf_free_nowipe(gt_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
