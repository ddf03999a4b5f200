// train/: a run stopped after step k and resumed from its checkpoint + training state gives
// bit-identical losses and parameters to an uninterrupted run (shuffled data, gradient
// accumulation, clipping, cosine schedule with warmup, weight decay: every piece of state).
#include "testlib.h"

#include <gputravel/data.h>
#include <gputravel/device.h>
#include <gputravel/train.h>

#include <stdlib.h>
#include <string.h>

#define STEPS 10
#define KILL_AT 4
#define ACCUM 2

static const gt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 100,
                                   .padded_vocab_size = 128, .num_layers = 2, .num_heads = 2,
                                   .channels = 32};
static const int B = 2, T = 8;
static const gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                             .grad_clip = 1.0f};
static const gt_lr_schedule sched = {.kind = GT_LR_COSINE, .lr = 3e-3f, .warmup = 2,
                                     .total_steps = STEPS, .final_frac = 0.1f};

typedef struct {
    gt_device *dev;
    gt_dbuf shards[2];
    uint64_t ntok[2];
} world;

static void world_open(world *w)
{
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 2};
    GT_ASSERT_OK(gt_device_open(&w->dev, &dc));
    uint64_t rng = 7;
    for (int s = 0; s < 2; s++) {
        size_t n = s == 0 ? 200 : 90;  // 12 and 5 samples of B*T+1
        uint16_t *tok = malloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            tok[i] = (uint16_t)(gt_rng_u32(&rng) % (uint32_t)cfg.vocab_size);
        }
        GT_ASSERT_OK(gt_device_alloc(w->dev, n * 2, GT_DBUF_NO_READBACK, &w->shards[s]));
        GT_ASSERT_OK(gt_device_copy_in(w->dev, w->shards[s], 0, tok, n * 2));
        w->ntok[s] = n;
        free(tok);
    }
}

// Runs steps [from, to) and records their losses.
static void run_steps(gt_gpt2 *m, gt_loader *l, int from, int to, float *losses)
{
    for (int s = from; s < to; s++) {
        GT_ASSERT_OK(gt_gpt2_zero_grad(m));
        double sum = 0.0;
        for (int k = 0; k < ACCUM; k++) {
            float loss = 0.0f;
            GT_ASSERT_OK(gt_loader_next(l));
            GT_ASSERT_OK(gt_gpt2_forward_backward(m, gt_loader_inputs(l), gt_loader_targets(l),
                                                  B, T, 1.0f / ACCUM, &loss));
            sum += loss;
        }
        losses[s] = (float)(sum / ACCUM);
        float norm = 0.0f;
        GT_ASSERT_OK(gt_gpt2_update(m, &opt, gt_lr_at(&sched, s), &norm));
    }
}

static void kill_and_resume_is_bit_identical(void **state)
{
    (void)state;
    char dir[256], ckpt[512], st[520];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(ckpt, sizeof ckpt, dir, "model.bin"));
    snprintf(st, sizeof st, "%s.state", ckpt);
    world w;
    world_open(&w);
    size_t n = 0;

    // uninterrupted
    float full[STEPS], resumed[STEPS];
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, w.dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 99));
    GT_ASSERT_OK(gt_loader_create(&l, w.dev, w.shards, w.ntok, 2, B, T, cfg.vocab_size, true, 5));
    assert_int_equal(gt_loader_num_samples(l), 12 + 5);
    run_steps(m, l, 0, STEPS, full);
    n = gt_gpt2_num_params(m);
    float *pfull = malloc(n * 4), *pres = malloc(n * 4);
    GT_ASSERT_OK(gt_gpt2_params_read(m, pfull, n));
    gt_loader_pos end_full = gt_loader_tell(l);
    gt_gpt2_free(m);
    gt_loader_free(l);

    // killed after KILL_AT steps: everything but the files is dropped
    GT_ASSERT_OK(gt_gpt2_create(&m, w.dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 99));
    GT_ASSERT_OK(gt_loader_create(&l, w.dev, w.shards, w.ntok, 2, B, T, cfg.vocab_size, true, 5));
    run_steps(m, l, 0, KILL_AT, resumed);
    GT_ASSERT_OK(gt_gpt2_save(m, ckpt));
    GT_ASSERT_OK(gt_train_state_save(m, gt_loader_tell(l), st));
    gt_gpt2_free(m);
    gt_loader_free(l);
    m = NULL;
    l = NULL;

    // resumed in a fresh model and loader
    gt_loader_pos pos = {0};
    GT_ASSERT_OK(gt_gpt2_load(&m, w.dev, ckpt));
    GT_ASSERT_OK(gt_train_state_load(m, &pos, st));
    assert_int_equal(gt_gpt2_step(m), KILL_AT);
    GT_ASSERT_OK(gt_loader_create(&l, w.dev, w.shards, w.ntok, 2, B, T, cfg.vocab_size, true, 5));
    GT_ASSERT_OK(gt_loader_seek(l, pos));
    run_steps(m, l, KILL_AT, STEPS, resumed);
    GT_ASSERT_OK(gt_gpt2_params_read(m, pres, n));
    for (int s = 0; s < STEPS; s++) {
        print_message("step %d: full %.9g resumed %.9g\n", s, full[s], resumed[s]);
    }
    assert_memory_equal(full, resumed, sizeof full);
    assert_memory_equal(pfull, pres, n * 4);
    gt_loader_pos end_res = gt_loader_tell(l);
    assert_int_equal(end_full.epoch, end_res.epoch);
    assert_int_equal(end_full.shard, end_res.shard);
    assert_int_equal(end_full.sample, end_res.sample);
    assert_true(end_res.epoch >= 1);  // 20 batches over 17 samples: a second epoch began

    gt_gpt2_free(m);
    gt_loader_free(l);
    free(pfull);
    free(pres);
    gt_device_close(w.dev);
    gt_test_rmtree(dir);
}

