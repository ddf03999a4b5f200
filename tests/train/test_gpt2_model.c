// train/: llm.c checkpoints (round trip and every kind of bad file), seeded init, the unshuffled
// loader's batch order (llm.c's), bad data and shapes refused before training, the LR schedule,
// and the sampler; AdamW inside the backward against the standard schedule, and its refusals.
#include "testlib.h"
#include "toy_model.h"

#include <gputravel/data.h>
#include <gputravel/device.h>
#include <gputravel/kernels.h>
#include <gputravel/train.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const gt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 90, .padded_vocab_size = 128,
                                   .num_layers = 2, .num_heads = 2, .channels = 16};
static char dir[256];

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(dir);
    return 0;
}

static gt_device *open_cpu(void)
{
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 2};
    GT_ASSERT_OK(gt_device_open(&dev, &dc));
    return dev;
}

static void write_file(const char *name, const void *p, size_t n, char *path, size_t cap)
{
    GT_ASSERT_OK(gt_path_join(path, cap, dir, name));
    GT_ASSERT_OK(gt_file_write_atomic(path, p, n, 0644));
}

static void checkpoint_round_trip_and_init(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    gt_gpt2 *a = NULL, *b = NULL, *c = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&a, dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(a, 5));
    size_t n = gt_gpt2_num_params(a), sizes[GT_GPT2_NUM_TENSORS];
    assert_int_equal(n, gt_gpt2_param_sizes(&cfg, sizes));
    float *pa = malloc(n * 4), *pb = malloc(n * 4);
    GT_ASSERT_OK(gt_gpt2_params_read(a, pa, n));
    // GPT-2 init: padded wte rows 0, layernorm weights 1, biases 0, weights ~ N(0, 0.02)
    for (size_t i = (size_t)cfg.vocab_size * cfg.channels; i < sizes[0]; i++) {
        assert_true(pa[i] == 0.0f);
    }
    size_t ln1w = sizes[0] + sizes[1], qkvb = ln1w + sizes[2] + sizes[3] + sizes[4];
    assert_true(pa[ln1w] == 1.0f && pa[qkvb] == 0.0f);
    double ss = 0.0;
    for (size_t i = 0; i < (size_t)cfg.vocab_size * cfg.channels; i++) {
        ss += (double)pa[i] * pa[i];
    }
    double sd = sqrt(ss / (cfg.vocab_size * cfg.channels));
    assert_true(sd > 0.018 && sd < 0.022);
    // the same seed gives the same bits; another seed does not
    GT_ASSERT_OK(gt_gpt2_create(&b, dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(b, 5));
    GT_ASSERT_OK(gt_gpt2_params_read(b, pb, n));
    assert_memory_equal(pa, pb, n * 4);
    GT_ASSERT_OK(gt_gpt2_init_random(b, 6));
    GT_ASSERT_OK(gt_gpt2_params_read(b, pb, n));
    assert_true(memcmp(pa, pb, n * 4) != 0);
    // llm.c file: header then the parameters, bit for bit
    char path[512];
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "m.bin"));
    GT_ASSERT_OK(gt_gpt2_save(a, path));
    gt_buf raw = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 64u << 20, &raw));
    assert_int_equal(raw.len, 1024 + n * 4);
    gt_reader r = gt_reader_init(raw.data, raw.len);
    int32_t h[8];
    for (int i = 0; i < 8; i++) {
        GT_ASSERT_OK(gt_reader_i32le(&r, &h[i]));
    }
    int32_t want[8] = {20240326, 3, 16, 90, 2, 2, 16, 128};
    assert_memory_equal(h, want, sizeof want);
    assert_memory_equal(raw.data + 1024, pa, n * 4);
    GT_ASSERT_OK(gt_gpt2_load(&c, dev, path));
    GT_ASSERT_OK(gt_gpt2_params_read(c, pb, n));
    assert_memory_equal(pa, pb, n * 4);
    assert_memory_equal(gt_gpt2_get_config(c), &cfg, sizeof cfg);
    assert_int_equal(gt_test_count_files(dir), 1);  // no temporary left behind

    // a save that cannot happen leaves nothing
    GT_ASSERT_CODE(gt_gpt2_save(a, "/nonexistent-dir/m.bin"), GT_E_IO);

    gt_buf_free(&raw);
    free(pa);
    free(pb);
    gt_gpt2_free(a);
    gt_gpt2_free(b);
    gt_gpt2_free(c);
    gt_device_close(dev);
}

