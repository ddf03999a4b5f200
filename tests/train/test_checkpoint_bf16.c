// train/: llm.c version 5 (bf16) checkpoints: the conversion's known answers, round trips
// through files, a file built by hand from llm.c's header rules, and resuming from one.
#include "testlib.h"

#include <gputravel/device.h>
#include <gputravel/train.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const gt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 90, .padded_vocab_size = 128,
                                   .num_layers = 2, .num_heads = 2, .channels = 16};

static float from_bits(uint32_t u)
{
    float f = 0.0f;
    memcpy(&f, &u, 4);
    return f;
}

// Round to nearest, ties to even, on the upper 16 bits of the fp32; NaN stays NaN; overflow to
// infinity (IEEE 754 rules for bfloat16, what PyTorch's and CUDA's conversions do).
static void conversion_known_answers(void **state)
{
    (void)state;
    struct {
        uint32_t in;
        uint16_t out;
    } rows[] = {
        {0x3f800000, 0x3f80},  // 1.0
        {0x40490fdb, 0x4049},  // pi: the lower half 0x0fdb rounds down
        {0x3f808000, 0x3f80},  // a tie, the even neighbour is below
        {0x3f818000, 0x3f82},  // a tie, the even neighbour is above
        {0x3f808001, 0x3f81},  // just above the tie
        {0x80000000, 0x8000},  // -0
        {0x7f800000, 0x7f80},  // inf
        {0x7f7fffff, 0x7f80},  // FLT_MAX rounds to inf
        {0x00000001, 0x0000},  // the smallest subnormal rounds to 0
        {0xc2f6e979, 0xc2f7},  // -123.456
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        uint16_t got = gt_bf16_from_f32(from_bits(rows[i].in));
        if (got != rows[i].out) {
            fail_msg("%08x: %04x, expected %04x", rows[i].in, got, rows[i].out);
        }
    }
    assert_true(isnan(gt_bf16_to_f32(gt_bf16_from_f32(from_bits(0x7fc00001)))));
    assert_true(isnan(gt_bf16_to_f32(gt_bf16_from_f32(from_bits(0x7f800001)))));  // sNaN: no inf
    assert_true(gt_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(gt_bf16_to_f32(0xc2f7) == -123.5f);
}

typedef struct {
    gt_device *dev;
    char dir[256], a[512], b[512];
} fixture;

static void fixture_open(fixture *f)
{
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 1};
    GT_ASSERT_OK(gt_device_open(&f->dev, &dc));
    gt_test_tmpdir(f->dir, sizeof f->dir);
    GT_ASSERT_OK(gt_path_join(f->a, sizeof f->a, f->dir, "a.bin"));
    GT_ASSERT_OK(gt_path_join(f->b, sizeof f->b, f->dir, "b.bin"));
}

static void fixture_close(fixture *f)
{
    gt_device_close(f->dev);
    gt_test_rmtree(f->dir);
}

