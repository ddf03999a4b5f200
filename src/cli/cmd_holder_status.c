// gputravel holder status: what a holder's ledger says it released, keylessly. The ledger is
// verified under the key its genesis entry names (a pinned key is `ledger verify --holder-key`'s
// job), then read once more, entry by entry, from the same bytes in memory.
#include "cli.h"

#include <gputravel/holder.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DATASETS 16
#define MAX_AGREEMENTS 16
#define LAST_SESSIONS 5
#define LEDGER_MAX_BYTES (1ull << 30)

static void usage(void)
{
    printf("usage: gputravel holder status --ledger LEDGER [--agreement A.json] [--dataset DSDIR]\n"
           "                               [--json]\n"
           "\n"
           "Summarises a holder's decision ledger without any key: it is verified first (every\n"
           "hash and signature, under the key its genesis entry names), then, per dataset: the\n"
           "chunks released and used, the tokens released (every release costs budget, a resend\n"
           "too) and confirmed, refusals and failed trips; with --agreement, the budget left and\n"
           "the uses left (token_budget, max_uses_per_chunk of the holder naming that dataset);\n"
           "with --dataset, the chunks that can still be used. And the last sessions: which\n"
           "trainer, when, under which agreement hash. The ledger counts every agreement's\n"
           "releases of a dataset together, as the holder does.\n"
           "\n"
           "  --ledger FILE      the ledger (a holder's default: KEYDIR/ledger.log)\n"
           "  --agreement FILE   the agreement the holder serves (budget and uses left)\n"
           "  --dataset DSDIR    the sealed dataset (its chunk count; no key needed)\n"
           "  --json             one JSON object instead of text\n"
           "  -h, --help         this help\n");
}

typedef struct {
    char id[2 * GT_DATASET_ID_BYTES + 1];
    uint64_t grants, uses, refusals, trip_failed, tokens_released, tokens_confirmed;
    uint32_t *released, *used;  // per chunk index (0..cap-1)
    uint32_t cap;
} dataset_stats;

typedef struct {
    uint64_t seq, time;
    char trainer[64], agreement[65], dataset[33], appraisal[192];
} session_row;

typedef struct {
    gt_ledger_summary summary;
    dataset_stats ds[MAX_DATASETS];
    uint32_t nds;
    uint64_t other_datasets;  // entries of datasets beyond MAX_DATASETS (counted, not shown)
    session_row last[LAST_SESSIONS];
    uint64_t sessions;
    // Sessions per agreement hash (grants name none: the sessions say which agreements ran).
    struct {
        char hash[65];
        uint64_t sessions, last_time;
    } agreements[MAX_AGREEMENTS];
    uint32_t nagreements;
} status;

static dataset_stats *dataset_of(status *st, const char *id)
{
    for (uint32_t i = 0; i < st->nds; i++) {
        if (strcmp(st->ds[i].id, id) == 0) {
            return &st->ds[i];
        }
    }
    if (st->nds == MAX_DATASETS || strlen(id) != 2 * GT_DATASET_ID_BYTES) {
        st->other_datasets++;
        return NULL;
    }
    dataset_stats *d = &st->ds[st->nds++];
    memcpy(d->id, id, 2 * GT_DATASET_ID_BYTES + 1);  // its length checked above
    return d;
}

static gt_err count_chunk(dataset_stats *d, uint64_t chunk, bool use)
{
    GT_ENSURE(chunk < GT_MANIFEST_MAX_CHUNKS, GT_E_FORMAT, "ledger: chunk %llu out of range",
              (unsigned long long)chunk);
    if (chunk >= d->cap) {
        uint32_t cap = d->cap ? d->cap : 64;
        while (cap <= chunk) {
            cap *= 2;
        }
        uint32_t *r = realloc(d->released, cap * sizeof *r);
        GT_ENSURE(r != NULL, GT_E_NOMEM, "out of memory");
        d->released = r;
        uint32_t *u = realloc(d->used, cap * sizeof *u);
        GT_ENSURE(u != NULL, GT_E_NOMEM, "out of memory");
        d->used = u;
        memset(d->released + d->cap, 0, (cap - d->cap) * sizeof *r);
        memset(d->used + d->cap, 0, (cap - d->cap) * sizeof *u);
        d->cap = cap;
    }
    (use ? d->used : d->released)[chunk]++;
    return GT_OK;
}