static void checkpoint_bad_input(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    gt_gpt2 *a = NULL, *m = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&a, dev, &cfg));
    char good[512], bad[512];
    GT_ASSERT_OK(gt_path_join(good, sizeof good, dir, "good.bin"));
    GT_ASSERT_OK(gt_gpt2_save(a, good));
    gt_buf raw = {0};
    GT_ASSERT_OK(gt_file_read_all(good, 64u << 20, &raw));
    struct {
        int at;        // int32 index in the header (-1: none)
        int32_t value;
        long dlen;     // bytes removed (<0) or added (>0) at the end
        gt_code code;
    } rows[] = {
        {0, 20240520, 0, GT_E_FORMAT},       // a shard's magic
        {1, 5, 0, GT_E_FORMAT},              // bf16 header on an fp32 payload: twice the size
        {1, 1, 0, GT_E_UNSUPPORTED},
        {-1, 0, -1, GT_E_TRUNCATED},         // payload one byte short
        {-1, 0, -(long)raw.len + 1023, GT_E_TRUNCATED},  // header cut
        {-1, 0, -(long)raw.len, GT_E_TRUNCATED},         // empty file
        {-1, 0, 4, GT_E_FORMAT},             // trailing bytes
        {5, 3, 0, GT_E_FORMAT},              // C % NH != 0
        {6, 0, 0, GT_E_FORMAT},              // C = 0
        {7, 80, 0, GT_E_FORMAT},             // Vp < V
        {4, 3, 0, GT_E_TRUNCATED},           // one more layer than the payload holds
        {2, -16, 0, GT_E_FORMAT},            // negative maxT
        {4, 0x7fffffff, 0, GT_E_FORMAT},     // absurd layer count
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gt_buf b = {0};
        size_t len = (size_t)((long)raw.len + (rows[i].dlen < 0 ? rows[i].dlen : 0));
        GT_ASSERT_OK(gt_buf_append(&b, raw.data, len));
        for (long k = 0; k < rows[i].dlen; k++) {
            GT_ASSERT_OK(gt_buf_append(&b, "", 1));
        }
        if (rows[i].at >= 0) {
            gt_store_u32le(b.data + 4 * rows[i].at, (uint32_t)rows[i].value);
        }
        write_file("bad.bin", b.data, b.len, bad, sizeof bad);
        m = (gt_gpt2 *)&rows;  // must be reset to NULL on failure
        gt_err e = gt_gpt2_load(&m, dev, bad);
        if (e.code != rows[i].code) {
            fail_msg("row %zu: expected %s, got %s (%s)", i, gt_code_name(rows[i].code),
                     gt_code_name(e.code), e.msg);
        }
        assert_null(m);
        assert_non_null(strstr(e.msg, "bad.bin"));  // the message names the file
        gt_buf_free(&b);
    }
    GT_ASSERT_CODE(gt_gpt2_load(&m, dev, "/nonexistent/m.bin"), GT_E_NOTFOUND);
    GT_ASSERT_CODE(gt_gpt2_load(&m, dev, dir), GT_E_IO);  // a directory
    gt_buf_free(&raw);
    gt_gpt2_free(a);
    gt_device_close(dev);
}

