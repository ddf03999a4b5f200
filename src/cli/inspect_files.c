// gputravel inspect FILE for the plain files an llm.c user brings: checkpoints (v3 fp32, v5
// bf16), token shards (v1; llama-3 and evaluation files named), tokenizer files, our training
// state, and a holder's ledger. Each inspector fills one JSON object; text mode prints the same fields.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/holder.h>
#include <gputravel/train.h>

#include <stdlib.h>
#include <string.h>

static void add_config(cJSON *o, const gt_gpt2_config *c)
{
    cJSON *m = cJSON_AddObjectToObject(o, "model");
    cJSON_AddNumberToObject(m, "max_seq_len", c->max_seq_len);
    cJSON_AddNumberToObject(m, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(m, "padded_vocab_size", c->padded_vocab_size);
    cJSON_AddNumberToObject(m, "num_layers", c->num_layers);
    cJSON_AddNumberToObject(m, "num_heads", c->num_heads);
    cJSON_AddNumberToObject(m, "channels", c->channels);
}

static gt_err inspect_llmc_checkpoint(const char *path, cJSON *o)
{
    FILE *fp = NULL;
    uint64_t size = 0;
    GT_TRY(gt_file_open_regular(path, &fp, &size));
    uint8_t hdr[GT_GPT2_CKPT_HEADER_BYTES] = {0};
    size_t got = fread(hdr, 1, sizeof hdr, fp);
    fclose(fp);
    gt_gpt2_config cfg = {0};
    int version = 0;
    GT_TRY(gt_err_wrap(gt_gpt2_ckpt_header_parse(hdr, got, &cfg, &version), "%s", path));
    size_t sizes[GT_GPT2_NUM_TENSORS];
    uint64_t n = gt_gpt2_param_sizes(&cfg, sizes);
    uint64_t want = GT_GPT2_CKPT_HEADER_BYTES + n * (version == GT_GPT2_CKPT_VERSION_BF16 ? 2 : 4);
    cJSON_AddStringToObject(o, "kind", "llmc_checkpoint");
    cJSON_AddNumberToObject(o, "version", version);
    cJSON_AddStringToObject(o, "dtype", version == GT_GPT2_CKPT_VERSION_BF16 ? "bf16" : "fp32");
    add_config(o, &cfg);
    cJSON_AddNumberToObject(o, "parameters", (double)n);
    cJSON_AddNumberToObject(o, "file_bytes", (double)size);
    cJSON_AddNumberToObject(o, "expected_bytes", (double)want);
    cJSON_AddBoolToObject(o, "size_ok", size == want);
    cJSON_AddBoolToObject(o, "plaintext_model", true);
    return GT_OK;
}

// A GPT-2 shard is read whole (streamed): token count, largest token, end-of-text count.
static gt_err inspect_shard(const char *path, const uint8_t *hdr, size_t n, cJSON *o)
{
    gt_reader r = gt_reader_init(hdr, n);
    int32_t magic = 0, version = 0, count = 0, extra = 0;
    GT_TRY(gt_reader_i32le(&r, &magic));
    GT_TRY(gt_reader_i32le(&r, &version));
    GT_TRY(gt_reader_i32le(&r, &count));
    GT_TRY(gt_reader_i32le(&r, &extra));
    if (magic == GT_SHARD_EVAL_MAGIC) {
        cJSON_AddStringToObject(o, "kind", "llmc_eval_file");
        cJSON_AddStringToObject(o, "what", "evaluation examples (dev/data/hellaswag.py, mmlu.py); "
                                           "not training data");
        cJSON_AddNumberToObject(o, "version", version);
        cJSON_AddNumberToObject(o, "examples", count);
        cJSON_AddNumberToObject(o, "longest_example_bytes", extra);
        return GT_OK;
    }
    if (version == GT_SHARD_VERSION_LLAMA3) {
        cJSON_AddStringToObject(o, "kind", "llmc_shard");
        cJSON_AddNumberToObject(o, "version", version);
        cJSON_AddStringToObject(o, "token_dtype", "uint32le (llama-3); gputravel trains GPT-2 "
                                                  "uint16 shards only");
        cJSON_AddNumberToObject(o, "tokens", count);
        return GT_OK;
    }
    gt_shard_reader sr;
    GT_TRY(gt_shard_reader_open(&sr, path));
    uint16_t *piece = malloc(sizeof(uint16_t) << 16);
    uint64_t eot = 0, total = 0;
    unsigned max = 0;
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, piece != NULL, out, GT_E_NOMEM, "out of memory");
    for (size_t got = 1; got > 0;) {
        GT_TRY_GOTO(err, gt_shard_reader_read(&sr, piece, 1 << 16, &got), out);
        for (size_t i = 0; i < got; i++) {
            max = piece[i] > max ? piece[i] : max;
            eot += piece[i] == 50256;
        }
        total += got;
    }
    cJSON_AddStringToObject(o, "kind", "llmc_shard");
    cJSON_AddNumberToObject(o, "version", version);
    cJSON_AddStringToObject(o, "token_dtype", "uint16le");
    cJSON_AddNumberToObject(o, "tokens", (double)total);
    cJSON_AddNumberToObject(o, "max_token", max);
    cJSON_AddNumberToObject(o, "gpt2_end_of_text_tokens", (double)eot);
    cJSON_AddBoolToObject(o, "fits_byte_vocab", total == 0 || max < 256);
out:
    free(piece);
    gt_shard_reader_close(&sr);
    return err;
}

