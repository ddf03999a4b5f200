// gputravel ledger verify|show: check a holder's hash-chained ledger and print it.
#include "cli.h"

#include <gputravel/holder.h>

#include <getopt.h>
#include <dirent.h>
#include <string.h>

static void usage(void)
{
    printf("usage: gputravel ledger verify LEDGER [--holder-key HEX] [--rollback-guard SPEC]\n"
           "       gputravel ledger show LEDGER [--holder-key HEX]\n"
           "\n"
           "A holder records every release decision in an append-only ledger: each entry names\n"
           "the hash of the one before and is signed with the holder's Ed25519 key.\n"
           "verify re-derives every hash and signature and reports the first broken entry;\n"
           "show prints each verified entry (seq, time, kind, hash prefix, detail).\n"
           "\n"
           "  --holder-key HEX  expect this holder public key (64 hex digits); without it the\n"
           "                    key named in the genesis entry is used\n"
           "  --rollback-guard SPEC  also check the ledger's head against the holder's rollback\n"
           "                    counter (tpm:TCTI, tpm@0xINDEX:TCTI, sim:FILE or none; see\n"
           "                    gputravel holder --help) and say which guard anchored it\n"
           "  --json            the result as one JSON object (entries, head, holder key,\n"
           "                    counter, anchor: anchored, pending, to-anchor, not-anchored\n"
           "                    or not-checked); show adds \"log\": every entry as\n"
           "                    {seq, time, kind, hash, detail}\n"
           "  -h, --help        this help\n");
}

typedef struct {
    const char *path;
    const char *guard;  // NULL: not checked
    bool show;
    bool json;
    bool have_key;
    uint8_t key[GT_ED25519_PUBLIC_BYTES];
} ledger_options;

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, ledger_options *o)
{
    static const struct option opts[] = {{"holder-key", required_argument, NULL, 'k'},
                                         {"rollback-guard", required_argument, NULL, 'g'},
                                         {"json", no_argument, NULL, 'j'}, {0}};
    memset(o, 0, sizeof *o);
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'g') {
            o->guard = optarg;
            continue;
        }
        if (c == 'j') {
            o->json = true;
            continue;
        }
        if (c != 'k') {
            return gt_cli_usage("ledger", "unknown option");
        }
        if (!gt_is_ok(gt_hex_decode_exact(o->key, sizeof o->key, optarg))) {
            return gt_cli_usage("ledger", "--holder-key needs 64 hex digits");
        }
        o->have_key = true;
    }
    if (argc - optind != 2) {
        return gt_cli_usage("ledger", "expected 'verify LEDGER' or 'show LEDGER'");
    }
    const char *action = argv[optind];
    o->path = argv[optind + 1];
    o->show = strcmp(action, "show") == 0;
    if (!o->show && strcmp(action, "verify") != 0) {
        return gt_cli_usage("ledger", "unknown action '%s' (verify or show)", action);
    }
    return GT_EXIT_OK;
}

// Torn entries the holder set aside when it opened the ledger after a crash (holder.h
// gt_ledger_open): named, never replayed; nothing was released for them.
static void report_torn(const char *path)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash != NULL) {
        *slash = '\0';
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    DIR *d = opendir(dir);
    size_t blen = strlen(base);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, base, blen) == 0 && strncmp(e->d_name + blen, ".torn-", 6) == 0) {
            printf("  a torn last entry was set aside after a crash: %s/%s (never granted)\n",
                   dir, e->d_name);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
}