// The unshuffled loader reads batch k as tokens [k*B*T, k*B*T + B*T] of the buffer (llm.c), and
// wraps to the start when the next batch does not fit. Checked through the loss: the loader's
// batch (never readable by the host) and a batch built by hand give bit-identical losses.
static void unshuffled_loader_order(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    int B = 2, T = 4, BT = B * T;
    size_t ntok = 3 * BT + 3;  // 3 samples: (27 - 1) / 8
    uint16_t *tok = malloc(ntok * 2);
    uint64_t rng = 3;
    for (size_t i = 0; i < ntok; i++) {
        tok[i] = (uint16_t)(gt_rng_u32(&rng) % (uint32_t)cfg.vocab_size);
    }
    char shard[512];
    GT_ASSERT_OK(gt_path_join(shard, sizeof shard, dir, "train.bin"));
    GT_ASSERT_OK(gt_shard_write(shard, tok, ntok));
    gt_dbuf data = 0;
    uint64_t n = 0;
    GT_ASSERT_OK(gt_shard_to_device(dev, shard, GT_DBUF_NO_READBACK, &data, &n));
    assert_int_equal(n, ntok);
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 1));
    GT_ASSERT_OK(gt_loader_create(&l, dev, &data, &n, 1, B, T, cfg.vocab_size, false, 0));
    assert_int_equal(gt_loader_num_samples(l), 3);
    gt_dbuf x = 0, y = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, BT * 4, 0, &x));
    GT_ASSERT_OK(gt_device_alloc(dev, BT * 4, 0, &y));
    for (int k = 0; k < 7; k++) {
        int sample = k % 3;
        int32_t hx[8], hy[8];
        for (int i = 0; i < BT; i++) {
            hx[i] = tok[sample * BT + i];
            hy[i] = tok[sample * BT + i + 1];
        }
        GT_ASSERT_OK(gt_device_copy_in(dev, x, 0, hx, sizeof hx));
        GT_ASSERT_OK(gt_device_copy_in(dev, y, 0, hy, sizeof hy));
        float want = 0.0f, got = 0.0f;
        GT_ASSERT_OK(gt_gpt2_forward(m, x, y, B, T, &want));
        GT_ASSERT_OK(gt_loader_next(l));
        GT_ASSERT_OK(gt_gpt2_forward(m, gt_loader_inputs(l), gt_loader_targets(l), B, T, &got));
        assert_memory_equal(&want, &got, 4);
    }
    // the batch buffers hold holder data: the host cannot read them
    int32_t peek[8];
    GT_ASSERT_CODE(gt_device_copy_out(dev, peek, gt_loader_inputs(l), 0, 32), GT_E_POLICY);
    free(tok);
    gt_loader_free(l);
    gt_gpt2_free(m);
    gt_device_close(dev);
}

