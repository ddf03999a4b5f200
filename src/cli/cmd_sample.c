// gputravel sample: text from a GPT-2 checkpoint (temperature, top-k, seed).
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/device.h>
#include <gputravel/train.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "sample"

static void usage(void)
{
    printf("usage: gputravel sample [OPTIONS] CKPT\n"
           "\n"
           "Generates tokens from an llm.c fp32 checkpoint and prints their ids, then the text\n"
           "they decode to (with --tokenizer, or byte-level when the vocabulary is V <= 256).\n"
           "\n"
           "  --prompt IDS        comma-separated token ids to start from (default: the\n"
           "                      tokenizer's end-of-text token, else V-1)\n"
           "  --text TEXT         a byte-level prompt (token = byte; needs V >= 256)\n"
           "  --tokenizer PATH    llm.c tokenizer file (gpt2_tokenizer.bin) for decoding\n"
           "  --tokens N          tokens to generate (default 64)\n"
           "  --temperature F     0 is greedy (default 1.0)\n"
           "  --top-k K           sample among the K most likely (0: all; default 40)\n"
           "  --seed S            sampler seed (default 1337)\n"
           "  --device cpu|sim|cuda --threads N\n");
}

static const struct option long_opts[] = {
    {"prompt", required_argument, NULL, 'p'},      {"tokens", required_argument, NULL, 'n'},
    {"temperature", required_argument, NULL, 't'}, {"top-k", required_argument, NULL, 'k'},
    {"seed", required_argument, NULL, 's'},        {"device", required_argument, NULL, 'd'},
    {"threads", required_argument, NULL, 'j'},     {"text", required_argument, NULL, 'x'},
    {"tokenizer", required_argument, NULL, 'z'},   {NULL, 0, NULL, 0},
};

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