static const char *str_of(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

// One verified entry's body: {"seq","time","prev","kind","detail"}.
static gt_err take_entry(status *st, const cJSON *body)
{
    const char *kind = str_of(body, "kind");
    const cJSON *detail = cJSON_GetObjectItemCaseSensitive(body, "detail");
    uint64_t seq = 0, when = 0;
    GT_TRY(gt_json_get_u64(body, "seq", &seq));
    GT_TRY(gt_json_get_u64(body, "time", &when));
    if (strcmp(kind, "session") == 0) {
        session_row *r = &st->last[st->sessions++ % LAST_SESSIONS];
        *r = (session_row){.seq = seq, .time = when};
        snprintf(r->trainer, sizeof r->trainer, "%.63s", str_of(detail, "trainer"));
        snprintf(r->agreement, sizeof r->agreement, "%.64s", str_of(detail, "agreement"));
        snprintf(r->dataset, sizeof r->dataset, "%.32s", str_of(detail, "dataset"));
        snprintf(r->appraisal, sizeof r->appraisal, "%.191s", str_of(detail, "appraisal"));
        (void)dataset_of(st, r->dataset);  // a dataset served, even with nothing released yet
        uint32_t i = 0;
        while (i < st->nagreements && strcmp(st->agreements[i].hash, r->agreement) != 0) {
            i++;
        }
        if (i == st->nagreements && i < MAX_AGREEMENTS) {
            // Through a local copy: both live in st, and the compiler cannot see they differ.
            char hash[65];
            snprintf(hash, sizeof hash, "%s", r->agreement);
            memcpy(st->agreements[st->nagreements++].hash, hash, sizeof hash);
        }
        if (i < st->nagreements) {
            st->agreements[i].sessions++;
            st->agreements[i].last_time = when;
        }
        return GT_OK;
    }
    bool grant = strcmp(kind, "grant") == 0, use = strcmp(kind, "use") == 0;
    bool refuse = strcmp(kind, "refuse") == 0, failed = strcmp(kind, "trip-failed") == 0;
    if (!grant && !use && !refuse && !failed) {
        return GT_OK;  // genesis, and kinds this build does not know: nothing to count
    }
    dataset_stats *d = dataset_of(st, str_of(detail, "dataset"));
    if (d == NULL) {
        return GT_OK;
    }
    d->refusals += refuse;
    d->trip_failed += failed;
    if (grant || use) {
        uint64_t chunk = 0, tokens = 0;
        GT_TRY(gt_err_wrap(gt_json_get_u64(detail, "chunk", &chunk), "ledger entry %llu",
                           (unsigned long long)seq));
        GT_TRY(gt_err_wrap(gt_json_get_u64(detail, "tokens", &tokens), "ledger entry %llu",
                           (unsigned long long)seq));
        GT_TRY(count_chunk(d, chunk, use));
        *(use ? &d->uses : &d->grants) += 1;
        *(use ? &d->tokens_confirmed : &d->tokens_released) += tokens;
    }
    return GT_OK;
}

static gt_err take_one(void *ctx, const cJSON *body, gt_span hash)
{
    (void)hash;
    return take_entry(ctx, body);
}

typedef struct {
    const char *ledger, *agreement, *dataset;
    bool json;
} status_options;

typedef struct {
    const gt_agreement_holder *holder;  // the agreement's holder for this dataset, or NULL
    int64_t chunks_total;               // -1: unknown (no --dataset for it)
} dataset_context;

static void context_of(const dataset_stats *d, const gt_agreement *a, const gt_manifest *m,
                       dataset_context *c)
{
    *c = (dataset_context){.chunks_total = -1};
    uint8_t id[GT_DATASET_ID_BYTES];
    if (!gt_is_ok(gt_hex_decode_exact(id, sizeof id, d->id))) {
        return;
    }
    for (uint32_t i = 0; a != NULL && i < a->holder_count; i++) {
        if (memcmp(a->holders[i].dataset_id, id, sizeof id) == 0) {
            c->holder = &a->holders[i];
        }
    }
    if (m != NULL && memcmp(m->dataset_id, id, sizeof id) == 0) {
        c->chunks_total = m->chunk_count;
    }
}

static uint32_t count_nonzero(const uint32_t *v, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        k += v[i] != 0;
    }
    return k;
}