static void bad_data_and_shapes(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, dev, &cfg));
    uint16_t tok[64];
    for (int i = 0; i < 64; i++) {
        tok[i] = (uint16_t)(i % 80);
    }
    tok[50] = 90;  // == V: the shard was made for a larger vocabulary
    char shard[512];
    GT_ASSERT_OK(gt_path_join(shard, sizeof shard, dir, "big-vocab.bin"));
    GT_ASSERT_OK(gt_shard_write(shard, tok, 64));
    gt_dbuf data = 0;
    uint64_t n = 0;
    GT_ASSERT_OK(gt_shard_to_device(dev, shard, GT_DBUF_NO_READBACK, &data, &n));
    l = (gt_loader *)&tok;
    GT_ASSERT_CODE(gt_loader_create(&l, dev, &data, &n, 1, 2, 4, cfg.vocab_size, false, 0),
                   GT_E_FORMAT);
    assert_null(l);
    // too little data for one batch
    uint64_t few = 8;
    GT_ASSERT_CODE(gt_loader_create(&l, dev, &data, &few, 1, 2, 4, cfg.vocab_size, false, 0),
                   GT_E_ARG);
    uint64_t more = 1000;  // more tokens than the buffer holds
    GT_ASSERT_CODE(gt_loader_create(&l, dev, &data, &more, 1, 2, 4, 200, false, 0), GT_E_ARG);
    // a damaged shard file
    uint8_t junk[1030] = {0};
    char badshard[512];
    write_file("junk.bin", junk, sizeof junk, badshard, sizeof badshard);
    gt_dbuf d2 = 0;
    GT_ASSERT_CODE(gt_shard_to_device(dev, badshard, 0, &d2, &n), GT_E_FORMAT);
    assert_int_equal(d2, 0);
    // T > maxT is refused before anything runs
    gt_dbuf x = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, 4 * 32, 0, &x));
    float loss = 0.0f;
    GT_ASSERT_CODE(gt_gpt2_forward(m, x, x, 1, 17, &loss), GT_E_ARG);
    GT_ASSERT_CODE(gt_gpt2_forward_backward(m, x, x, 2, 17, 1.0f, &loss), GT_E_ARG);
    // update before backward, bad hyper-parameters
    gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    GT_ASSERT_CODE(gt_gpt2_update(m, &opt, 1e-3f, NULL), GT_E_STATE);
    GT_ASSERT_OK(gt_gpt2_zero_grad(m));
    opt.beta1 = 1.0f;
    GT_ASSERT_CODE(gt_gpt2_update(m, &opt, 1e-3f, NULL), GT_E_ARG);
    assert_int_equal(gt_gpt2_step(m), 0);
    // configs
    gt_gpt2_config c2 = cfg;
    c2.num_heads = 3;
    gt_gpt2 *m2 = NULL;
    GT_ASSERT_CODE(gt_gpt2_create(&m2, dev, &c2), GT_E_FORMAT);
    assert_int_equal(gt_gpt2_pad_vocab(50257), 50304);
    assert_int_equal(gt_gpt2_pad_vocab(256), 256);
    assert_int_equal(gt_gpt2_pad_vocab(250), 256);
    gt_gpt2_free(m);
    gt_device_close(dev);
}

// Gradient accumulation: two half batches with loss_scale 1/2 give the gradient of the whole
// batch (up to float32 summation order) and the mean of their losses is its loss.
static void grad_accumulation_equals_full_batch(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    gt_gpt2 *m = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 8));
    int B = 4, T = 8, BT = B * T;
    int32_t x[32], y[32];
    uint64_t rng = 21;
    for (int i = 0; i < BT; i++) {
        x[i] = (int32_t)(gt_rng_u32(&rng) % (uint32_t)cfg.vocab_size);
        y[i] = (int32_t)(gt_rng_u32(&rng) % (uint32_t)cfg.vocab_size);
    }
    gt_dbuf xb = 0, yb = 0, xh[2] = {0}, yh[2] = {0};
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof x, 0, &xb));
    GT_ASSERT_OK(gt_device_alloc(dev, sizeof y, 0, &yb));
    GT_ASSERT_OK(gt_device_copy_in(dev, xb, 0, x, sizeof x));
    GT_ASSERT_OK(gt_device_copy_in(dev, yb, 0, y, sizeof y));
    for (int h = 0; h < 2; h++) {
        GT_ASSERT_OK(gt_device_alloc(dev, sizeof x / 2, 0, &xh[h]));
        GT_ASSERT_OK(gt_device_alloc(dev, sizeof y / 2, 0, &yh[h]));
        GT_ASSERT_OK(gt_device_copy_in(dev, xh[h], 0, x + h * BT / 2, sizeof x / 2));
        GT_ASSERT_OK(gt_device_copy_in(dev, yh[h], 0, y + h * BT / 2, sizeof y / 2));
    }
    size_t n = gt_gpt2_num_params(m);
    float *g1 = malloc(n * 4), *g2 = malloc(n * 4), full = 0.0f, half[2] = {0};
    GT_ASSERT_OK(gt_gpt2_zero_grad(m));
    GT_ASSERT_OK(gt_gpt2_forward_backward(m, xb, yb, B, T, 1.0f, &full));
    GT_ASSERT_OK(gt_gpt2_grads_read(m, g1, n));
    GT_ASSERT_OK(gt_gpt2_zero_grad(m));
    for (int h = 0; h < 2; h++) {
        GT_ASSERT_OK(gt_gpt2_forward_backward(m, xh[h], yh[h], B / 2, T, 0.5f, &half[h]));
    }
    GT_ASSERT_OK(gt_gpt2_grads_read(m, g2, n));
    assert_float_equal(full, 0.5f * (half[0] + half[1]), 1e-6);
    double gmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        gmax = fmax(gmax, fabs(g1[i]));
    }
    for (size_t i = 0; i < n; i++) {
        if (fabs(g1[i] - g2[i]) > 1e-5 * gmax + 1e-4 * fabs(g1[i])) {
            fail_msg("grad %zu: full batch %.8g, accumulated %.8g", i, g1[i], g2[i]);
        }
    }
    free(g1);
    free(g2);
    gt_gpt2_free(m);
    gt_device_close(dev);
}