// Without a resume, a state file from another model or a damaged one is refused whole: the
// model's step and moments are unchanged.
static void state_file_bad_input(void **state)
{
    (void)state;
    char dir[256], ckpt[512], st[520], bad[520];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(ckpt, sizeof ckpt, dir, "m.bin"));
    snprintf(st, sizeof st, "%s.state", ckpt);
    snprintf(bad, sizeof bad, "%s/bad.state", dir);
    world w;
    world_open(&w);
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, w.dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 1));
    GT_ASSERT_OK(gt_loader_create(&l, w.dev, w.shards, w.ntok, 2, B, T, cfg.vocab_size, false, 0));
    float losses[2];
    run_steps(m, l, 0, 2, losses);
    GT_ASSERT_OK(gt_train_state_save(m, gt_loader_tell(l), st));
    gt_buf good = {0};
    GT_ASSERT_OK(gt_file_read_all(st, 64u << 20, &good));
    gt_loader_pos pos = {0};

    GT_ASSERT_OK(gt_file_write_atomic(bad, good.data, good.len - 1, 0600));
    GT_ASSERT_CODE(gt_train_state_load(m, &pos, bad), GT_E_TRUNCATED);
    GT_ASSERT_OK(gt_file_write_atomic(bad, good.data, 20, 0600));
    GT_ASSERT_CODE(gt_train_state_load(m, &pos, bad), GT_E_TRUNCATED);
    gt_buf longer = {0};
    GT_ASSERT_OK(gt_buf_append(&longer, good.data, good.len));
    GT_ASSERT_OK(gt_buf_append(&longer, "x", 1));
    GT_ASSERT_OK(gt_file_write_atomic(bad, longer.data, longer.len, 0600));
    GT_ASSERT_CODE(gt_train_state_load(m, &pos, bad), GT_E_FORMAT);
    good.data[0] ^= 1;  // magic
    GT_ASSERT_OK(gt_file_write_atomic(bad, good.data, good.len, 0600));
    GT_ASSERT_CODE(gt_train_state_load(m, &pos, bad), GT_E_FORMAT);
    good.data[0] ^= 1;
    good.data[4] = 9;  // version
    GT_ASSERT_OK(gt_file_write_atomic(bad, good.data, good.len, 0600));
    GT_ASSERT_CODE(gt_train_state_load(m, &pos, bad), GT_E_UNSUPPORTED);
    GT_ASSERT_CODE(gt_train_state_load(m, &pos, "/nonexistent/x.state"), GT_E_NOTFOUND);
    assert_int_equal(gt_gpt2_step(m), 2);  // nothing was applied

    // another config
    gt_gpt2_config other = cfg;
    other.num_layers = 1;
    gt_gpt2 *m2 = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m2, w.dev, &other));
    GT_ASSERT_CODE(gt_train_state_load(m2, &pos, st), GT_E_FORMAT);
    assert_int_equal(gt_gpt2_step(m2), 0);
    // a loader position beyond the data
    gt_loader_pos before = gt_loader_tell(l);
    GT_ASSERT_CODE(gt_loader_seek(l, (gt_loader_pos){.shard = 7}), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_loader_seek(l, (gt_loader_pos){.sample = 13}), GT_E_FORMAT);
    // a position from a loader with another batch shape or shuffling is refused
    gt_loader_pos p = gt_loader_tell(l);
    p.sample_tokens *= 2;
    GT_ASSERT_CODE(gt_loader_seek(l, p), GT_E_ARG);
    p = gt_loader_tell(l);
    p.shuffle = 1;
    GT_ASSERT_CODE(gt_loader_seek(l, p), GT_E_ARG);
    gt_loader_pos after = gt_loader_tell(l);  // failed seeks moved nothing
    assert_true(before.epoch == after.epoch && before.shard == after.shard &&
                before.sample == after.sample);
    GT_ASSERT_OK(gt_loader_seek(l, gt_loader_tell(l)));

    gt_buf_free(&good);
    gt_buf_free(&longer);
    gt_gpt2_free(m);
    gt_gpt2_free(m2);
    gt_loader_free(l);
    gt_device_close(w.dev);
    gt_test_rmtree(dir);
}

