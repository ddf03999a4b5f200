// Sampling: temperature, top-k, a seeded generator; the model runs a full forward per token over
// the last maxT tokens (no KV cache, as llm.c).
#include "train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int gt_sampler_pick(gt_sampler *s, const float *logits, int V)
{
    int best = 0;
    for (int i = 1; i < V; i++) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    if (s->temperature <= 0.0f) {
        return best;
    }
    // Top-k: keep logits >= the k-th largest (ties may keep a few more).
    float cutoff = -INFINITY;
    if (s->top_k > 0 && s->top_k < V) {
        float *sorted = malloc(sizeof(float) * (size_t)V);
        if (sorted == NULL) {
            return best;
        }
        memcpy(sorted, logits, sizeof(float) * (size_t)V);
        qsort(sorted, (size_t)V, sizeof(float), cmp_desc);
        cutoff = sorted[s->top_k - 1];
        free(sorted);
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        if (logits[i] >= cutoff) {
            sum += exp((double)(logits[i] - logits[best]) / s->temperature);
        }
    }
    double u = (double)gt_rng_f32(&s->rng) * sum, acc = 0.0;
    int last = best;
    for (int i = 0; i < V; i++) {
        if (logits[i] >= cutoff) {
            acc += exp((double)(logits[i] - logits[best]) / s->temperature);
            last = i;
            if (u < acc) {
                return i;
            }
        }
    }
    return last;
}

gt_err gt_gpt2_generate(gt_gpt2 *m, gt_sampler *s, int32_t *tokens, int n_prompt, int n_total)
{
    const gt_gpt2_config *c = gt_gpt2_get_config(m);
    GT_ENSURE(n_prompt >= 1 && n_prompt <= n_total, GT_E_ARG,
              "sample: %d prompt tokens for %d in total", n_prompt, n_total);
    for (int i = 0; i < n_prompt; i++) {
        GT_ENSURE(tokens[i] >= 0 && tokens[i] < c->vocab_size, GT_E_ARG,
                  "sample: prompt token %d is %d (vocab %d)", i, tokens[i], c->vocab_size);
    }
    gt_device *dev = gt_gpt2_internal_device(m);
    int maxT = c->max_seq_len;
    gt_dbuf inp = 0;
    float *logits = malloc(sizeof(float) * (size_t)c->padded_vocab_size);
    GT_ENSURE(logits != NULL, GT_E_NOMEM, "sample: out of memory");
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_device_alloc(dev, (uint64_t)maxT * 4, 0, &inp), out);
    for (int n = n_prompt; n < n_total; n++) {
        int start = n > maxT ? n - maxT : 0, T = n - start;
        GT_TRY_GOTO(err, gt_device_copy_in(dev, inp, 0, tokens + start, (uint64_t)T * 4), out);
        float loss = 0.0f;
        GT_TRY_GOTO(err, gt_gpt2_forward(m, inp, 0, 1, T, &loss), out);
        GT_TRY_GOTO(err, gt_gpt2_logits_read(m, 0, T - 1, logits, (size_t)c->padded_vocab_size),
                    out);
        tokens[n] = gt_sampler_pick(s, logits, c->vocab_size);
    }
out:
    if (inp != 0) {
        gt_err e = gt_device_free(dev, inp);
        (void)e;
    }
    free(logits);
    return err;
}