static void schedule_and_sampler(void **state)
{
    (void)state;
    gt_lr_schedule s = {.kind = GT_LR_COSINE, .lr = 1.0f, .warmup = 4, .total_steps = 14,
                        .final_frac = 0.1f};
    assert_float_equal(gt_lr_at(&s, 0), 0.25f, 1e-7);
    assert_float_equal(gt_lr_at(&s, 3), 1.0f, 1e-7);
    assert_float_equal(gt_lr_at(&s, 4), 1.0f, 1e-7);
    assert_float_equal(gt_lr_at(&s, 9), 0.55f, 1e-6);  // halfway down
    assert_float_equal(gt_lr_at(&s, 14), 0.1f, 1e-6);
    assert_float_equal(gt_lr_at(&s, 40), 0.1f, 1e-6);
    s.kind = GT_LR_CONSTANT;
    assert_float_equal(gt_lr_at(&s, 1), 0.5f, 1e-7);
    assert_float_equal(gt_lr_at(&s, 13), 1.0f, 1e-7);
    gt_lr_kind k;
    GT_ASSERT_CODE(gt_lr_kind_parse("linear", &k), GT_E_ARG);

    float logits[6] = {0.0f, 3.0f, 1.0f, 2.9f, -1.0f, 99.0f};  // [5] is padding (V = 5)
    gt_sampler g = {.temperature = 0.0f, .rng = 1};
    assert_int_equal(gt_sampler_pick(&g, logits, 5), 1);
    gt_sampler k1 = {.temperature = 1.0f, .top_k = 1, .rng = 1};
    for (int i = 0; i < 20; i++) {
        assert_int_equal(gt_sampler_pick(&k1, logits, 5), 1);
    }
    gt_sampler k2 = {.temperature = 1.0f, .top_k = 2, .rng = 9};
    int seen[6] = {0};
    for (int i = 0; i < 200; i++) {
        seen[gt_sampler_pick(&k2, logits, 5)]++;
    }
    assert_true(seen[1] > 50 && seen[3] > 50 && seen[1] + seen[3] == 200);

    // generation: seeded, reproducible, tokens in range
    gt_device *dev = open_cpu();
    gt_gpt2 *m = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 3));
    int32_t a[24] = {5, 6}, b[24] = {5, 6};
    gt_sampler sa = {.temperature = 1.0f, .top_k = 10, .rng = 77}, sb = sa;
    GT_ASSERT_OK(gt_gpt2_generate(m, &sa, a, 2, 24));  // longer than maxT: sliding context
    GT_ASSERT_OK(gt_gpt2_generate(m, &sb, b, 2, 24));
    assert_memory_equal(a, b, sizeof a);
    for (int i = 0; i < 24; i++) {
        assert_true(a[i] >= 0 && a[i] < cfg.vocab_size);
    }
    a[0] = 90;
    GT_ASSERT_CODE(gt_gpt2_generate(m, &sa, a, 2, 24), GT_E_ARG);
    gt_gpt2_free(m);
    gt_device_close(dev);
}