// The head against the guard's counter, as gt_ledger_open_guarded would judge it (read-only:
// nothing is incremented or defined). A refusal fails the command. The finding goes to out as
// text (NULL: none) and to *state for --json: "not-checked", "not-anchored", "anchored",
// "pending" (a batch written, its increment not) or "to-anchor" (the holder anchors it at start).
static gt_err report_anchor(const ledger_options *o, const gt_ledger_summary *s, FILE *out,
                            const char **state)
{
    if (o->guard == NULL || strcmp(o->guard, "none") == 0) {
        *state = s->anchored ? "not-checked" : "not-anchored";
        if (out != NULL && s->anchored) {
            fprintf(out, "  head carries rollback counter %llu, not checked: give "
                         "--rollback-guard SPEC to check it\n", (unsigned long long)s->counter);
        } else if (out != NULL) {
            fprintf(out, "  head not anchored: no rollback guard (a ledger cut back, deleted or "
                         "replaced would go unnoticed)\n");
        }
        return GT_OK;
    }
    gt_rollback_guard *g = NULL;
    GT_TRY(gt_rollback_guard_open(&g, o->guard));
    uint64_t value = 0;
    bool written = false;
    gt_rollback_verdict v = GT_ROLLBACK_REFUSE;
    gt_err err = gt_rollback_guard_read(g, &value, &written);
    if (gt_is_ok(err)) {
        err = gt_rollback_check(s, value, written, gt_rollback_guard_name(g), &v);
    }
    const char *name = gt_rollback_guard_name(g);
    if (gt_is_ok(err) && v == GT_ROLLBACK_MATCH) {
        *state = "anchored";
        if (out != NULL) {
            fprintf(out, "  head anchored by rollback guard %s at counter %llu\n", name,
                    (unsigned long long)value);
        }
    } else if (gt_is_ok(err) && v == GT_ROLLBACK_PENDING) {
        *state = "pending";
        if (out != NULL) {
            fprintf(out, "  head anchored by rollback guard %s: its last batch (counter %llu) is "
                         "written, its increment is not (a crash in between; the holder "
                         "completes it at start)\n", name, (unsigned long long)s->counter);
        }
    } else if (gt_is_ok(err)) {
        *state = "to-anchor";
        if (out != NULL) {
            fprintf(out, "  head not anchored: the ledger carries no counter and rollback guard "
                         "%s has none yet (the holder anchors it when it starts with this "
                         "guard)\n", name);
        }
    }
    gt_rollback_guard_close(g);
    return err;
}

// Entries are BODY ' ' HASH ' ' SIG '\n' (holder.h); BODY may hold spaces, HASH and SIG do not.
// The bytes were verified just before, but are still read through gt_reader: they are a file.
gt_err gt_cli_ledger_entries(const gt_buf *b, uint64_t max, gt_cli_ledger_entry_fn each,
                             void *ctx)
{
    gt_reader r = gt_reader_init(b->data, b->len);
    for (uint64_t n = 0; n < max && gt_reader_left(&r) > 0; n++) {
        const uint8_t *nl = memchr(r.data + r.pos, '\n', gt_reader_left(&r));
        gt_span line;
        GT_TRY(gt_reader_span(&r, nl ? (size_t)(nl - (r.data + r.pos)) : gt_reader_left(&r),
                              &line));
        if (nl != NULL) {
            GT_TRY(gt_reader_skip(&r, 1));
        }
        size_t cut = line.len, spaces = 0, sig = line.len;
        while (cut > 0 && spaces < 2) {
            spaces += line.data[--cut] == ' ';
            sig = spaces == 1 && sig == line.len ? cut : sig;
        }
        GT_ENSURE(spaces == 2, GT_E_FORMAT, "ledger: an entry without hash and signature");
        cJSON *body = NULL;
        GT_TRY(gt_json_parse((const char *)line.data, cut, &body));
        gt_err err = each(ctx, body, (gt_span){line.data + cut + 1, sig - cut - 1});
        cJSON_Delete(body);
        GT_TRY(err);
    }
    return GT_OK;
}

