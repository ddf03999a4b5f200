// gputravel inspect: a sealed dataset's manifest, or a sealed checkpoint's header, as text or
// JSON (no key needed).
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(void)
{
    printf("usage: gputravel inspect DSDIR [--json]\n"
           "       gputravel inspect SEALED-CHECKPOINT [--json]\n"
           "\n"
           "A file is read as a sealed checkpoint: its header (agreement hash, training step,\n"
           "model config, recipients and their X25519 keys, sizes) is shown without a key; the\n"
           "body is authenticated only by gputravel open-checkpoint.\n"
           "\n"
           "Shows a sealed dataset's manifest after checking its signature against the holder key\n"
           "it names: dataset id, holder key, token type, vocabulary, sizes, and per chunk its\n"
           "plaintext length, IV, GCM tag and the SHA-256 of its file. Needs no key. (The chunk\n"
           "files themselves are checked by gputravel verify-dataset.)\n"
           "\n"
           "      --json     print JSON instead of text\n"
           "  -h, --help     this help\n");
}

static void hex(char *out, size_t cap, const uint8_t *p, size_t n)
{
    gt_hex_encode(out, cap, p, n);
}

// Prints o (and frees it).
static int print_cjson(cJSON *o)
{
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (text == NULL) {
        return gt_cli_fail("inspect", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    printf("%s\n", text);
    free(text);
    return GT_EXIT_OK;
}

static int print_json(const gt_manifest *m)
{
    char b[2 * GT_ED25519_PUBLIC_BYTES + 1];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", m->version);
    hex(b, sizeof b, m->dataset_id, sizeof m->dataset_id);
    cJSON_AddStringToObject(o, "dataset_id", b);
    hex(b, sizeof b, m->holder_pub, sizeof m->holder_pub);
    cJSON_AddStringToObject(o, "holder_ed25519", b);
    cJSON_AddStringToObject(o, "suite", "AES-256-GCM/HKDF-SHA256/SHA-256/Ed25519");
    cJSON_AddStringToObject(o, "token_dtype", "uint16le");
    cJSON_AddNumberToObject(o, "vocab_size", m->vocab_size);
    cJSON_AddNumberToObject(o, "token_count", (double)m->token_count);
    cJSON_AddNumberToObject(o, "plaintext_bytes", (double)(2 * m->token_count));
    cJSON_AddNumberToObject(o, "chunk_size", (double)m->chunk_size);
    cJSON_AddNumberToObject(o, "chunk_count", m->chunk_count);
    cJSON_AddBoolToObject(o, "signature_valid", true);
    cJSON *chunks = cJSON_AddArrayToObject(o, "chunks");
    for (uint32_t i = 0; i < m->chunk_count; i++) {
        const gt_manifest_chunk *c = &m->chunks[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "index", i);
        cJSON_AddNumberToObject(e, "plaintext_bytes", (double)c->plaintext_len);
        cJSON_AddNumberToObject(e, "file_bytes", (double)gt_manifest_chunk_file_bytes(m, i));
        hex(b, sizeof b, c->iv, sizeof c->iv);
        cJSON_AddStringToObject(e, "iv", b);
        hex(b, sizeof b, c->tag, sizeof c->tag);
        cJSON_AddStringToObject(e, "tag", b);
        hex(b, sizeof b, c->file_sha256, sizeof c->file_sha256);
        cJSON_AddStringToObject(e, "file_sha256", b);
        cJSON_AddItemToArray(chunks, e);
    }
    return print_cjson(o);
}

static void print_text(const gt_manifest *m, const char *dsdir)
{
    char b[2 * GT_ED25519_PUBLIC_BYTES + 1], s1[32], s2[32];
    printf("sealed dataset %s (manifest version %u, signature valid)\n", dsdir, m->version);
    hex(b, sizeof b, m->dataset_id, sizeof m->dataset_id);
    printf("  dataset id      %s\n", b);
    hex(b, sizeof b, m->holder_pub, sizeof m->holder_pub);
    printf("  holder key      %s (Ed25519)\n", b);
    printf("  cipher suite    AES-256-GCM, HKDF-SHA256 chunk keys, SHA-256, Ed25519\n");
    printf("  tokens          %llu uint16 LE, vocabulary %u\n",
           (unsigned long long)m->token_count, m->vocab_size);
    gt_format_size(s1, sizeof s1, 2 * m->token_count);
    gt_format_size(s2, sizeof s2, m->chunk_size);
    printf("  plaintext       %s in %u chunk%s of up to %s\n", s1, m->chunk_count,
           m->chunk_count == 1 ? "" : "s", s2);
    printf("  chunk  plaintext  IV                        SHA-256 of chunk file\n");
    for (uint32_t i = 0; i < m->chunk_count; i++) {
        char iv[2 * GT_AEAD_IV_BYTES + 1], h[2 * GT_SHA256_BYTES + 1];
        hex(iv, sizeof iv, m->chunks[i].iv, sizeof m->chunks[i].iv);
        hex(h, sizeof h, m->chunks[i].file_sha256, sizeof m->chunks[i].file_sha256);
        printf("  %5u  %9llu  %s  %s\n", i, (unsigned long long)m->chunks[i].plaintext_len, iv, h);
    }
}

static int print_sckpt(const gt_sckpt_header *h, const char *path, bool json)
{
    char hash[2 * GT_SHA256_BYTES + 1], b[2 * GT_X25519_BYTES + 1];
    char signer[2 * GT_ED25519_PUBLIC_BYTES + 1];
    hex(hash, sizeof hash, h->agreement_hash, sizeof h->agreement_hash);
    hex(signer, sizeof signer, h->signer_pub, sizeof h->signer_pub);
    if (!json) {
        printf("sealed checkpoint %s (version %u; header authenticated only on opening)\n", path,
               h->version);
        printf("  agreement hash  %s\n", hash);
        printf("  step            %llu\n", (unsigned long long)h->step);
        printf("  model           llm.c fp32, weights only: L=%u C=%u NH=%u V=%u Vp=%u maxT=%u\n",
               h->model.num_layers, h->model.channels, h->model.num_heads, h->model.vocab_size,
               h->model.padded_vocab_size, h->model.max_seq_len);
        printf("  plaintext       %llu bytes; file %llu bytes\n",
               (unsigned long long)h->plaintext_len,
               (unsigned long long)gt_sckpt_file_bytes(h));
        printf("  cipher suite    X25519 + HKDF-SHA256 key wrap, AES-256-GCM\n");
        printf("  signer          %s (Ed25519; signature verified on opening; who it is:\n"
               "                  open-checkpoint --ledger)\n", signer);
        printf("  recipients      %u\n", h->recipient_count);
        for (uint32_t i = 0; i < h->recipient_count; i++) {
            hex(b, sizeof b, h->recipients[i].pub, GT_X25519_BYTES);
            printf("    %-16s %s (X25519)\n", h->recipients[i].name, b);
        }
        return GT_EXIT_OK;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "sealed_checkpoint");
    cJSON_AddNumberToObject(o, "version", h->version);
    cJSON_AddStringToObject(o, "suite", "X25519/HKDF-SHA256/AES-256-GCM");
    cJSON_AddStringToObject(o, "content", "llm.c fp32 checkpoint (weights only)");
    cJSON_AddStringToObject(o, "agreement_hash", hash);
    cJSON_AddStringToObject(o, "signer_key", signer);
    cJSON_AddNumberToObject(o, "step", (double)h->step);
    cJSON *m = cJSON_AddObjectToObject(o, "model");
    cJSON_AddNumberToObject(m, "max_seq_len", h->model.max_seq_len);
    cJSON_AddNumberToObject(m, "vocab_size", h->model.vocab_size);
    cJSON_AddNumberToObject(m, "num_layers", h->model.num_layers);
    cJSON_AddNumberToObject(m, "num_heads", h->model.num_heads);
    cJSON_AddNumberToObject(m, "channels", h->model.channels);
    cJSON_AddNumberToObject(m, "padded_vocab_size", h->model.padded_vocab_size);
    cJSON_AddNumberToObject(o, "plaintext_bytes", (double)h->plaintext_len);
    cJSON_AddNumberToObject(o, "file_bytes", (double)gt_sckpt_file_bytes(h));
    cJSON *rs = cJSON_AddArrayToObject(o, "recipients");
    for (uint32_t i = 0; i < h->recipient_count; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", h->recipients[i].name);
        hex(b, sizeof b, h->recipients[i].pub, GT_X25519_BYTES);
        cJSON_AddStringToObject(e, "recipient_key", b);
        cJSON_AddItemToArray(rs, e);
    }
    return print_cjson(o);
}

typedef struct {
    const char *path;  // a dataset folder, or a sealed checkpoint file
    bool json;
} inspect_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, inspect_options *o)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {0}};
    *o = (inspect_options){0};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'j': o->json = true; break;
        default: return gt_cli_usage("inspect", "unknown option");
        }
    }
    if (optind + 1 != argc) {
        return gt_cli_usage("inspect", "needs exactly one DSDIR or sealed checkpoint FILE");
    }
    o->path = argv[optind];
    return GT_EXIT_OK;
}

// A regular file is read as a sealed checkpoint's header, anything else as a dataset folder.
static int inspect_checkpoint(const inspect_options *o)
{
    gt_sckpt_header *h = calloc(1, sizeof *h);
    if (h == NULL) {
        return gt_cli_fail("inspect", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    gt_err e = gt_sckpt_read_header(o->path, h);
    int rc = gt_is_ok(e) ? print_sckpt(h, o->path, o->json) : gt_cli_fail("inspect", e);
    free(h);
    return rc;
}

static int inspect_dataset(const inspect_options *o)
{
    gt_manifest m;
    gt_err err = gt_manifest_load(&m, o->path);
    if (err.code != GT_E_NONE) {
        return gt_cli_fail("inspect", err);
    }
    int rc = GT_EXIT_OK;
    if (o->json) {
        rc = print_json(&m);
    } else {
        print_text(&m, o->path);
    }
    gt_manifest_free(&m);
    return rc;
}

int gt_cmd_inspect(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    inspect_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    struct stat st;
    bool file = stat(o.path, &st) == 0 && S_ISREG(st.st_mode);
    return file ? inspect_checkpoint(&o) : inspect_dataset(&o);
}