// Every reduction runs in an order fixed by the shapes, not by the thread count: a run resumed
// with another --threads continues bit for bit. Shapes here are large enough that every kernel
// takes its parallel path.
static void thread_count_does_not_change_bits(void **state)
{
    (void)state;
    const gt_gpt2_config big = {.max_seq_len = 64, .vocab_size = 100, .padded_vocab_size = 128,
                                .num_layers = 1, .num_heads = 4, .channels = 128};
    const int Bb = 8, Tb = 64, steps = 2;
    uint16_t *tok = malloc((size_t)Bb * Tb * steps * 2 + 2);
    uint64_t rng = 3;
    for (int i = 0; i < Bb * Tb * steps + 1; i++) {
        tok[i] = (uint16_t)(gt_rng_u32(&rng) % 100);
    }
    float losses[3][2], *params[3];
    for (int run = 0; run < 3; run++) {
        gt_device *dev = NULL;
        gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = run + 1};
        GT_ASSERT_OK(gt_device_open(&dev, &dc));
        gt_dbuf data = 0;
        uint64_t n = (uint64_t)Bb * Tb * steps + 1;
        GT_ASSERT_OK(gt_device_alloc(dev, n * 2, 0, &data));
        GT_ASSERT_OK(gt_device_copy_in(dev, data, 0, tok, n * 2));
        gt_gpt2 *m = NULL;
        gt_loader *l = NULL;
        GT_ASSERT_OK(gt_gpt2_create(&m, dev, &big));
        GT_ASSERT_OK(gt_gpt2_init_random(m, 4));
        GT_ASSERT_OK(gt_loader_create(&l, dev, &data, &n, 1, Bb, Tb, 100, false, 0));
        for (int s = 0; s < steps; s++) {
            GT_ASSERT_OK(gt_gpt2_zero_grad(m));
            GT_ASSERT_OK(gt_loader_next(l));
            GT_ASSERT_OK(gt_gpt2_forward_backward(m, gt_loader_inputs(l), gt_loader_targets(l),
                                                  Bb, Tb, 1.0f, &losses[run][s]));
            GT_ASSERT_OK(gt_gpt2_update(m, &opt, 1e-3f, NULL));
        }
        size_t np = gt_gpt2_num_params(m);
        params[run] = malloc(np * 4);
        GT_ASSERT_OK(gt_gpt2_params_read(m, params[run], np));
        if (run > 0) {
            assert_memory_equal(losses[run], losses[0], sizeof losses[0]);
            assert_memory_equal(params[run], params[0], np * 4);
        }
        gt_loader_free(l);
        gt_gpt2_free(m);
        gt_device_close(dev);
    }
    for (int run = 0; run < 3; run++) {
        free(params[run]);
    }
    free(tok);
}

