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
           "  --text TEXT         a prompt, GPT-2 BPE with --tokenizer, else byte-level (token =\n"
           "                      byte; needs V >= 256)\n"
           "  --tokenizer PATH    llm.c tokenizer file (gpt2_tokenizer.bin): encodes --text,\n"
           "                      decodes the output\n"
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

// The message is sample's own ("bad value ..."), so the flag is not named here.
static bool parse_long(const char *s, long lo, long hi, long *out)
{
    int v = 0;
    if (!gt_is_ok(gt_cli_parse_int("", s, (int)lo, (int)hi, &v))) {
        return false;
    }
    *out = v;
    return true;
}

typedef struct {
    const char *ckpt, *prompt, *text, *tok_path;
    long ntok, topk, threads;
    float temperature;
    uint64_t seed;
    gt_device_kind kind;
} sample_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, sample_options *o)
{
    *o = (sample_options){.ntok = 64, .topk = 40, .temperature = 1.0f, .seed = 1337,
                          .kind = GT_DEVICE_CPU};
    int c;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'p': o->prompt = optarg; break;
        case 'x': o->text = optarg; break;
        case 'z': o->tok_path = optarg; break;
        case 'n': ok = parse_long(optarg, 1, 1 << 20, &o->ntok); break;
        case 't': {
            char *end = NULL;
            o->temperature = strtof(optarg, &end);
            ok = end != optarg && *end == '\0' && isfinite(o->temperature) &&
                 o->temperature >= 0.0f;
            break;
        }
        case 'k': ok = parse_long(optarg, 0, 1 << 20, &o->topk); break;
        case 's': ok = gt_is_ok(gt_cli_parse_u64("--seed", optarg, 0, UINT64_MAX, &o->seed)); break;
        case 'd': ok = gt_is_ok(gt_device_kind_parse(optarg, &o->kind)); break;
        case 'j': ok = parse_long(optarg, 0, 1024, &o->threads); break;
        default: return gt_cli_usage(CMD, "unknown option");
        }
        if (!ok) {
            return gt_cli_usage(CMD, "bad value '%s'", optarg);
        }
    }
    if (optind + 1 != argc) {
        return gt_cli_usage(CMD, "expected one checkpoint");
    }
    if (o->prompt != NULL && o->text != NULL) {
        return gt_cli_usage(CMD, "give --prompt or --text, not both");
    }
    o->ckpt = argv[optind];
    return GT_EXIT_OK;
}

// What a sampling run holds (freed by sample_free); tokens[np..np+ntok) are the generated ones.
typedef struct {
    gt_device *dev;
    gt_gpt2 *m;
    gt_tokenizer *tk;
    int32_t *tokens;
    int np;
} sample_run;

// --text through GPT-2 BPE with the --tokenizer loaded into r->tk (at most strlen tokens).
static gt_err encode_text(const sample_options *o, sample_run *r)
{
    gt_bpe *b = NULL;
    GT_TRY(gt_err_wrap(gt_bpe_new(&b, r->tk), "%s", o->tok_path));
    gt_token_buf tb = {0};
    size_t used = 0;
    gt_err err = gt_bpe_encode(b, (const uint8_t *)o->text, strlen(o->text), true, &tb, &used);
    for (size_t i = 0; gt_is_ok(err) && i < tb.len; i++) {
        r->tokens[r->np++] = (int32_t)tb.data[i];
    }
    gt_token_buf_free(&tb);
    gt_bpe_free(b);
    return err;
}

