// The cost of labels (device.h "labels"; issue 13), in one run: the median training step on a
// labelled chunk with declared outputs, the median cost of the label rules for one launch (the
// buffer table's gt_buftab_launch_labels on the step's own op kinds, 4 to 8 refs each) and the
// step's launches, so the share of a step the rules take is measured side by side.
//   bench_labels [--model tiny|small] [-B 4] [-T 64] [--steps 20]
#include <gputravel/device.h>
#include <gputravel/train.h>
#include <gputravel/travel.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define CHECK(expr)                                                        \
    do {                                                                   \
        gt_err e_ = (expr);                                                \
        if (e_.code != GT_E_NONE) {                                        \
            fprintf(stderr, "bench_labels: %s: %s\n", #expr, e_.msg);      \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

static const uint8_t DATASET[GT_LABEL_ID_BYTES] = {0xbe, 0x0c};

// Median ns of gt_buftab_launch_labels for op over labelled buffers of a table of its own.
static double rule_ns(gt_op op, int reps)
{
    gt_buftab *tab = NULL;
    CHECK(gt_buftab_new(&tab, &(gt_buftab_config){0}));
    uint64_t bytes[GT_OP_MAX_REFS];
    int nrefs = 0;
    CHECK(gt_op_ref_sizes(&op, bytes, &nrefs));
    for (int i = 0; i < nrefs; i++) {
        gt_buftab_entry *e = NULL;
        if (bytes[i] == 0) {
            op.refs[i] = (gt_dref){0, 0};
            continue;
        }
        CHECK(gt_buftab_alloc(tab, bytes[i], 0, 0, &op.refs[i].buf, &e));
        op.refs[i].offset = 0;
        CHECK(gt_buftab_label_add(tab, op.refs[i].buf, DATASET));
    }
    gt_release_state rel = {.declared = true};
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = 0; r < reps; r++) {
        gt_op run = op;
        double t0 = now();
        for (int k = 0; k < 100; k++) {
            CHECK(gt_buftab_launch_labels(tab, 0, &run, &rel));
        }
        t[r] = (now() - t0) / 100 * 1e9;
    }
    double med = bench_median(t, reps);
    free(t);
    size_t cursor = 0;
    gt_dbuf h = 0;
    while (gt_buftab_next(tab, &cursor, &h) != NULL) {
        gt_buftab_release(tab, h);
    }
    gt_buftab_free(tab);
    return med;
}

int main(int argc, char **argv)
{
    const char *model = "tiny";
    int B = 4, T = 64, steps = 20;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"steps", required_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "B:T:h", opts, NULL)) != -1;) {
        switch (c) {
        case 'm': model = optarg; break;
        case 's': steps = atoi(optarg); break;
        case 'B': B = atoi(optarg); break;
        case 'T': T = atoi(optarg); break;
        default:
            printf("usage: bench_labels [--model tiny|small] [-B n] [-T n] [--steps n]\n");
            return c == 'h' ? 0 : 64;
        }
    }
    gt_gpt2_config cfg = {.max_seq_len = 256, .vocab_size = 1000, .padded_vocab_size = 1024,
                          .num_layers = 2, .num_heads = 4, .channels = 128};
    if (strcmp(model, "small") == 0) {
        cfg = (gt_gpt2_config){.max_seq_len = 256, .vocab_size = 4096, .padded_vocab_size = 4096,
                               .num_layers = 4, .num_heads = 4, .channels = 256};
    } else if (strcmp(model, "tiny") != 0) {
        fprintf(stderr, "bench_labels: unknown model '%s'\n", model);
        return 64;
    }
    if (B < 1 || T < 1 || T > cfg.max_seq_len || steps < 3) {
        fprintf(stderr, "bench_labels: bad -B/-T/--steps (steps >= 3)\n");
        return 64;
    }
    gt_device *dev = NULL;
    CHECK(gt_device_open(&dev, &(gt_device_config){.kind = GT_DEVICE_CPU}));
    gt_device_outputs outs = {.loss = true, .loss_mantissa_bits = 23,
                              .loss_budget = (uint64_t)steps + 1};
    CHECK(gt_device_declare_outputs(dev, &outs, (gt_span){0}));
    // A labelled "chunk" of random tokens, as a holder's would be.
    uint64_t ntok = (uint64_t)B * T * (uint64_t)(steps + 2) + 1;
    uint16_t *tok = malloc(ntok * 2);
    uint64_t rng = 7;
    for (uint64_t i = 0; i < ntok; i++) {
        tok[i] = (uint16_t)(gt_rng_u32(&rng) % (uint32_t)cfg.vocab_size);
    }
    gt_dbuf chunk = 0;
    CHECK(gt_device_alloc(dev, ntok * 2, GT_DBUF_NO_READBACK, &chunk));
    CHECK(gt_device_label_add(dev, chunk, DATASET));
    CHECK(gt_device_copy_in(dev, chunk, 0, tok, ntok * 2));
    free(tok);
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    CHECK(gt_gpt2_create(&m, dev, &cfg));
    CHECK(gt_gpt2_init_random(m, 1));
    CHECK(gt_loader_create(&l, dev, &chunk, &ntok, 1, B, T, cfg.vocab_size, false, 0));
    gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_clip = 1.0f};
    double *times = calloc((size_t)steps, sizeof *times);
    float loss = 0.0f;
    for (int s = -1; s < steps; s++) {  // step 0 (allocation, page faults) is not counted
        double t0 = now();
        CHECK(gt_loader_next(l));
        CHECK(gt_gpt2_zero_grad(m));
        CHECK(gt_gpt2_forward_backward(m, gt_loader_inputs(l), gt_loader_targets(l), B, T, 1.0f,
                                       &loss));
        CHECK(gt_gpt2_update(m, &opt, 3e-4f, NULL));
        CHECK(gt_device_sync(dev));
        if (s >= 0) {
            times[s] = now() - t0;
        }
    }
    double step_ms = bench_median(times, steps) * 1e3;
    // The rules for the heaviest ops of a step (most refs), at the step's shapes.
    int64_t BT = (int64_t)B * T, C = cfg.channels;
    gt_dref z = {1, 0};
    double mm = rule_ns(gt_op_matmul_fwd(z, z, z, z, BT, C, 3 * C), 31);
    double lnb = rule_ns(gt_op_layernorm_bwd(z, z, z, z, z, z, z, z, BT, C), 31);
    double worst = mm > lnb ? mm : lnb;
    // Launches per step, counted from gt_gpt2's step: gather 1; forward 10 per layer + encoder,
    // final layernorm, lm head, softmax, loss 5; backward 11 per layer + 5; update 3.
    int L = cfg.num_layers, launches = 1 + (10 * L + 5) + (11 * L + 5) + 3;
    double share = launches * worst * 1e-6 / step_ms;
    printf("| model | params | B | T | median step ms | launches/step | rules ns/launch "
           "(matmul, layernorm_bwd) | rules per step ms | step with rules / without |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    printf("| %s | %zu | %d | %d | %.2f | %d | %.0f, %.0f | %.4f | %.4f |\n", model,
           gt_gpt2_num_params(m), B, T, step_ms, launches, mm, lnb, launches * worst * 1e-6,
           1.0 / (1.0 - share));
    printf("last released loss %.4f (one scalar per step left the device)\n", (double)loss);
    free(times);
    gt_loader_free(l);
    gt_gpt2_free(m);
    gt_device_close(dev);
    return 0;
}
