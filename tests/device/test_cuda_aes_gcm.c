// device/: AES-256-GCM open on the GPU (gt_device_cuda_aes_gcm_open) against OpenSSL on random
// inputs: plaintext and acceptance match; a wrong tag, ciphertext bit, AAD or IV is refused with
// GT_E_AUTH before any plaintext is written; a readable output buffer is refused (GT_E_POLICY)
// even with the right tag. The plaintext lands in NO_READBACK buffers, so the test reads it with
// gt_device_inproc_read (the trainer's trusted in-process read). Skipped (exit 77) without a
// usable GPU.
#include "testlib.h"

#include <gputravel/crypto.h>
#include <gputravel/device.h>

#include <stdlib.h>
#include <string.h>

#include <gputravel/device_cuda.h>

static bool have_gpu;
static char gpu_why[256];

#define NEED_GPU()                                                                   \
    do {                                                                             \
        if (!have_gpu) {                                                             \
            print_message("SKIPPED: %s\n", gpu_why);                                 \
            skip();                                                                  \
        }                                                                            \
    } while (0)

typedef struct {
    size_t len, alen;
    uint8_t key[32], iv[12], aad[64], *pt, *ct;  // ct: len + 16 (tag last)
} vec;

static void vec_make(vec *v, size_t len, size_t alen)
{
    memset(v, 0, sizeof *v);
    v->len = len;
    v->alen = alen;
    v->pt = malloc(len + 1);
    v->ct = malloc(len + 16);
    GT_ASSERT_OK(gt_random_bytes(v->key, 32));
    GT_ASSERT_OK(gt_random_bytes(v->iv, 12));
    GT_ASSERT_OK(gt_random_bytes(v->aad, sizeof v->aad));
    GT_ASSERT_OK(gt_random_bytes(v->pt, len + 1));
    size_t n = 0;
    GT_ASSERT_OK(gt_aead_seal(v->ct, len + 16, &n, v->pt, len, v->aad, alen, v->iv, v->key));
}

static void vec_free(vec *v)
{
    free(v->pt);
    free(v->ct);
}

// Opens v on the device (ct copied in, pt read back); in_place uses one buffer for both.
static gt_err gpu_open(gt_device *d, const vec *v, bool in_place, uint8_t *out,
                       const uint8_t *tag, const uint8_t *aad, const uint8_t *iv)
{
    uint64_t n = v->len > 0 ? v->len : 1;
    gt_dbuf ct = 0, pt = 0;
    GT_ASSERT_OK(gt_device_alloc(d, n, in_place ? GT_DBUF_NO_READBACK : 0, &ct));
    pt = ct;
    if (!in_place) {
        GT_ASSERT_OK(gt_device_alloc(d, n, GT_DBUF_NO_READBACK, &pt));
    }
    GT_ASSERT_OK(gt_device_copy_in(d, ct, 0, v->ct, v->len));
    gt_err e = gt_device_cuda_aes_gcm_open(d, pt, ct, v->len, aad, v->alen, iv, tag, v->key);
    GT_ASSERT_CODE(gt_device_copy_out(d, out, pt, 0, 1), GT_E_POLICY);
    GT_ASSERT_OK(gt_device_inproc_read(d, out, pt, 0, v->len));
    GT_ASSERT_OK(gt_device_free(d, ct));
    if (!in_place) {
        GT_ASSERT_OK(gt_device_free(d, pt));
    }
    return e;
}

static void matches_openssl(void **state)
{
    (void)state;
    NEED_GPU();
    gt_device *d = NULL;
    gt_device_config g = {.kind = GT_DEVICE_CUDA};
    GT_ASSERT_OK(gt_device_open(&d, &g));
    static const size_t lens[] = {0, 1, 16, 17, 1023, 1024, 1025, 65536 + 5, (3u << 20) + 13};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        vec v;
        vec_make(&v, lens[i], (i * 7) % 41);
        uint8_t *out = malloc(v.len + 1);
        GT_ASSERT_OK(gpu_open(d, &v, i % 2 == 1, out, v.ct + v.len, v.aad, v.iv));
        if (v.len > 0) {
            assert_memory_equal(out, v.pt, v.len);
        }
        free(out);
        vec_free(&v);
    }
    gt_device_close(d);
}