// Chunks that may still be used: fewer confirmed uses than the agreement allows.
static uint64_t chunks_remaining(const dataset_stats *d, const dataset_context *c)
{
    uint32_t max_uses = c->holder ? c->holder->max_uses_per_chunk : 1;
    uint64_t left = 0;
    for (int64_t i = 0; i < c->chunks_total; i++) {
        left += ((uint64_t)i < d->cap ? d->used[i] : 0) < max_uses;
    }
    return left;
}

static void format_time(uint64_t t, char *out, size_t cap)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL || strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) {
        snprintf(out, cap, "%llu", (unsigned long long)t);
    }
}

static cJSON *status_json(const status *st, const status_options *o, const gt_agreement *a,
                          const gt_manifest *m)
{
    cJSON *j = cJSON_CreateObject();
    char hex[2 * GT_SHA256_BYTES + 1];
    cJSON_AddStringToObject(j, "ledger", o->ledger);
    cJSON_AddNumberToObject(j, "entries", (double)st->summary.entries);
    gt_hex_encode(hex, sizeof hex, st->summary.head, sizeof st->summary.head);
    cJSON_AddStringToObject(j, "head", hex);
    gt_hex_encode(hex, sizeof hex, st->summary.holder_key, sizeof st->summary.holder_key);
    cJSON_AddStringToObject(j, "holder_key", hex);
    if (st->summary.anchored) {
        cJSON_AddNumberToObject(j, "rollback_counter", (double)st->summary.counter);
    }
    if (a != NULL) {
        gt_hex_encode(hex, sizeof hex, a->hash, sizeof a->hash);
        cJSON_AddStringToObject(j, "agreement", hex);
    }
    cJSON *arr = cJSON_AddArrayToObject(j, "datasets");
    for (uint32_t i = 0; i < st->nds; i++) {
        const dataset_stats *d = &st->ds[i];
        dataset_context c;
        context_of(d, a, m, &c);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dataset", d->id);
        if (c.holder != NULL) {
            cJSON_AddStringToObject(e, "holder", c.holder->name);
        }
        cJSON_AddNumberToObject(e, "grants", (double)d->grants);
        cJSON_AddNumberToObject(e, "uses", (double)d->uses);
        cJSON_AddNumberToObject(e, "chunks_released", count_nonzero(d->released, d->cap));
        cJSON_AddNumberToObject(e, "chunks_used", count_nonzero(d->used, d->cap));
        cJSON_AddNumberToObject(e, "tokens_released", (double)d->tokens_released);
        cJSON_AddNumberToObject(e, "tokens_confirmed", (double)d->tokens_confirmed);
        cJSON_AddNumberToObject(e, "refusals", (double)d->refusals);
        cJSON_AddNumberToObject(e, "trip_failed", (double)d->trip_failed);
        if (c.holder != NULL) {
            uint64_t b = c.holder->token_budget;
            cJSON_AddNumberToObject(e, "token_budget", (double)b);
            cJSON_AddNumberToObject(e, "budget_left",
                                    (double)(d->tokens_released < b ? b - d->tokens_released : 0));
            cJSON_AddNumberToObject(e, "max_uses_per_chunk", c.holder->max_uses_per_chunk);
        }
        if (c.chunks_total >= 0) {
            cJSON_AddNumberToObject(e, "chunks_total", (double)c.chunks_total);
            cJSON_AddNumberToObject(e, "chunks_remaining", (double)chunks_remaining(d, &c));
        }
        cJSON_AddItemToArray(arr, e);
    }
    cJSON *ses = cJSON_AddArrayToObject(j, "last_sessions");
    uint64_t n = st->sessions < LAST_SESSIONS ? st->sessions : LAST_SESSIONS;
    for (uint64_t k = 0; k < n; k++) {
        const session_row *r = &st->last[(st->sessions - n + k) % LAST_SESSIONS];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "seq", (double)r->seq);
        cJSON_AddNumberToObject(e, "time", (double)r->time);
        cJSON_AddStringToObject(e, "trainer", r->trainer);
        cJSON_AddStringToObject(e, "agreement", r->agreement);
        cJSON_AddStringToObject(e, "dataset", r->dataset);
        if (r->appraisal[0]) {
            cJSON_AddStringToObject(e, "appraisal", r->appraisal);
        }
        cJSON_AddItemToArray(ses, e);
    }
    cJSON_AddNumberToObject(j, "sessions", (double)st->sessions);
    cJSON *ag = cJSON_AddArrayToObject(j, "agreements");
    for (uint32_t i = 0; i < st->nagreements; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "agreement", st->agreements[i].hash);
        cJSON_AddNumberToObject(e, "sessions", (double)st->agreements[i].sessions);
        cJSON_AddNumberToObject(e, "last_time", (double)st->agreements[i].last_time);
        cJSON_AddItemToArray(ag, e);
    }
    return j;
}

