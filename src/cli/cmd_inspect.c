// gputravel inspect: a sealed dataset's manifest, or a sealed checkpoint's header, as text or
// JSON (no key needed).
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/train.h>
#include <gputravel/travel.h>

#include <dirent.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(void)
{
    printf("usage: gputravel inspect DSDIR [--json]\n"
           "       gputravel inspect SEALED-CHECKPOINT [--json]\n"
           "       gputravel inspect STATE-DIR [--json]\n"
           "       gputravel inspect FILE [--json]\n"
           "\n"
           "A plain file is named by its first bytes: an llm.c checkpoint (version 3 fp32 or 5\n"
           "bf16: config, parameter count, size check), token shard (count, largest token,\n"
           "end-of-text tokens; llama-3 shards and evaluation files named), tokenizer file\n"
           "(vocab, end-of-text, whether BPE can use it), training state (step, config,\n"
           "weights hash) or holder ledger (verified whole: entries, head, holder key).\n"
           "\n"
           "A folder without a manifest is read as a training run's state folder: each file is\n"
           "named for what it is (sealed checkpoint, device-sealed resume state, journal, resume\n"
           "key, ...) and any file that is plaintext model data (an llm.c checkpoint, a plaintext\n"
           "training state) is flagged; the exit status is 1 when one is.\n"
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
    cJSON_AddStringToObject(o, "chunk_format", m->segment_bytes ? "GTCHUNK2" : "GTCHUNK1");
    cJSON_AddNumberToObject(o, "segment_bytes", m->segment_bytes);  // 0: unsegmented
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
    return gt_cli_print_json(o);
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
    if (m->segment_bytes != 0) {
        gt_format_size(s2, sizeof s2, m->segment_bytes);
        printf("  chunk format    GTCHUNK2: independently tagged segments of %s\n", s2);
    } else {
        printf("  chunk format    GTCHUNK1: one GCM message per chunk\n");
    }
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
    return gt_cli_print_json(o);
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

// ---- a run's state folder ------------------------------------------------------------------

typedef struct {
    const char *kind;
    bool plaintext_model;
    char detail[256];
} file_kind;

static void kind_sealed(const char *path, file_kind *k)
{
    gt_sckpt_header *h = calloc(1, sizeof *h);
    gt_err e = h != NULL ? gt_sckpt_read_header(path, h) : gt_errf(GT_E_NOMEM, "out of memory");
    k->kind = gt_is_ok(e) ? "sealed checkpoint" : "damaged sealed checkpoint";
    if (gt_is_ok(e)) {
        snprintf(k->detail, sizeof k->detail, "step %llu, %u recipient(s); ciphertext",
                 (unsigned long long)h->step, h->recipient_count);
    } else {
        snprintf(k->detail, sizeof k->detail, "%s", e.msg);
    }
    free(h);
}

static void kind_resume(const uint8_t *head, size_t n, uint64_t size, file_kind *k)
{
    gt_resume_header h;
    gt_err e = gt_resume_header_parse(&h, head, n);
    bool whole = gt_is_ok(e) && gt_resume_file_bytes(&h) == size;
    k->kind = whole ? "device-sealed resume state" : "damaged resume state";
    if (whole) {
        char id[2 * GT_RESUME_DEVICE_ID_BYTES + 1];
        gt_hex_encode(id, sizeof id, h.device_id, sizeof h.device_id);
        snprintf(k->detail, sizeof k->detail,
                 "step %llu, sealed by device %.16s... to itself, %u label(s); ciphertext",
                 (unsigned long long)h.step, id, h.label_count);
    } else {
        snprintf(k->detail, sizeof k->detail, "%s", gt_is_ok(e) ? "size disagrees" : e.msg);
    }
}

// What a file is, from its first bytes (and its size).
static void classify(const char *path, const char *name, file_kind *k)
{
    memset(k, 0, sizeof *k);
    FILE *fp = NULL;
    uint64_t size = 0;
    uint8_t head[GT_RESUME_MAX_HEADER_BYTES] = {0};
    if (!gt_is_ok(gt_file_open_regular(path, &fp, &size))) {
        k->kind = "unreadable";
        return;
    }
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    uint32_t magic = n >= 4 ? (uint32_t)head[0] | (uint32_t)head[1] << 8 |
                                  (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24
                            : 0;
    if (n >= 8 && memcmp(head, GT_SCKPT_MAGIC, 8) == 0) {
        kind_sealed(path, k);
    } else if (n >= 8 && memcmp(head, GT_RESUME_MAGIC, 8) == 0) {
        kind_resume(head, n, size, k);
    } else if (magic == GT_GPT2_CKPT_MAGIC) {
        *k = (file_kind){.kind = "PLAINTEXT llm.c checkpoint", .plaintext_model = true,
                         .detail = "model weights in the clear"};
    } else if (magic == GT_TRAIN_STATE_MAGIC) {
        *k = (file_kind){.kind = "PLAINTEXT training state", .plaintext_model = true,
                         .detail = "weights and optimizer moments in the clear"};
    } else if (n >= 8 && memcmp(head, GT_RESUME_KEY_MAGIC, 8) == 0 &&
               strcmp(name, GT_RESUME_KEY_FILE) == 0) {
        *k = (file_kind){.kind = "resume key", .detail = "cpu/cuda: the device secret the "
                                                         "resume state is sealed under"};
    } else if (strcmp(name, "journal") == 0 && (n == 0 || memcmp(head, "use ", 4) == 0)) {
        *k = (file_kind){.kind = "journal", .detail = "committed chunk uses; no model data"};
    } else {
        *k = (file_kind){.kind = "other", .detail = "not a format of model data"};
    }
}

// long: one walk printing text or collecting JSON, with the summary
// out NULL: nothing printed (the verdict is the return value).
static int inspect_state_dir(const char *dir, bool json, FILE *out)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return gt_cli_fail("inspect", gt_errf(GT_E_NOTFOUND, "%s: cannot open the folder", dir));
    }
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    int files = 0, plain = 0;
    if (!json && out != NULL) {
        fprintf(out, "%s: a training run's state folder\n", dir);
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[4200];
        struct stat st;
        if (e->d_name[0] == '.' || !gt_is_ok(gt_path_join(path, sizeof path, dir, e->d_name)) ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            continue;
        }
        file_kind k;
        classify(path, e->d_name, &k);
        files++;
        plain += k.plaintext_model;
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", e->d_name);
            cJSON_AddStringToObject(o, "kind", k.kind);
            cJSON_AddBoolToObject(o, "plaintext_model", k.plaintext_model);
            cJSON_AddStringToObject(o, "detail", k.detail);
            cJSON_AddItemToArray(arr, o);
        } else if (out != NULL) {
            fprintf(out, "  %-24s %s: %s\n", e->d_name, k.kind, k.detail);
        }
    }
    closedir(d);
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "files", arr);
        cJSON_AddNumberToObject(o, "plaintext_model_files", plain);
        int rc = gt_cli_print_json(o);
        return rc == GT_EXIT_OK && plain > 0 ? GT_EXIT_FAIL : rc;
    }
    if (out != NULL && plain > 0) {
        fprintf(out, "%d of %d file(s) hold PLAINTEXT model data\n", plain, files);
    } else if (out != NULL) {
        fprintf(out, "%d file(s); none is plaintext model data\n", files);
    }
    return plain > 0 ? GT_EXIT_FAIL : GT_EXIT_OK;
}

int gt_cli_inspect_state(const char *dir, FILE *out) { return inspect_state_dir(dir, false, out); }

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
    if (file) {
        rc = gt_cli_inspect_plain_file(o.path, o.json);
        return rc >= 0 ? rc : inspect_checkpoint(&o);
    }
    char manifest[4200];
    if (gt_is_ok(gt_path_join(manifest, sizeof manifest, o.path, GT_MANIFEST_FILE)) &&
        !gt_path_exists(manifest) && stat(o.path, &st) == 0 && S_ISDIR(st.st_mode)) {
        return inspect_state_dir(o.path, o.json, stdout);
    }
    return inspect_dataset(&o);
}
