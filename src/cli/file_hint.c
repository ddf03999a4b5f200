// What a file given in the wrong place is, and the command that makes or opens the kind wanted:
// the hint a format error alone cannot give ("bad magic 538976288" says nothing to a user who
// passed a text file).
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/train.h>

#include <string.h>

// True when the bytes read so far look like text (UTF-8 or ASCII, no NUL or other controls
// than tab, newline, carriage return).
static bool looks_like_text(const uint8_t *p, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') {
            return false;
        }
    }
    return true;
}

static const char *what_is(const uint8_t *head, size_t n)
{
    uint32_t magic = n >= 4 ? (uint32_t)head[0] | (uint32_t)head[1] << 8 |
                                  (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24
                            : 0;
    if (n >= 8 && memcmp(head, GT_SCKPT_MAGIC, 8) == 0) {
        return "a sealed checkpoint (open it with gputravel open-checkpoint; its recipients only)";
    }
    if (n >= 8 && memcmp(head, GT_MANIFEST_MAGIC, 8) == 0) {
        return "a sealed dataset's manifest (unseal the dataset folder with gputravel unseal)";
    }
    if (n >= 8 && memcmp(head, GT_CHUNK_MAGIC, 8) == 0) {
        return "one chunk of a sealed dataset (unseal the dataset folder with gputravel unseal)";
    }
    if (magic == GT_SHARD_MAGIC) {
        return "a token shard";
    }
    if (magic == GT_GPT2_CKPT_MAGIC) {
        return "an llm.c model checkpoint";
    }
    if (magic == GT_TOKENIZER_MAGIC) {
        return "an llm.c tokenizer file";
    }
    if (looks_like_text(head, n)) {
        return "text";
    }
    return NULL;
}

void gt_cli_file_hint(const char *cmd, const char *path, const char *wanted)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        return;
    }
    uint8_t head[256];
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    const char *is = what_is(head, n);
    if (is == NULL || strncmp(is, wanted, strlen(wanted)) == 0) {
        return;
    }
    bool text_for_shard = strcmp(is, "text") == 0 && strcmp(wanted, "a token shard") == 0;
    fprintf(stderr, "gputravel %s: %s is %s; this command wants %s%s\n", cmd, path, is, wanted,
            text_for_shard ? " (make one with gputravel tokenize FILE --out SHARD)" : "");
}