static void status_text(const status *st, const status_options *o, const gt_agreement *a,
                        const gt_manifest *m)
{
    char head[2 * GT_SHA256_BYTES + 1], key[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(head, sizeof head, st->summary.head, sizeof st->summary.head);
    gt_hex_encode(key, sizeof key, st->summary.holder_key, sizeof st->summary.holder_key);
    printf("%s: ledger verified: %llu entries, head %.16s..., holder key %s\n", o->ledger,
           (unsigned long long)st->summary.entries, head, key);
    if (st->summary.anchored) {  // what the head claims; `ledger verify --rollback-guard` checks
        printf("  its head names rollback counter %llu\n",
               (unsigned long long)st->summary.counter);
    }
    if (st->nds == 0) {
        printf("  nothing released yet\n");
    }
    for (uint32_t i = 0; i < st->nds; i++) {
        const dataset_stats *d = &st->ds[i];
        dataset_context c;
        context_of(d, a, m, &c);
        printf("dataset %s", d->id);
        if (c.holder != NULL) {
            printf(" (holder %s)", c.holder->name);
        }
        printf(":\n");
        printf("  chunks released %u, used %u", count_nonzero(d->released, d->cap),
               count_nonzero(d->used, d->cap));
        if (c.chunks_total >= 0) {
            printf(", remaining %llu of %lld", (unsigned long long)chunks_remaining(d, &c),
                   (long long)c.chunks_total);
        }
        printf(" (%llu grant(s), %llu use(s))\n", (unsigned long long)d->grants,
               (unsigned long long)d->uses);
        printf("  tokens released %llu, confirmed %llu\n",
               (unsigned long long)d->tokens_released, (unsigned long long)d->tokens_confirmed);
        if (c.holder != NULL) {
            uint64_t b = c.holder->token_budget;
            printf("  budget %llu, left %llu; max %u use(s) per chunk\n", (unsigned long long)b,
                   (unsigned long long)(d->tokens_released < b ? b - d->tokens_released : 0),
                   c.holder->max_uses_per_chunk);
        } else if (a != NULL) {
            printf("  (no holder of the agreement names this dataset)\n");
        }
        printf("  refusals %llu, failed trips %llu\n", (unsigned long long)d->refusals,
               (unsigned long long)d->trip_failed);
    }
    if (st->other_datasets) {
        printf("(%llu entries of further datasets not shown)\n",
               (unsigned long long)st->other_datasets);
    }
    for (uint32_t i = 0; i < st->nagreements; i++) {
        char when[64];
        format_time(st->agreements[i].last_time, when, sizeof when);
        bool ours = false;
        uint8_t h[GT_SHA256_BYTES];
        if (a != NULL && gt_is_ok(gt_hex_decode_exact(h, sizeof h, st->agreements[i].hash))) {
            ours = memcmp(h, a->hash, sizeof h) == 0;
        }
        printf("agreement %.16s...%s: %llu session(s), the last %s\n", st->agreements[i].hash,
               a == NULL ? "" : ours ? " (this one)" : " (another)",
               (unsigned long long)st->agreements[i].sessions, when);
    }
    uint64_t n = st->sessions < LAST_SESSIONS ? st->sessions : LAST_SESSIONS;
    printf("sessions: %llu%s\n", (unsigned long long)st->sessions, n ? "; the last:" : "");
    for (uint64_t k = 0; k < n; k++) {
        const session_row *r = &st->last[(st->sessions - n + k) % LAST_SESSIONS];
        char when[64];
        format_time(r->time, when, sizeof when);
        bool ours = false;
        uint8_t h[GT_SHA256_BYTES];
        if (a != NULL && gt_is_ok(gt_hex_decode_exact(h, sizeof h, r->agreement))) {
            ours = memcmp(h, a->hash, sizeof h) == 0;
        }
        printf("  #%llu %s trainer %s, agreement %.16s...%s%s%s\n", (unsigned long long)r->seq,
               when, r->trainer, r->agreement, a == NULL ? "" : ours ? " (this one)" : " (another)",
               r->appraisal[0] ? ", " : "", r->appraisal);
    }
}

static int parse(int argc, char **argv, status_options *o)
{
    static const struct option opts[] = {
        {"ledger", required_argument, NULL, 'L'}, {"agreement", required_argument, NULL, 'a'},
        {"dataset", required_argument, NULL, 'd'}, {"json", no_argument, NULL, 'j'}, {0}};
    *o = (status_options){0};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'L': o->ledger = optarg; break;
        case 'a': o->agreement = optarg; break;
        case 'd': o->dataset = optarg; break;
        case 'j': o->json = true; break;
        default: return gt_cli_usage("holder status", "unknown option");
        }
    }
    if (o->ledger == NULL) {
        return gt_cli_usage("holder status", "--ledger FILE is required");
    }
    if (optind != argc) {
        return gt_cli_usage("holder status", "unexpected argument '%s'", argv[optind]);
    }
    return 0;
}