// --resume semantics (train.h): the state's weights hash against the checkpoint's. Saved as the
// trainer does (state, then checkpoint), resumed from an unchanged, a changed, and a checkpoint
// one save behind; and a version 1 state.
static void resume_checks_checkpoint_weights(void **state)
{
    (void)state;
    char dir[256], ckpt[512], st[520], keep[520];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(ckpt, sizeof ckpt, dir, "m.bin"));
    snprintf(st, sizeof st, "%s.state", ckpt);
    snprintf(keep, sizeof keep, "%s/step2.bin", dir);
    world w;
    world_open(&w);
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    GT_ASSERT_OK(gt_gpt2_create(&m, w.dev, &cfg));
    GT_ASSERT_OK(gt_gpt2_init_random(m, 4));
    GT_ASSERT_OK(gt_loader_create(&l, w.dev, w.shards, w.ntok, 2, B, T, cfg.vocab_size, false, 0));
    float losses[3];
    run_steps(m, l, 0, 2, losses);
    GT_ASSERT_OK(gt_train_state_save(m, gt_loader_tell(l), st));
    GT_ASSERT_OK(gt_gpt2_save(m, ckpt));
    GT_ASSERT_OK(gt_gpt2_save(m, keep));
    size_t n = gt_gpt2_num_params(m);
    float *p2 = malloc(n * 4), *p3 = malloc(n * 4), *got = malloc(n * 4);
    GT_ASSERT_OK(gt_gpt2_params_read(m, p2, n));

    gt_gpt2 *r = NULL;
    gt_loader_pos pos = {0};
    gt_resume_info info;
    GT_ASSERT_OK(gt_gpt2_load(&r, w.dev, ckpt));
    GT_ASSERT_OK(gt_train_resume(r, &pos, st, GT_RESUME_STRICT, &info));
    assert_int_equal(info.outcome, GT_RESUME_MATCHED);
    assert_int_equal(gt_gpt2_step(r), 2);
    assert_int_equal(pos.sample, gt_loader_tell(l).sample);
    gt_gpt2_free(r);

    // one parameter changed in the checkpoint (as an edit with llm.c would): refused, unchanged
    gt_buf file = {0};
    GT_ASSERT_OK(gt_file_read_all(ckpt, 64u << 20, &file));
    file.data[1024 + 4 * 77 + 3] ^= 0x01;
    GT_ASSERT_OK(gt_file_write_atomic(ckpt, file.data, file.len, 0644));
    GT_ASSERT_OK(gt_gpt2_load(&r, w.dev, ckpt));
    GT_ASSERT_ERR(gt_train_resume(r, &pos, st, GT_RESUME_STRICT, &info), GT_E_STATE, "sha256");
    assert_int_equal(gt_gpt2_step(r), 0);
    // ... or continued from its weights with fresh moments, step and position from the state
    GT_ASSERT_OK(gt_train_resume(r, &pos, st, GT_RESUME_RESET_OPTIMIZER, &info));
    assert_int_equal(info.outcome, GT_RESUME_OPTIMIZER_RESET);
    assert_int_equal(gt_gpt2_step(r), 2);
    GT_ASSERT_OK(gt_gpt2_params_read(r, got, n));
    assert_memory_equal(got, file.data + 1024, n * 4);
    assert_memory_not_equal(got, p2, n * 4);
    gt_gpt2_free(r);

    // killed between the state of step 3 and its checkpoint: the checkpoint is step 2's
    run_steps(m, l, 2, 3, losses);
    GT_ASSERT_OK(gt_train_state_save(m, gt_loader_tell(l), st));
    GT_ASSERT_OK(gt_gpt2_params_read(m, p3, n));
    GT_ASSERT_OK(gt_gpt2_load(&r, w.dev, keep));
    GT_ASSERT_OK(gt_train_resume(r, &pos, st, GT_RESUME_STRICT, &info));
    assert_int_equal(info.outcome, GT_RESUME_STATE_AHEAD);
    assert_int_equal(gt_gpt2_step(r), 3);
    GT_ASSERT_OK(gt_gpt2_params_read(r, got, n));
    assert_memory_equal(got, p3, n * 4);
    gt_gpt2_free(r);

    // a version 1 state (no hashes): read, and said so
    gt_buf v2 = {0}, v1 = {0};
    GT_ASSERT_OK(gt_file_read_all(st, 64u << 20, &v2));
    const size_t v1_header = 4 + 4 + 6 * 4 + 6 * 8 + 4 + 8 + 4;
    GT_ASSERT_OK(gt_buf_append(&v1, v2.data, v1_header));
    GT_ASSERT_OK(gt_buf_append(&v1, v2.data + v1_header + 64, v2.len - v1_header - 64));
    gt_store_u32le(v1.data + 4, 1);
    GT_ASSERT_OK(gt_file_write_atomic(st, v1.data, v1.len, 0600));
    GT_ASSERT_OK(gt_gpt2_load(&r, w.dev, ckpt));
    GT_ASSERT_OK(gt_train_resume(r, &pos, st, GT_RESUME_STRICT, &info));
    assert_int_equal(info.outcome, GT_RESUME_LEGACY);
    GT_ASSERT_OK(gt_gpt2_params_read(r, got, n));
    assert_memory_equal(got, p3, n * 4);
    gt_gpt2_free(r);
    // a model that did not come from a file cannot be checked
    GT_ASSERT_OK(gt_gpt2_create(&r, w.dev, &cfg));
    GT_ASSERT_CODE(gt_train_resume(r, &pos, st, GT_RESUME_STRICT, &info), GT_E_ARG);
    gt_gpt2_free(r);

    gt_buf_free(&file);
    gt_buf_free(&v1);
    gt_buf_free(&v2);
    free(p2);
    free(p3);
    free(got);
    gt_gpt2_free(m);
    gt_loader_free(l);
    gt_device_close(w.dev);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kill_and_resume_is_bit_identical),
        cmocka_unit_test(resume_checks_checkpoint_weights),
        cmocka_unit_test(thread_count_does_not_change_bits),
        cmocka_unit_test(state_file_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
