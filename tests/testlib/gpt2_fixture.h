// GPT-2 tokenizers for the BPE tests. The subset (tests/testdata/gpt2/subset.tsv, made by
// scripts/gpt2_subset.cjs) holds every GPT-2 token that BPE forms on tests/testdata/gpt2/*.txt at
// its real id; the other ids hold a filler ("\xff\xfe", never a piece of valid text), so on those
// texts it encodes exactly as GPT-2 does. The full tokenizer is <build>/gpt2/gpt2_tokenizer.bin,
// made by scripts/gpt2_tokenizer.sh when node and npm are there.
#ifndef GT_GPT2_FIXTURE_H
#define GT_GPT2_FIXTURE_H

#include <gputravel/data.h>

#include <stdbool.h>

#define GT_GPT2_VOCAB 50257
#define GT_GPT2_EOT 50256

// The subset tokenizer (fails the test if the fixture cannot be read). Caller frees.
gt_tokenizer *gt_test_gpt2_subset(void);
// The full tokenizer, or NULL (why says why) when it was not made. Caller frees.
gt_tokenizer *gt_test_gpt2_full(char *why, size_t cap);
// Path of the full tokenizer file and of js-tiktoken's npm folder.
void gt_test_gpt2_paths(char *file, size_t file_cap, char *npm, size_t npm_cap);
// Reads a file of token ids, one a line (the fixture's *.tokens); caller frees tokens.
void gt_test_read_token_lines(const char *rel, uint32_t **tokens, size_t *n);

#endif