// What a toy run leaves: its losses and its whole AdamW state.
enum { IB_STEPS = 4, IB_NTOK = 1024 };
typedef struct {
    float loss[IB_STEPS];
    float *params, *m, *v;
    size_t n;
    uint64_t step;
} toy_run;

static void toy_run_free(toy_run *r)
{
    free(r->params);
    free(r->m);
    free(r->v);
}

// IB_STEPS steps of opt's schedule on a cpu device; 3 layers of 12 channels, so that every
// per-layer slice (ln1w at 12 floats, qkvw at 432, ...) starts off the kernels' 16-lane blocks.
static void toy_train(const gt_adamw *opt, toy_run *r)
{
    gt_device *dev = open_cpu();
    gt_dbuf chunk = gt_toy_chunk(dev, IB_NTOK);
    gt_toy t;
    gt_toy_open_as(dev, chunk, IB_NTOK, &(gt_toy_shape){GT_TOY_VOCAB, 12, 3}, &t);
    for (int s = 0; s < IB_STEPS; s++) {
        GT_ASSERT_OK(gt_toy_step_with(&t, opt, &r->loss[s]));
    }
    r->n = gt_gpt2_num_params(t.m);
    r->step = gt_gpt2_step(t.m);
    r->params = malloc(r->n * 4);
    r->m = malloc(r->n * 4);
    r->v = malloc(r->n * 4);
    assert_true(r->params && r->m && r->v);
    gt_gpt2_state_bufs b;
    GT_ASSERT_OK(gt_gpt2_state_bufs_get(t.m, false, &b));
    GT_ASSERT_OK(gt_device_copy_out(dev, r->params, b.params, 0, r->n * 4));
    GT_ASSERT_OK(gt_device_copy_out(dev, r->m, b.m, 0, r->n * 4));
    GT_ASSERT_OK(gt_device_copy_out(dev, r->v, b.v, 0, r->n * 4));
    gt_toy_close(&t);
    gt_device_close(dev);
}

// AdamW inside the backward gives the losses, parameters and moments of the standard schedule
// bit for bit, on every instruction set this cpu has (the scalar path, AVX2's 8 lanes, AVX-512's
// 16), with slices that start anywhere.
static void update_in_backward_bit_for_bit(void **state)
{
    (void)state;
    gt_adamw ib = gt_toy_opt_unclipped;
    ib.update_in_backward = true;
    gt_cpu_isa isas[] = {GT_CPU_ISA_SCALAR, GT_CPU_ISA_AVX2, GT_CPU_ISA_AVX512};
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!gt_cpu_isa_supported(isas[i])) {
            print_message("%s: not on this cpu\n", gt_cpu_isa_name(isas[i]));
            continue;
        }
        GT_ASSERT_OK(gt_ops_cpu_set_isa(isas[i]));
        toy_run std, in;
        toy_train(&gt_toy_opt_unclipped, &std);
        toy_train(&ib, &in);
        print_message("%s: losses %.7f .. %.7f\n", gt_cpu_isa_name(isas[i]), std.loss[0],
                      std.loss[IB_STEPS - 1]);
        assert_int_equal(std.step, IB_STEPS);
        assert_int_equal(in.step, IB_STEPS);
        assert_true(std.loss[IB_STEPS - 1] != std.loss[0]);  // it trained
        assert_memory_equal(std.loss, in.loss, sizeof std.loss);
        assert_memory_equal(std.params, in.params, std.n * 4);
        assert_memory_equal(std.m, in.m, std.n * 4);
        assert_memory_equal(std.v, in.v, std.n * 4);
        toy_run_free(&std);
        toy_run_free(&in);
    }
    GT_ASSERT_OK(gt_ops_cpu_select_isa(NULL));
}

