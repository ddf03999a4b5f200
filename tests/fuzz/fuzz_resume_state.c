// Fuzz: a resume state comes back to the device from the trainer's disk, through anyone's hands.
// Checks: header parsing and opening never read out of bounds; what parses is self-consistent
// (sizes, label count, header length, file size); a failed parse or open leaves nothing behind
// (header zeroed, no body); an opened state has exactly the announced body; the two-pass open
// (gt_resume_verify, gt_resume_decrypt_to) accepts exactly what opens and hands out its body. The secret (32 x
// 0x07), device id (32 x 0x01) and agreement hash (32 x 0x02) are fixed: the seeds ok_* were
// sealed under them (with Python's cryptography package), so they reach the decryption.
#include <gputravel/seal.h>

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool header_consistent(const gt_resume_header *h, size_t size)
{
    return h->version == GT_RESUME_VERSION && h->label_count <= GT_RESUME_MAX_LABELS &&
           h->header_len == GT_RESUME_FIXED_BYTES + (size_t)h->label_count * 16 + 12 &&
           h->header_len <= size && h->params_bytes > 0 && h->params_bytes % 4 == 0 &&
           h->params_bytes <= GT_RESUME_MAX_PARAM_BYTES && h->m_bytes == h->v_bytes &&
           (h->m_bytes == 0 || h->m_bytes == h->params_bytes) && h->loader.shuffle <= 1 &&
           h->model.padded_vocab_size >= h->model.vocab_size &&
           gt_resume_file_bytes(h) == h->header_len + h->params_bytes + 2 * h->m_bytes + 16;
}

typedef struct {
    const gt_buf *body;
    size_t next;
} two_pass_cmp;

static gt_err cmp_put(void *ctx, uint64_t at, const uint8_t *data, size_t n)
{
    two_pass_cmp *c = ctx;
    if (at != c->next || at + n > c->body->len || memcmp(c->body->data + at, data, n) != 0) {
        __builtin_trap();
    }
    c->next += n;
    return GT_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gt_resume_header h;
    gt_err e = gt_resume_header_parse(&h, data, size);
    if (!gt_is_ok(e)) {
        if (h.header_len != 0 || h.label_count != 0 || h.params_bytes != 0) {
            __builtin_trap();  // nothing half-parsed survives
        }
        return 0;
    }
    if (!header_consistent(&h, size)) {
        __builtin_trap();
    }
    uint8_t secret[GT_RESUME_SECRET_BYTES], id[GT_RESUME_DEVICE_ID_BYTES];
    uint8_t agreement[GT_SHA256_BYTES];
    memset(secret, 0x07, sizeof secret);
    memset(id, 0x01, sizeof id);
    memset(agreement, 0x02, sizeof agreement);
    gt_buf body = {0};
    e = gt_resume_open((gt_span){data, size}, secret, id, agreement, &h, &body);
    if (gt_is_ok(e) ? body.len != h.params_bytes + h.m_bytes + h.v_bytes ||
                          size != gt_resume_file_bytes(&h)
                    : body.len != 0 || h.header_len != 0) {
        __builtin_trap();
    }
    // The two-pass open (devd under paging) agrees: it verifies exactly what opens, and its
    // second pass hands out exactly the opened body, in order.
    static gt_resume_header h2;
    gt_err e2 = gt_resume_verify((gt_span){data, size}, secret, id, agreement, &h2);
    if (gt_is_ok(e2) != gt_is_ok(e) || (!gt_is_ok(e2) && h2.header_len != 0)) {
        __builtin_trap();
    }
    if (gt_is_ok(e2)) {
        two_pass_cmp c = {.body = &body};
        if (!gt_is_ok(gt_resume_decrypt_to((gt_span){data, size}, secret, &h2, cmp_put, &c)) ||
            c.next != body.len) {
            __builtin_trap();
        }
    }
    gt_buf_free(&body);
    return 0;
}