// --prompt's comma-separated ids, or --text (BPE with --tokenizer, else its bytes), into
// r->tokens.
static gt_err parse_prompt(const sample_options *o, sample_run *r, int vocab)
{
    if (o->prompt != NULL) {
        for (const char *p = o->prompt; *p;) {
            char *end = NULL;
            errno = 0;
            long v = strtol(p, &end, 10);
            GT_ENSURE(end != p && errno == 0 && v >= 0 && v < vocab, GT_E_ARG,
                      "--prompt: '%s' is not a token id below %d", p, vocab);
            r->tokens[r->np++] = (int32_t)v;
            p = *end == ',' ? end + 1 : end;
            GT_ENSURE(*end == ',' || *end == '\0', GT_E_ARG,
                      "--prompt: expected comma-separated ids");
        }
    }
    if (o->text != NULL && o->tok_path != NULL) {
        GT_TRY(encode_text(o, r));
    } else if (o->text != NULL) {
        if (vocab > GT_BYTE_VOCAB) {
            fprintf(stderr, "gputravel sample: warning: --text without --tokenizer on a model with "
                            "V = %d: the prompt's bytes are used as token ids; give --tokenizer "
                            "(gpt2_tokenizer.bin for GPT-2) to encode it with BPE\n",
                    vocab);
        }
        size_t n = strlen(o->text);
        uint16_t *bytes = calloc(n + 1, sizeof *bytes);
        GT_ENSURE(bytes != NULL, GT_E_NOMEM, "out of memory");
        gt_tokenize_bytes(bytes, (const uint8_t *)o->text, n);
        for (size_t i = 0; i < n; i++) {
            r->tokens[r->np++] = bytes[i];
        }
        free(bytes);
    }
    for (int i = 0; i < r->np && o->text != NULL; i++) {
        GT_ENSURE(r->tokens[i] < vocab, GT_E_ARG,
                  "--text: token %d is not a token of this model (V = %d)", r->tokens[i], vocab);
    }
    if (o->text != NULL && !gt_cli.quiet) {
        fprintf(stderr, "prompt: %d tokens:", r->np);  // what --text became, to check
        for (int i = 0; i < r->np; i++) {
            fprintf(stderr, " %d", r->tokens[i]);
        }
        fprintf(stderr, "\n");
    }
    return GT_OK;
}

static gt_err run(const sample_options *o, sample_run *r)
{
    gt_device_config dc = {.kind = o->kind, .threads = (int)o->threads};
    GT_TRY(gt_device_open(&r->dev, &dc));
    GT_TRY(gt_gpt2_load(&r->m, r->dev, o->ckpt));
    const gt_gpt2_config *cfg = gt_gpt2_get_config(r->m);
    if (o->tok_path != NULL) {
        GT_TRY(gt_tokenizer_load(&r->tk, o->tok_path));
        GT_ENSURE(gt_tokenizer_vocab_size(r->tk) >= (uint32_t)cfg->vocab_size, GT_E_ARG,
                  "tokenizer %s has %u tokens, the model %d", o->tok_path,
                  gt_tokenizer_vocab_size(r->tk), cfg->vocab_size);
    } else if (cfg->vocab_size <= GT_BYTE_VOCAB) {
        GT_TRY(gt_tokenizer_byte_new(&r->tk));
    }
    size_t cap = (o->prompt ? strlen(o->prompt) / 2 + 2 : o->text ? strlen(o->text) + 1 : 1) +
                 (size_t)o->ntok;
    r->tokens = calloc(cap, sizeof *r->tokens);
    GT_ENSURE(r->tokens != NULL, GT_E_NOMEM, "out of memory");
    GT_TRY(parse_prompt(o, r, cfg->vocab_size));
    if (r->np == 0) {
        int32_t eot = r->tk != NULL ? gt_tokenizer_eot(r->tk) : -1;
        r->tokens[r->np++] = eot >= 0 && eot < cfg->vocab_size ? eot : cfg->vocab_size - 1;
    }
    gt_sampler s = {.temperature = o->temperature, .top_k = (int)o->topk, .rng = o->seed};
    return gt_gpt2_generate(r->m, &s, r->tokens, r->np, r->np + (int)o->ntok);
}

// The generated ids, then (with a tokenizer) the text they decode to.
static void print_tokens(const sample_options *o, const sample_run *r)
{
    int np = r->np;
    for (int i = np; i < np + o->ntok; i++) {
        printf("%s%d", i > np ? " " : "", r->tokens[i]);
    }
    printf("\n");
    if (r->tk == NULL) {
        return;
    }
    for (int i = np; i < np + o->ntok; i++) {
        gt_span piece = {0};
        if (!gt_is_ok(gt_tokenizer_decode(r->tk, (uint32_t)r->tokens[i], &piece))) {
            printf("<%d>", r->tokens[i]);
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

int gt_cmd_sample(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    sample_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    sample_run r = {0};
    gt_err err = run(&o, &r);
    if (gt_is_ok(err)) {
        print_tokens(&o, &r);
    }
    gt_tokenizer_free(r.tk);
    free(r.tokens);
    gt_gpt2_free(r.m);
    gt_device_close(r.dev);
    if (!gt_is_ok(err)) {
        int status = gt_cli_fail(CMD, err);
        if (err.code == GT_E_FORMAT) {
            gt_cli_file_hint("sample", o.ckpt, "an llm.c model checkpoint");
        }
        return status;
    }
    return GT_EXIT_OK;
}