// Where the in-backward step is not the standard schedule's maths, it is refused, and so is
// each schedule's function given the other's recipe.
static void update_in_backward_refusals(void **state)
{
    (void)state;
    gt_device *dev = open_cpu();
    gt_dbuf chunk = gt_toy_chunk(dev, IB_NTOK);
    gt_adamw ib = gt_toy_opt_unclipped, clipped = gt_toy_opt;
    ib.update_in_backward = clipped.update_in_backward = true;
    gt_toy t;
    gt_toy_open(dev, chunk, IB_NTOK, &t);
    gt_dbuf x = gt_loader_inputs(t.l), y = gt_loader_targets(t.l);
    GT_ASSERT_OK(gt_loader_next(t.l));
    float loss = 0.0f;
    gt_err e = gt_gpt2_step_in_backward(t.m, x, y, 2, 8, 1.0f, &clipped, 1e-3f, &loss);
    GT_ASSERT_CODE(e, GT_E_ARG);
    assert_non_null(strstr(e.msg, "clipping"));
    e = gt_gpt2_step_in_backward(t.m, x, y, 2, 8, 1.0f, &gt_toy_opt_unclipped, 1e-3f, &loss);
    GT_ASSERT_CODE(e, GT_E_ARG);
    assert_non_null(strstr(e.msg, "update_in_backward"));
    // a micro-batch's gradient not yet applied: accumulation
    GT_ASSERT_OK(gt_gpt2_zero_grad(t.m));
    GT_ASSERT_OK(gt_gpt2_forward_backward(t.m, x, y, 2, 8, 0.5f, &loss));
    e = gt_gpt2_step_in_backward(t.m, x, y, 2, 8, 0.5f, &ib, 1e-3f, &loss);
    GT_ASSERT_CODE(e, GT_E_STATE);
    assert_non_null(strstr(e.msg, "grad-accum"));
    GT_ASSERT_CODE(gt_gpt2_update(t.m, &ib, 1e-3f, NULL), GT_E_ARG);
    GT_ASSERT_OK(gt_gpt2_update(t.m, &gt_toy_opt_unclipped, 1e-3f, NULL));
    GT_ASSERT_OK(gt_gpt2_step_in_backward(t.m, x, y, 2, 8, 1.0f, &ib, 1e-3f, &loss));  // applied
    assert_int_equal(gt_gpt2_step(t.m), 2);
    gt_buf prog = {0};
    GT_ASSERT_CODE(gt_gpt2_program(gt_gpt2_get_config(t.m), 2, 8, &clipped, &prog), GT_E_ARG);
    gt_buf_free_nowipe(&prog);
    gt_toy_close(&t);
    // several ranks: the gradient buffer given to a collective; ZeRO-1: a sharded model
    for (int sharded = 0; sharded < 2; sharded++) {
        gt_toy_open(dev, chunk, IB_NTOK, &t);
        if (sharded) {
            GT_ASSERT_OK(gt_gpt2_zero_shard(t.m, 0, 64, 0, 2));
        } else {
            gt_dbuf g = 0;
            GT_ASSERT_OK(gt_gpt2_grads_buf(t.m, &g));
        }
        GT_ASSERT_OK(gt_loader_next(t.l));
        e = gt_gpt2_step_in_backward(t.m, gt_loader_inputs(t.l), gt_loader_targets(t.l), 2, 8,
                                     1.0f, &ib, 1e-3f, &loss);
        GT_ASSERT_CODE(e, GT_E_STATE);
        assert_non_null(strstr(e.msg, sharded ? "ZeRO-1" : "several ranks"));
        assert_non_null(strstr(e.msg, "inside the backward"));  // this refusal, not another
        assert_int_equal(gt_gpt2_step(t.m), 0);
        gt_toy_close(&t);
    }
    gt_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(checkpoint_round_trip_and_init, setup, teardown),
        cmocka_unit_test_setup_teardown(checkpoint_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(unshuffled_loader_order, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_data_and_shapes, setup, teardown),
        cmocka_unit_test(grad_accumulation_equals_full_batch),
        cmocka_unit_test(schedule_and_sampler),
        cmocka_unit_test(update_in_backward_bit_for_bit),
        cmocka_unit_test(update_in_backward_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