static gt_err inspect_tokenizer(const char *path, cJSON *o)
{
    gt_tokenizer *t = NULL;
    GT_TRY(gt_tokenizer_load(&t, path));
    size_t longest = 0;
    for (uint32_t i = 0; i < gt_tokenizer_vocab_size(t); i++) {
        gt_span s = {0};
        if (gt_is_ok(gt_tokenizer_decode(t, i, &s)) && s.len > longest) {
            longest = s.len;
        }
    }
    gt_bpe *b = NULL;
    gt_err bpe = gt_bpe_new(&b, t);
    gt_bpe_free(b);
    cJSON_AddStringToObject(o, "kind", "llmc_tokenizer");
    cJSON_AddNumberToObject(o, "vocab_size", gt_tokenizer_vocab_size(t));
    cJSON_AddNumberToObject(o, "end_of_text", gt_tokenizer_eot(t));
    cJSON_AddNumberToObject(o, "longest_token_bytes", (double)longest);
    cJSON_AddBoolToObject(o, "byte_level_bpe", gt_is_ok(bpe));
    gt_tokenizer_free(t);
    return GT_OK;
}

static gt_err inspect_state(const char *path, cJSON *o)
{
    gt_train_state_summary s;
    GT_TRY(gt_train_state_describe(path, &s));
    char hex[2 * GT_WEIGHTS_SHA_BYTES + 1];
    cJSON_AddStringToObject(o, "kind", "training_state");
    cJSON_AddNumberToObject(o, "version", s.version);
    cJSON_AddNumberToObject(o, "step", (double)s.step);
    add_config(o, &s.cfg);
    cJSON_AddNumberToObject(o, "parameters", (double)s.nparams);
    cJSON_AddBoolToObject(o, "has_moments", s.has_moments);
    cJSON_AddNumberToObject(o, "loader_epoch", (double)s.pos.epoch);
    cJSON_AddNumberToObject(o, "loader_shard", (double)s.pos.shard);
    cJSON_AddNumberToObject(o, "loader_sample", (double)s.pos.sample);
    if (s.version >= 2) {
        gt_hex_encode(hex, sizeof hex, s.weights_sha, GT_WEIGHTS_SHA_BYTES);
        cJSON_AddStringToObject(o, "weights_sha256", hex);
        gt_hex_encode(hex, sizeof hex, s.prev_sha, GT_WEIGHTS_SHA_BYTES);
        cJSON_AddStringToObject(o, "previous_checkpoint_sha256", hex);
    }
    cJSON_AddBoolToObject(o, "size_ok", s.size_ok);
    cJSON_AddBoolToObject(o, "plaintext_model", true);
    return GT_OK;
}

// Verified whole (every hash and signature), as `gputravel ledger verify` does.
static gt_err inspect_ledger(const char *path, cJSON *o)
{
    gt_ledger_summary sum;
    GT_TRY(gt_ledger_verify_file(path, NULL, NULL, &sum));
    char hex[2 * GT_SHA256_BYTES + 1];
    cJSON_AddStringToObject(o, "kind", "holder_ledger");
    cJSON_AddNumberToObject(o, "entries", (double)sum.entries);
    gt_hex_encode(hex, sizeof hex, sum.head, sizeof sum.head);
    cJSON_AddStringToObject(o, "head_sha256", hex);
    gt_hex_encode(hex, sizeof hex, sum.holder_key, sizeof sum.holder_key);
    cJSON_AddStringToObject(o, "holder_ed25519", hex);
    cJSON_AddBoolToObject(o, "verified", true);
    return GT_OK;
}

static void print_text(const cJSON *o, int indent)
{
    for (const cJSON *c = o->child; c != NULL; c = c->next) {
        if (cJSON_IsObject(c)) {
            printf("%*s%s:\n", indent, "", c->string);
            print_text(c, indent + 2);
        } else if (cJSON_IsString(c)) {
            printf("%*s%-*s %s\n", indent, "", 28 - indent, c->string, c->valuestring);
        } else if (cJSON_IsBool(c)) {
            printf("%*s%-*s %s\n", indent, "", 28 - indent, c->string, cJSON_IsTrue(c) ? "yes" : "no");
        } else if (cJSON_IsNumber(c)) {
            printf("%*s%-*s %.0f\n", indent, "", 28 - indent, c->string, c->valuedouble);
        }
    }
}

int gt_cli_inspect_plain_file(const char *path, bool json)
{
    FILE *fp = NULL;
    uint64_t size = 0;
    uint8_t head[16] = {0};
    gt_err e = gt_file_open_regular(path, &fp, &size);
    if (!gt_is_ok(e)) {
        return gt_cli_fail("inspect", e);
    }
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    uint32_t magic = n >= 4 ? (uint32_t)head[0] | (uint32_t)head[1] << 8 |
                                  (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24
                            : 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    switch (magic) {
    case GT_GPT2_CKPT_MAGIC: e = inspect_llmc_checkpoint(path, o); break;
    case GT_SHARD_MAGIC:
    case GT_SHARD_EVAL_MAGIC: e = inspect_shard(path, head, n, o); break;
    case GT_TOKENIZER_MAGIC: e = inspect_tokenizer(path, o); break;
    case GT_TRAIN_STATE_MAGIC: e = inspect_state(path, o); break;
    default:
        if (n >= 7 && memcmp(head, "{\"seq\":", 7) == 0) {
            e = inspect_ledger(path, o);
            break;
        }
        cJSON_Delete(o);
        return -1;  // not one of these: the caller tries the sealed formats
    }
    if (!gt_is_ok(e)) {
        cJSON_Delete(o);
        return gt_cli_fail("inspect", e);
    }
    if (json) {
        return gt_cli_print_json(o);
    }
    print_text(o, 0);
    cJSON_Delete(o);
    return GT_EXIT_OK;
}