int gt_cmd_sample(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    const char *prompt = NULL, *text = NULL, *tok_path = NULL;
    long ntok = 64, topk = 40, threads = 0;
    float temperature = 1.0f;
    uint64_t seed = 1337;
    gt_device_kind kind = GT_DEVICE_CPU;
    int c;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'p': prompt = optarg; break;
        case 'x': text = optarg; break;
        case 'z': tok_path = optarg; break;
        case 'n': ok = parse_long(optarg, 1, 1 << 20, &ntok); break;
        case 't': {
            char *end = NULL;
            temperature = strtof(optarg, &end);
            ok = end != optarg && *end == '\0' && isfinite(temperature) && temperature >= 0.0f;
            break;
        }
        case 'k': ok = parse_long(optarg, 0, 1 << 20, &topk); break;
        case 's': {
            char *end = NULL;
            seed = strtoull(optarg, &end, 10);
            ok = end != optarg && *end == '\0';
            break;
        }
        case 'd': ok = gt_is_ok(gt_device_kind_parse(optarg, &kind)); break;
        case 'j': ok = parse_long(optarg, 0, 1024, &threads); break;
        default: return gt_cli_usage(CMD, "unknown option");
        }
        if (!ok) {
            return gt_cli_usage(CMD, "bad value '%s'", optarg);
        }
    }
    if (optind + 1 != argc) {
        return gt_cli_usage(CMD, "expected one checkpoint");
    }
    if (prompt != NULL && text != NULL) {
        return gt_cli_usage(CMD, "give --prompt or --text, not both");
    }
    const char *ckpt = argv[optind];
    gt_tokenizer *tk = NULL;
    gt_err err = GT_OK;
    gt_device *dev = NULL;
    gt_gpt2 *m = NULL;
    int32_t *tokens = NULL;
    gt_device_config dc = {.kind = kind, .threads = (int)threads};
    GT_TRY_GOTO(err, gt_device_open(&dev, &dc), out);
    GT_TRY_GOTO(err, gt_gpt2_load(&m, dev, ckpt), out);
    const gt_gpt2_config *cfg = gt_gpt2_get_config(m);
    if (tok_path != NULL) {
        GT_TRY_GOTO(err, gt_tokenizer_load(&tk, tok_path), out);
        GT_ENSURE_GOTO(err, gt_tokenizer_vocab_size(tk) >= (uint32_t)cfg->vocab_size, out,
                       GT_E_ARG, "tokenizer %s has %u tokens, the model %d", tok_path,
                       gt_tokenizer_vocab_size(tk), cfg->vocab_size);
    } else if (cfg->vocab_size <= GT_BYTE_VOCAB) {
        GT_TRY_GOTO(err, gt_tokenizer_byte_new(&tk), out);
    }
    size_t cap = (prompt ? strlen(prompt) / 2 + 2 : text ? strlen(text) + 1 : 1) + (size_t)ntok;
    tokens = calloc(cap, sizeof *tokens);
    GT_ENSURE_GOTO(err, tokens != NULL, out, GT_E_NOMEM, "out of memory");
    int np = 0;
    if (prompt != NULL) {
        for (const char *p = prompt; *p;) {
            char *end = NULL;
            errno = 0;
            long v = strtol(p, &end, 10);
            GT_ENSURE_GOTO(err, end != p && errno == 0 && v >= 0 && v < cfg->vocab_size, out,
                           GT_E_ARG, "--prompt: '%s' is not a token id below %d", p,
                           cfg->vocab_size);
            tokens[np++] = (int32_t)v;
            p = *end == ',' ? end + 1 : end;
            GT_ENSURE_GOTO(err, *end == ',' || *end == '\0', out, GT_E_ARG,
                           "--prompt: expected comma-separated ids");
        }
    }
    if (text != NULL) {
        size_t n = strlen(text);
        uint16_t *bytes = calloc(n + 1, sizeof *bytes);
        GT_ENSURE_GOTO(err, bytes != NULL, out, GT_E_NOMEM, "out of memory");
        gt_tokenize_bytes(bytes, (const uint8_t *)text, n);
        for (size_t i = 0; i < n; i++) {
            tokens[np++] = bytes[i];
        }
        free(bytes);
        for (int i = 0; i < np; i++) {
            GT_ENSURE_GOTO(err, tokens[i] < cfg->vocab_size, out, GT_E_ARG,
                           "--text: byte %d is not a token of this model (V = %d)", tokens[i],
                           cfg->vocab_size);
        }
    }
    if (np == 0) {
        int32_t eot = tk != NULL ? gt_tokenizer_eot(tk) : -1;
        tokens[np++] = eot >= 0 && eot < cfg->vocab_size ? eot : cfg->vocab_size - 1;
    }
    gt_sampler s = {.temperature = temperature, .top_k = (int)topk, .rng = seed};
    GT_TRY_GOTO(err, gt_gpt2_generate(m, &s, tokens, np, np + (int)ntok), out);
    for (int i = np; i < np + ntok; i++) {
        printf("%s%d", i > np ? " " : "", tokens[i]);
    }
    printf("\n");
    if (tk != NULL) {
        for (int i = np; i < np + ntok; i++) {
            gt_span piece = {0};
            if (!gt_is_ok(gt_tokenizer_decode(tk, (uint32_t)tokens[i], &piece))) {
                printf("<%d>", tokens[i]);
                continue;
            }
            for (size_t k = 0; k < piece.len; k++) {
                int b = piece.data[k];
                if (isprint(b) || b == '\n' || b == '\t' || b >= 0x80) {
                    putchar(b);  // UTF-8 sequences pass through whole
                } else {
                    printf("\\x%02x", b);
                }
            }
        }
        printf("\n");
    }
out:
    gt_tokenizer_free(tk);
    free(tokens);
    gt_gpt2_free(m);
    gt_device_close(dev);
    if (err.code != GT_E_NONE) {
        return gt_cli_fail(CMD, err);
    }
    return GT_EXIT_OK;
}
