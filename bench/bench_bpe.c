// GPT-2 BPE encoding speed: bench_bpe TOKENIZER FILE... encodes each file as one document,
// 5 times, and prints "bytes tokens best_seconds" (the format of scripts/tiktoken_ref.cjs bench,
// so bench/bpe_vs_tiktoken.sh can put both in one table). Each run starts with a fresh gt_bpe,
// so its piece cache is cold, as tiktoken's encoder has none.
#include <gputravel/data.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s gpt2_tokenizer.bin FILE...\n", argv[0]);
        return 64;
    }
    gt_tokenizer *t = NULL;
    gt_err e = gt_tokenizer_load(&t, argv[1]);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    int nf = argc - 2;
    gt_buf *texts = calloc((size_t)nf, sizeof *texts);
    size_t bytes = 0;
    for (int i = 0; i < nf; i++) {
        e = gt_file_read_all(argv[i + 2], 1u << 30, &texts[i]);
        if (!gt_is_ok(e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        bytes += texts[i].len;
    }
    double best = 1e30;
    size_t tokens = 0;
    gt_token_buf out = {0};
    for (int run = 0; run < 5; run++) {
        double t0 = now();
        gt_bpe *b = NULL;
        e = gt_bpe_new(&b, t);
        tokens = 0;
        for (int i = 0; i < nf && gt_is_ok(e); i++) {
            size_t used = 0;
            out.len = 0;
            e = gt_bpe_encode(b, texts[i].data, texts[i].len, true, &out, &used);
            tokens += out.len;
        }
        gt_bpe_free(b);
        if (!gt_is_ok(e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    printf("%zu %zu %.6f\n", bytes, tokens, best);
    gt_token_buf_free(&out);
    for (int i = 0; i < nf; i++) {
        gt_buf_free_nowipe(&texts[i]);
    }
    free(texts);
    gt_tokenizer_free(t);
    return 0;
}
