// Fuzz: text given to the GPT-2 BPE encoder is untrusted (any bytes, not only UTF-8). One call
// and a stream cut every (first byte % 23 + 1) bytes must give the same tokens, and decoding
// them must give the input back.
#include <gputravel/data.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// A small byte-level BPE vocabulary: the 256 bytes, then merges in rank order.
static gt_bpe *make_bpe(gt_tokenizer **tok)
{
    static const char *const merges[] = {"th", "he", "the", " t", " the", "ll", "aa", "aaaa",
                                         "  ", "    ", "\xc3\xa9", "'s", "12", "123", "\r\n",
                                         "--", "----", "\xe6\x97", "\xe6\x97\xa5", "in", "ing"};
    enum { NM = sizeof merges / sizeof *merges };
    static uint8_t bytes[256];
    gt_span toks[256 + NM + 1];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        toks[i] = (gt_span){bytes + i, 1};
    }
    for (int i = 0; i < NM; i++) {
        toks[256 + i] = (gt_span){(const uint8_t *)merges[i], strlen(merges[i])};
    }
    toks[256 + NM] = (gt_span){(const uint8_t *)"<|endoftext|>", 13};
    gt_bpe *b = NULL;
    if (!gt_is_ok(gt_tokenizer_from_tokens(tok, toks, 256 + NM + 1, 256 + NM)) ||
        !gt_is_ok(gt_bpe_new(&b, *tok))) {
        __builtin_trap();
    }
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gt_tokenizer *tok;  // built once: the cache carries over between inputs, as in use
    static gt_bpe *b;
    if (b == NULL) {
        b = make_bpe(&tok);
    }
    gt_token_buf whole = {0}, streamed = {0};
    size_t used = 0;
    if (!gt_is_ok(gt_bpe_encode(b, data, size, true, &whole, &used)) || used != size) {
        __builtin_trap();
    }
    size_t step = size > 0 ? data[0] % 23 + 1 : 1, start = 0, fed = 0;
    while (fed < size || start < fed) {
        fed = fed + step < size ? fed + step : size;
        bool final = fed == size;
        if (!gt_is_ok(gt_bpe_encode(b, data + start, fed - start, final, &streamed, &used))) {
            __builtin_trap();
        }
        start += used;
        if (final && start != size) {
            __builtin_trap();
        }
    }
    if (whole.len != streamed.len ||
        (whole.len > 0 && memcmp(whole.data, streamed.data, whole.len * sizeof *whole.data) != 0)) {
        __builtin_trap();
    }
    size_t at = 0;
    for (size_t i = 0; i < whole.len; i++) {
        gt_span p = {0};
        if (!gt_is_ok(gt_tokenizer_decode(tok, whole.data[i], &p)) || p.len > size - at ||
            memcmp(p.data, data + at, p.len) != 0) {
            __builtin_trap();
        }
        at += p.len;
    }
    if (at != size) {
        __builtin_trap();
    }
    gt_token_buf_free(&whole);
    gt_token_buf_free(&streamed);
    return 0;
}
