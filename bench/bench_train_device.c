// Training throughput: GPT-2 forward + backward + AdamW on random tokens, tokens per second.
//   bench_train_device [--device cpu|cuda] [--model 124M|tiny] [-B 8] [-T 1024] [--steps 10]
// The first step (allocation, cuBLAS heuristics, page faults) is reported apart as setup; the
// table gives the median and the mean of the timed steps that follow.
#include "bench_common.h"
#include <gputravel/device.h>
#include <gputravel/train.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define CHECK(expr)                                                                 \
    do {                                                                            \
        gt_err e_ = (expr);                                                         \
        if (e_.code != GT_E_NONE) {                                                 \
            fprintf(stderr, "bench_train: %s: %s\n", #expr, e_.msg);                \
            return 1;                                                               \
        }                                                                           \
    } while (0)

int main(int argc, char **argv)
{
    bench_blas_core(argv);
    const char *device = "cpu", *model = "tiny";
    int B = 4, T = 64, steps = 5;
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"model", required_argument, 0, 'm'},
                                         {"steps", required_argument, 0, 's'},
                                         {0, 0, 0, 0}};
    int c = 0;
    while ((c = getopt_long(argc, argv, "B:T:", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'm': model = optarg; break;
        case 's': steps = atoi(optarg); break;
        case 'B': B = atoi(optarg); break;
        case 'T': T = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: bench_train [--device cpu|cuda] [--model 124M|tiny] [-B n] "
                            "[-T n] [--steps n]\n");
            return 64;
        }
    }
    gt_gpt2_config cfg = {.max_seq_len = 1024, .vocab_size = 50257, .padded_vocab_size = 50304,
                          .num_layers = 12, .num_heads = 12, .channels = 768};
    if (strcmp(model, "tiny") == 0) {
        cfg = (gt_gpt2_config){.max_seq_len = 256, .vocab_size = 1000, .padded_vocab_size = 1024,
                               .num_layers = 2, .num_heads = 4, .channels = 128};
    } else if (strcmp(model, "124M") != 0) {
        fprintf(stderr, "bench_train: unknown model '%s'\n", model);
        return 64;
    }
    if (B < 1 || T < 1 || T > cfg.max_seq_len || steps < 1) {
        fprintf(stderr, "bench_train: bad -B/-T/--steps\n");
        return 64;
    }
    gt_device_config dc = {.threads = 0};
    CHECK(gt_device_kind_parse(device, &dc.kind));
    gt_device *dev = NULL;
    CHECK(gt_device_open(&dev, &dc));
    gt_gpt2 *m = NULL;
    CHECK(gt_gpt2_create(&m, dev, &cfg));
    CHECK(gt_gpt2_init_random(m, 1));
    size_t bt = (size_t)B * T;
    int32_t *tok = malloc((bt + 1) * sizeof *tok);
    uint64_t rng = 7;
    for (size_t i = 0; i <= bt; i++) {
        tok[i] = (int32_t)(gt_rng_u32(&rng) % (uint32_t)cfg.vocab_size);
    }
    gt_dbuf x = 0, y = 0;
    CHECK(gt_device_alloc(dev, bt * 4, 0, &x));
    CHECK(gt_device_alloc(dev, bt * 4, 0, &y));
    CHECK(gt_device_copy_in(dev, x, 0, tok, bt * 4));
    CHECK(gt_device_copy_in(dev, y, 0, tok + 1, bt * 4));
    gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f,
                    .grad_clip = 1.0f};
    double *times = calloc((size_t)steps, sizeof *times);
    double setup = 0.0;
    float loss = 0.0f;
    for (int s = -1; s < steps; s++) {
        double t0 = now();
        CHECK(gt_gpt2_zero_grad(m));
        CHECK(gt_gpt2_forward_backward(m, x, y, B, T, 1.0f, &loss));
        CHECK(gt_gpt2_update(m, &opt, 3e-4f, NULL));
        CHECK(gt_device_sync(dev));
        double dt = now() - t0;
        if (s < 0) {
            setup = dt;
        } else {
            times[s] = dt;
        }
        fprintf(stderr, "step %d: loss %.4f, %.1f ms\n", s + 1, loss, dt * 1e3);
    }
    double mean = 0.0;
    for (int s = 0; s < steps; s++) {
        mean += times[s] / steps;
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    double med = times[steps / 2];
    printf("| device | model | params | B | T | first step (setup) ms | median step ms | mean step ms "
           "| tokens/s (median) |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    printf("| %s | %s | %zu | %d | %d | %.1f | %.1f | %.1f | %.0f |\n", device, model,
           gt_gpt2_num_params(m), B, T, setup * 1e3, med * 1e3, mean * 1e3, (double)bt / med);
    free(times);
    free(tok);
    gt_gpt2_free(m);
    gt_device_close(dev);
    return 0;
}
