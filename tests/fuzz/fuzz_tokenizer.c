// Fuzz: llm.c tokenizer files are untrusted input.
#include <gputravel/data.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_tokenizer *t = NULL;
    gt_err e = gt_tokenizer_parse(&t, data, size);
    if (e.code == GT_E_NONE) {
        gt_span piece = {0};
        for (uint32_t i = 0; i < gt_tokenizer_vocab_size(t); i++) {
            if (!gt_is_ok(gt_tokenizer_decode(t, i, &piece)) || piece.len == 0) {
                __builtin_trap();  // a parsed tokenizer must decode every token
            }
        }
        gt_tokenizer_free(t);
    }
    return 0;
}