// One entry of show --json's "log".
static gt_err log_entry(void *ctx, const cJSON *body, gt_span hash)
{
    cJSON *e = cJSON_CreateObject();
    GT_ENSURE(e != NULL, GT_E_NOMEM, "out of memory");
    cJSON_AddItemToArray(ctx, e);
    static const char *const keys[] = {"seq", "time", "kind"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, keys[i]);
        cJSON_AddItemToObject(e, keys[i], v ? cJSON_Duplicate(v, true) : cJSON_CreateNull());
    }
    char hex[2 * GT_SHA256_BYTES + 1];
    snprintf(hex, sizeof hex, "%.*s", (int)(hash.len < 64 ? hash.len : 64),
             (const char *)hash.data);
    cJSON_AddStringToObject(e, "hash", hex);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(body, "detail");
    cJSON_AddItemToObject(e, "detail", d ? cJSON_Duplicate(d, true) : cJSON_CreateNull());
    return GT_OK;
}

static void print_json(const ledger_options *o, const gt_ledger_summary *s, const char *head,
                       const char *holder, const char *state, cJSON *log)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "ledger", o->path);
    cJSON_AddBoolToObject(j, "verified", true);
    cJSON_AddNumberToObject(j, "entries", (double)s->entries);
    cJSON_AddStringToObject(j, "head", head);
    cJSON_AddStringToObject(j, "holder_key", holder);
    if (s->anchored) {
        cJSON_AddNumberToObject(j, "counter", (double)s->counter);
    } else {
        cJSON_AddNullToObject(j, "counter");
    }
    cJSON_AddStringToObject(j, "rollback_guard", o->guard ? o->guard : "none");
    cJSON_AddStringToObject(j, "anchor", state);
    if (log != NULL) {
        cJSON_AddItemToObject(j, "log", log);
    }
    char *text = cJSON_PrintUnformatted(j);
    printf("%s\n", text ? text : "{}");
    cJSON_free(text);
    cJSON_Delete(j);
}

// show --json: verifies the file's bytes and lists the entries of those same bytes in *log.
static gt_err show_json(const ledger_options *o, gt_ledger_summary *s, cJSON **log)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(o->path, 1ull << 30, &b));
    gt_err err = gt_ledger_verify_bytes(b.data, b.len, o->have_key ? o->key : NULL, NULL, s);
    *log = cJSON_CreateArray();
    if (gt_is_ok(err) && *log == NULL) {
        err = gt_errf(GT_E_NOMEM, "out of memory");
    }
    if (gt_is_ok(err)) {
        err = gt_cli_ledger_entries(&b, s->entries, log_entry, *log);
    }
    gt_buf_free_nowipe(&b);
    if (!gt_is_ok(err)) {
        cJSON_Delete(*log);
        *log = NULL;
    }
    return gt_err_wrap(err, "%s", o->path);
}

int gt_cmd_ledger(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    ledger_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    // Run: verification prints each verified entry as it goes when showing.
    gt_ledger_summary s;
    cJSON *log = NULL;  // show --json: the entries, from the very bytes verified
    gt_err err = o.show && o.json ? show_json(&o, &s, &log)
                                  : gt_ledger_verify_file(o.path, o.have_key ? o.key : NULL,
                                                          o.show ? stdout : NULL, &s);
    if (!gt_is_ok(err)) {
        return gt_cli_fail("ledger", err);
    }
    char head[2 * GT_SHA256_BYTES + 1], holder[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(head, sizeof head, s.head, sizeof s.head);
    gt_hex_encode(holder, sizeof holder, s.holder_key, sizeof s.holder_key);
    const char *state = "not-checked";
    if (o.json) {
        err = report_anchor(&o, &s, NULL, &state);
        if (gt_is_ok(err)) {
            print_json(&o, &s, head, holder, state, log);
            log = NULL;
        }
        cJSON_Delete(log);
        return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("ledger", err);
    }
    printf("%s: ledger verified: %llu entries, head %s, holder key %s\n", o.path,
           (unsigned long long)s.entries, head, holder);
    report_torn(o.path);
    err = report_anchor(&o, &s, stdout, &state);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("ledger", err);
}