// Save as bf16: llm.c's header (magic, version 5, config), 2 bytes a parameter, each the
// nearest bf16 (checked against both neighbours); loaded back, the values are the rounded ones;
// saved again, the same bytes; through fp32 and back, the same values.
static void round_trip(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f);
    gt_gpt2 *m = NULL, *r = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, f.dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 11));
    size_t n = gt_gpt2_num_params(m);
    float *p = malloc(n * 4), *q = malloc(n * 4);
    GT_ASSERT_OK(gt_gpt2_params_read(m, p, n));
    GT_ASSERT_OK(gt_gpt2_save_bf16(m, f.a));
    gt_buf raw = {0};
    GT_ASSERT_OK(gt_file_read_all(f.a, 64u << 20, &raw));
    assert_int_equal(raw.len, 1024 + 2 * n);
    gt_reader rd = gt_reader_init(raw.data, raw.len);
    int32_t h[8] = {0};
    for (int i = 0; i < 8; i++) {
        GT_ASSERT_OK(gt_reader_i32le(&rd, &h[i]));
    }
    const int32_t want[8] = {20240326, 5, 16, 90, 2, 2, 16, 128};
    assert_memory_equal(h, want, sizeof want);
    for (size_t i = 0; i < n; i++) {
        uint16_t b = (uint16_t)(raw.data[1024 + 2 * i] | raw.data[1024 + 2 * i + 1] << 8);
        double x = p[i], got = gt_bf16_to_f32(b);
        double up = gt_bf16_to_f32((uint16_t)(b + 1)), down = gt_bf16_to_f32((uint16_t)(b - 1));
        if (fabs(got - x) > fabs(up - x) || fabs(got - x) > fabs(down - x)) {
            fail_msg("param %zu: %.9g written as %.9g, not the nearest bf16", i, x, got);
        }
    }
    GT_ASSERT_OK(gt_gpt2_load(&r, f.dev, f.a));
    GT_ASSERT_OK(gt_gpt2_params_read(r, q, n));
    for (size_t i = 0; i < n; i++) {
        assert_true(q[i] == gt_bf16_to_f32(gt_bf16_from_f32(p[i])));
    }
    GT_ASSERT_OK(gt_gpt2_save_bf16(r, f.b));
    gt_buf again = {0};
    GT_ASSERT_OK(gt_file_read_all(f.b, 64u << 20, &again));
    assert_int_equal(again.len, raw.len);
    assert_memory_equal(again.data, raw.data, raw.len);
    GT_ASSERT_OK(gt_gpt2_save(r, f.b));  // to fp32 and back: bf16 values are exact in fp32
    gt_gpt2_free(r);
    GT_ASSERT_OK(gt_gpt2_load(&r, f.dev, f.b));
    GT_ASSERT_OK(gt_gpt2_params_read(r, p, n));
    assert_memory_equal(p, q, n * 4);

    // damaged: one byte short, or a bf16 header on an fp32 payload
    GT_ASSERT_OK(gt_file_write_atomic(f.b, raw.data, raw.len - 1, 0644));
    gt_gpt2 *bad = NULL;
    GT_ASSERT_CODE(gt_gpt2_load(&bad, f.dev, f.b), GT_E_TRUNCATED);
    assert_null(bad);
    gt_buf_free(&raw);
    gt_buf_free(&again);
    gt_gpt2_free(r);
    gt_gpt2_free(m);
    free(p);
    free(q);
    fixture_close(&f);
}

// A file written by hand as llm.c's train_gpt2cu writes it (header ints, then the bf16 bits of
// each tensor in order) loads to exactly those values.
static void hand_built_llmc_file(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f);
    size_t sizes[GT_GPT2_NUM_TENSORS];
    size_t n = gt_gpt2_param_sizes(&cfg, sizes);
    uint8_t *file = calloc(1, 1024 + 2 * n);
    const int32_t hdr[8] = {20240326, 5, 16, 90, 2, 2, 16, 128};
    for (int i = 0; i < 8; i++) {
        gt_store_u32le(file + 4 * i, (uint32_t)hdr[i]);
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t b = (uint16_t)(0x3c00 + i % 512);  // small positive values, all distinct bits
        file[1024 + 2 * i] = (uint8_t)b;
        file[1024 + 2 * i + 1] = (uint8_t)(b >> 8);
    }
    GT_ASSERT_OK(gt_file_write_atomic(f.a, file, 1024 + 2 * n, 0644));
    gt_gpt2 *m = NULL;
    GT_ASSERT_OK(gt_gpt2_load(&m, f.dev, f.a));
    float *p = malloc(n * 4);
    GT_ASSERT_OK(gt_gpt2_params_read(m, p, n));
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = 0;
        memcpy(&bits, &p[i], 4);
        assert_int_equal(bits, (uint32_t)(0x3c00 + i % 512) << 16);
    }
    free(p);
    free(file);
    gt_gpt2_free(m);
    fixture_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conversion_known_answers),
        cmocka_unit_test(round_trip),
        cmocka_unit_test(hand_built_llmc_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