static gt_err run(const status_options *o, status *st, gt_agreement *a, gt_manifest *m,
                  bool *have_m)
{
    if (o->agreement != NULL) {
        GT_TRY(gt_agreement_load(a, o->agreement));
    }
    if (o->dataset != NULL) {
        GT_TRY(gt_manifest_load(m, o->dataset));
        *have_m = true;
        char id[2 * GT_DATASET_ID_BYTES + 1];
        gt_hex_encode(id, sizeof id, m->dataset_id, sizeof m->dataset_id);
        (void)dataset_of(st, id);  // listed first, released or not
    }
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(o->ledger, LEDGER_MAX_BYTES, &b));
    gt_err err = gt_ledger_verify_bytes(b.data, b.len, NULL, NULL, &st->summary);
    if (gt_is_ok(err)) {
        err = gt_cli_ledger_entries(&b, UINT64_MAX, take_one, st);
    }
    gt_buf_free_nowipe(&b);
    return gt_err_wrap(err, "%s", o->ledger);
}

int gt_cli_holder_status(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    status_options o;
    int rc = parse(argc, argv, &o);
    if (rc != 0) {
        return rc;
    }
    status *st = calloc(1, sizeof *st);
    gt_agreement *a = calloc(1, sizeof *a);
    gt_manifest m = {0};
    bool have_m = false;
    gt_err err = st && a ? run(&o, st, a, &m, &have_m) : gt_errf(GT_E_NOMEM, "out of memory");
    if (gt_is_ok(err)) {
        const gt_agreement *ap = o.agreement ? a : NULL;
        if (o.json) {
            cJSON *j = status_json(st, &o, ap, have_m ? &m : NULL);
            char *text = j ? cJSON_Print(j) : NULL;
            err = text ? GT_OK : gt_errf(GT_E_NOMEM, "out of memory");
            if (text) {
                printf("%s\n", text);
            }
            cJSON_free(text);
            cJSON_Delete(j);
        } else {
            status_text(st, &o, ap, have_m ? &m : NULL);
        }
    }
    for (uint32_t i = 0; st != NULL && i < st->nds; i++) {
        free(st->ds[i].released);
        free(st->ds[i].used);
    }
    if (have_m) {
        gt_manifest_free(&m);
    }
    free(st);
    free(a);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("holder status", err);
}