// Every tampering fails with GT_E_AUTH and leaves the output buffer as it was: for a separate
// buffer all zero (fresh), in place the ciphertext itself.
static void tampering_refused_before_plaintext(void **state)
{
    (void)state;
    NEED_GPU();
    gt_device *d = NULL;
    gt_device_config g = {.kind = GT_DEVICE_CUDA};
    GT_ASSERT_OK(gt_device_open(&d, &g));
    vec v;
    vec_make(&v, 100000 + 3, 20);
    uint8_t *out = malloc(v.len), *zero = calloc(1, v.len);
    uint8_t tag[16], iv[12], aad[64];
    memcpy(tag, v.ct + v.len, 16);
    tag[15] ^= 0x80;
    GT_ASSERT_CODE(gpu_open(d, &v, false, out, tag, v.aad, v.iv), GT_E_AUTH);
    assert_memory_equal(out, zero, v.len);
    GT_ASSERT_CODE(gpu_open(d, &v, true, out, tag, v.aad, v.iv), GT_E_AUTH);
    assert_memory_equal(out, v.ct, v.len);  // in place: still ciphertext
    memcpy(iv, v.iv, 12);
    iv[0] ^= 1;
    GT_ASSERT_CODE(gpu_open(d, &v, false, out, v.ct + v.len, v.aad, iv), GT_E_AUTH);
    assert_memory_equal(out, zero, v.len);
    memcpy(aad, v.aad, sizeof aad);
    aad[19] ^= 1;
    GT_ASSERT_CODE(gpu_open(d, &v, false, out, v.ct + v.len, aad, v.iv), GT_E_AUTH);
    assert_memory_equal(out, zero, v.len);
    v.ct[v.len - 1] ^= 4;  // last, partial block
    GT_ASSERT_CODE(gpu_open(d, &v, false, out, v.ct + v.len, v.aad, v.iv), GT_E_AUTH);
    assert_memory_equal(out, zero, v.len);
    free(out);
    free(zero);
    vec_free(&v);
    gt_device_close(d);
}

// The output must be NO_READBACK: a readable one is refused before any kernel runs, with the
// right tag, in place or not, and stays as it was.
static void readable_output_refused(void **state)
{
    (void)state;
    NEED_GPU();
    gt_device *d = NULL;
    gt_device_config g = {.kind = GT_DEVICE_CUDA};
    GT_ASSERT_OK(gt_device_open(&d, &g));
    vec v;
    vec_make(&v, 4096 + 5, 13);
    gt_dbuf ct = 0, pt = 0;
    GT_ASSERT_OK(gt_device_alloc(d, v.len, 0, &ct));
    GT_ASSERT_OK(gt_device_alloc(d, v.len, 0, &pt));
    GT_ASSERT_OK(gt_device_copy_in(d, ct, 0, v.ct, v.len));
    GT_ASSERT_ERR(gt_device_cuda_aes_gcm_open(d, pt, ct, v.len, v.aad, v.alen, v.iv,
                                              v.ct + v.len, v.key),
                  GT_E_POLICY, "NO_READBACK");
    GT_ASSERT_ERR(gt_device_cuda_aes_gcm_open(d, ct, ct, v.len, v.aad, v.alen, v.iv,
                                              v.ct + v.len, v.key),
                  GT_E_POLICY, "NO_READBACK");
    uint8_t *out = malloc(v.len), *zero = calloc(1, v.len);
    GT_ASSERT_OK(gt_device_copy_out(d, out, pt, 0, v.len));
    assert_memory_equal(out, zero, v.len);  // fresh, untouched
    GT_ASSERT_OK(gt_device_copy_out(d, out, ct, 0, v.len));
    assert_memory_equal(out, v.ct, v.len);  // in place: still ciphertext
    free(out);
    free(zero);
    vec_free(&v);
    gt_device_close(d);
}

int main(void)
{
    have_gpu = gt_cuda_probe(gpu_why, sizeof gpu_why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_openssl),
        cmocka_unit_test(tampering_refused_before_plaintext),
        cmocka_unit_test(readable_output_refused),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (!have_gpu) {
        printf("SKIPPED (no GPU): %s\n", gpu_why);
        return rc == 0 ? 77 : rc;
    }
    return rc;
}
