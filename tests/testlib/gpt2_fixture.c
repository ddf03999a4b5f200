// The GPT-2 tokenizers of the BPE tests (gpt2_fixture.h).
#include "gpt2_fixture.h"

#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>

gt_tokenizer *gt_test_gpt2_subset(void)
{
    gt_buf tsv = {0};
    gt_test_read_data("gpt2/subset.tsv", &tsv);
    GT_ASSERT_OK(gt_buf_append(&tsv, "", 1));
    static const uint8_t filler[] = {0xff, 0xfe};
    static const char eot[] = "<|endoftext|>";
    gt_span *tokens = calloc(GT_GPT2_VOCAB, sizeof *tokens);
    uint8_t *bytes = calloc(GT_GPT2_VOCAB, 256);
    assert_non_null(tokens);
    assert_non_null(bytes);
    for (uint32_t i = 0; i < GT_GPT2_VOCAB; i++) {
        tokens[i] = (gt_span){filler, sizeof filler};
    }
    tokens[GT_GPT2_EOT] = (gt_span){(const uint8_t *)eot, sizeof eot - 1};
    char *save = NULL;
    for (char *line = strtok_r((char *)tsv.data, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = '\0';
        uint32_t id = (uint32_t)strtoul(line, NULL, 10);
        assert_true(id < GT_GPT2_EOT);
        size_t n = 0;
        GT_ASSERT_OK(gt_hex_decode(bytes + (size_t)id * 256, 256, &n, tab + 1));
        tokens[id] = (gt_span){bytes + (size_t)id * 256, n};
    }
    gt_tokenizer *t = NULL;
    GT_ASSERT_OK(gt_tokenizer_from_tokens(&t, tokens, GT_GPT2_VOCAB, GT_GPT2_EOT));
    free(tokens);
    free(bytes);
    gt_buf_free_nowipe(&tsv);
    return t;
}

void gt_test_gpt2_paths(char *file, size_t file_cap, char *npm, size_t npm_cap)
{
    snprintf(file, file_cap, "%s/gpt2/gpt2_tokenizer.bin", GT_BUILD_DIR);
    snprintf(npm, npm_cap, "%s/gpt2/npm", GT_BUILD_DIR);
}

gt_tokenizer *gt_test_gpt2_full(char *why, size_t cap)
{
    char file[1024], npm[1024];
    gt_test_gpt2_paths(file, sizeof file, npm, sizeof npm);
    gt_tokenizer *t = NULL;
    gt_err e = gt_tokenizer_load(&t, file);
    if (!gt_is_ok(e)) {
        snprintf(why, cap, "no GPT-2 tokenizer (%s); scripts/gpt2_tokenizer.sh makes it from npm",
                 e.msg);
        return NULL;
    }
    return t;
}

void gt_test_read_token_lines(const char *rel, uint32_t **tokens, size_t *n)
{
    gt_buf b = {0};
    gt_test_read_data(rel, &b);
    GT_ASSERT_OK(gt_buf_append(&b, "", 1));
    size_t cap = 16, len = 0;
    uint32_t *t = malloc(cap * sizeof *t);
    char *save = NULL;
    for (char *line = strtok_r((char *)b.data, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (len == cap) {
            cap *= 2;
            t = realloc(t, cap * sizeof *t);
            assert_non_null(t);
        }
        t[len++] = (uint32_t)strtoul(line, NULL, 10);
    }
    gt_buf_free_nowipe(&b);
    *tokens = t;
    *n = len;
}
