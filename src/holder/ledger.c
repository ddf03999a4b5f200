// The holder's append-only, hash-chained, signed ledger (format in holder.h, docs/ledger.md).
#include <gputravel/holder.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define LEDGER_MAX_BYTES (1ull << 30)
#define LEDGER_MAX_LINE (64u << 10)

struct gt_ledger {
    pthread_mutex_t lock;
    int fd;
    uint64_t next_seq;
    uint8_t head[GT_SHA256_BYTES];
    uint8_t secret[GT_ED25519_SECRET_BYTES];
    char path[4096];
    bool unsynced;  // a lazy entry is written but not yet fsynced
    // Rollback guard (NULL: none). counter is the value the guard is known to hold; entries of
    // the open batch carry counter + 1 until commit_batch increments the guard to it.
    gt_rollback_guard *guard;
    uint64_t counter;
    bool batch_open;           // entries carrying counter + 1 are written, not yet incremented
    bool increment_uncertain;  // the last increment failed: the TPM may or may not have done it
};

// Builds BODY ' ' HASH ' ' SIG '\n' for one entry and returns the new hash in `hash`.
// counter: the rollback counter value the entry's batch moves the guard to (NULL: unguarded).
static gt_err entry_build(gt_buf *line, uint8_t hash[GT_SHA256_BYTES], uint64_t seq,
                          const uint8_t prev[GT_SHA256_BYTES], const char *kind,
                          const uint64_t *counter, const cJSON *detail,
                          const uint8_t secret[GT_ED25519_SECRET_BYTES])
{
    gt_err err = GT_OK;
    char prev_hex[2 * GT_SHA256_BYTES + 1], hash_hex[2 * GT_SHA256_BYTES + 1];
    char sig_hex[2 * GT_ED25519_SIG_BYTES + 1];
    uint8_t sig[GT_ED25519_SIG_BYTES];
    char *body = NULL;
    cJSON *obj = cJSON_CreateObject();
    GT_ENSURE_GOTO(err, obj != NULL, out, GT_E_NOMEM, "ledger: out of memory");
    gt_hex_encode(prev_hex, sizeof prev_hex, prev, GT_SHA256_BYTES);
    cJSON *d = detail ? cJSON_Duplicate(detail, true) : cJSON_CreateObject();
    GT_ENSURE_GOTO(err, d != NULL && cJSON_IsObject(d), out, GT_E_ARG,
                   "ledger: detail must be a JSON object");
    cJSON_AddNumberToObject(obj, "seq", (double)seq);
    cJSON_AddNumberToObject(obj, "time", (double)time(NULL));
    cJSON_AddStringToObject(obj, "prev", prev_hex);
    cJSON_AddStringToObject(obj, "kind", kind);
    if (counter != NULL) {
        // A JSON number is a double: beyond 2^53 the value goes as a decimal string.
        char dec[24];
        snprintf(dec, sizeof dec, "%llu", (unsigned long long)*counter);
        if (*counter <= (1ull << 53)) {
            cJSON_AddNumberToObject(obj, "counter", (double)*counter);
        } else {
            cJSON_AddStringToObject(obj, "counter", dec);
        }
    }
    cJSON_AddItemToObject(obj, "detail", d);
    body = cJSON_PrintUnformatted(obj);
    GT_ENSURE_GOTO(err, body != NULL, out, GT_E_NOMEM, "ledger: out of memory");
    size_t body_len = strlen(body);
    GT_TRY_GOTO(err, gt_hash(GT_HASH_SHA256, hash, body, body_len), out);
    GT_TRY_GOTO(err, gt_ed25519_sign(sig, hash, GT_SHA256_BYTES, secret), out);
    gt_hex_encode(hash_hex, sizeof hash_hex, hash, GT_SHA256_BYTES);
    gt_hex_encode(sig_hex, sizeof sig_hex, sig, sizeof sig);
    line->len = 0;
    GT_TRY_GOTO(err, gt_buf_append(line, body, body_len), out);
    GT_TRY_GOTO(err, gt_buf_append(line, " ", 1), out);
    GT_TRY_GOTO(err, gt_buf_append(line, hash_hex, strlen(hash_hex)), out);
    GT_TRY_GOTO(err, gt_buf_append(line, " ", 1), out);
    GT_TRY_GOTO(err, gt_buf_append(line, sig_hex, strlen(sig_hex)), out);
    GT_TRY_GOTO(err, gt_buf_append(line, "\n", 1), out);
out:
    cJSON_free(body);
    cJSON_Delete(obj);
    return err;
}

// Writes the whole entry; with sync, fsyncs the file (and so every lazy entry before it too).
static gt_err write_all(int fd, const uint8_t *p, size_t n, const char *path, bool sync)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        GT_ENSURE(w > 0, GT_E_IO, "%s: write: %s", path, strerror(errno));
        p += w;
        n -= (size_t)w;
    }
    GT_ENSURE(!sync || fsync(fd) == 0, GT_E_IO, "%s: fsync: %s", path, strerror(errno));
    return GT_OK;
}

// Verifies one line (without its '\n') as entry `seq` following `prev`; returns its hash.
static gt_err entry_verify(gt_span line, uint64_t seq, const uint8_t prev[GT_SHA256_BYTES],
                           uint8_t key[GT_ED25519_PUBLIC_BYTES], bool is_genesis,
                           uint8_t hash_out[GT_SHA256_BYTES], cJSON **body_out)
{
    // BODY ' ' HASH(64) ' ' SIG(128): the two hex fields have fixed widths, so split from the end.
    enum { HASH_HEX = 2 * GT_SHA256_BYTES, SIG_HEX = 2 * GT_ED25519_SIG_BYTES };
    const size_t tail = 1 + HASH_HEX + 1 + SIG_HEX;
    GT_ENSURE(line.len > tail, GT_E_FORMAT, "entry too short");
    size_t body_len = line.len - tail;
    gt_reader r = gt_reader_init(line.data, line.len);
    gt_span body = {0}, hash_txt = {0}, sig_txt = {0};
    uint8_t sp1 = 0, sp2 = 0;
    GT_TRY(gt_reader_span(&r, body_len, &body));
    GT_TRY(gt_reader_u8(&r, &sp1));
    GT_TRY(gt_reader_span(&r, HASH_HEX, &hash_txt));
    GT_TRY(gt_reader_u8(&r, &sp2));
    GT_TRY(gt_reader_span(&r, SIG_HEX, &sig_txt));
    GT_ENSURE(sp1 == ' ' && sp2 == ' ', GT_E_FORMAT, "entry: bad separators");

    char hex[SIG_HEX + 1];
    uint8_t claimed[GT_SHA256_BYTES], sig[GT_ED25519_SIG_BYTES], actual[GT_SHA256_BYTES];
    memcpy(hex, hash_txt.data, HASH_HEX);
    hex[HASH_HEX] = '\0';
    GT_TRY(gt_hex_decode_exact(claimed, sizeof claimed, hex));
    memcpy(hex, sig_txt.data, SIG_HEX);
    hex[SIG_HEX] = '\0';
    GT_TRY(gt_hex_decode_exact(sig, sizeof sig, hex));
    GT_TRY(gt_hash(GT_HASH_SHA256, actual, body.data, body.len));
    GT_ENSURE(gt_ct_equal(actual, claimed, sizeof actual), GT_E_AUTH,
              "entry hash does not match its body (entry modified)");

    cJSON *doc = NULL;
    GT_TRY(gt_json_parse((const char *)body.data, body.len, &doc));
    gt_err err = GT_OK;
    uint64_t got_seq = 0;
    const char *kind = NULL;
    uint8_t got_prev[GT_SHA256_BYTES];
    GT_TRY_GOTO(err, gt_json_get_u64(doc, "seq", &got_seq), fail);
    GT_TRY_GOTO(err, gt_json_get_hex(doc, "prev", got_prev, sizeof got_prev), fail);
    GT_TRY_GOTO(err, gt_json_get_string(doc, "kind", &kind), fail);
    GT_ENSURE_GOTO(err, got_seq == seq, fail, GT_E_FORMAT,
                   "sequence number %llu where %llu was expected (entry removed or reordered)",
                   (unsigned long long)got_seq, (unsigned long long)seq);
    GT_ENSURE_GOTO(err, gt_ct_equal(got_prev, prev, sizeof got_prev), fail, GT_E_AUTH,
                   "previous-hash link broken (entry removed, inserted or reordered)");
    if (is_genesis) {
        const cJSON *detail = cJSON_GetObjectItemCaseSensitive(doc, "detail");
        GT_ENSURE_GOTO(err, strcmp(kind, "genesis") == 0, fail, GT_E_FORMAT,
                       "first entry is '%s', expected 'genesis'", kind);
        GT_TRY_GOTO(err, gt_json_get_hex(detail, "holder_key", key, GT_ED25519_PUBLIC_BYTES),
                    fail);
    }
    GT_ENSURE_GOTO(err, gt_is_ok(gt_ed25519_verify(sig, claimed, sizeof claimed, key)), fail,
                   GT_E_AUTH, "entry signature does not verify with the holder key");
    memcpy(hash_out, actual, GT_SHA256_BYTES);
    *body_out = doc;
    return GT_OK;
fail:
    cJSON_Delete(doc);
    return err;
}

static void show_entry(FILE *show, const cJSON *doc, const uint8_t hash[GT_SHA256_BYTES])
{
    uint64_t seq = 0, t = 0;
    const char *kind = "?";
    // seq and kind were checked by entry_verify; a missing time shows as the epoch.
    gt_err ignored = gt_json_get_u64(doc, "seq", &seq);
    ignored = gt_json_get_u64(doc, "time", &t);
    ignored = gt_json_get_string(doc, "kind", &kind);
    (void)ignored;
    char when[32] = "?";
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) != NULL) {
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    char *detail = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(doc, "detail"));
    char h[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(h, sizeof h, hash, GT_SHA256_BYTES);
    fprintf(show, "%6llu  %s  %-8s %.12s  %s\n", (unsigned long long)seq, when, kind, h,
            detail ? detail : "{}");
    cJSON_free(detail);
}

// The rollback counter an entry carries (docs/ledger.md): once one entry has it, every later
// one does, and each batch moves it by one (an entry repeats its predecessor's value or adds 1).
static gt_err counter_step(const cJSON *doc, gt_ledger_summary *out)
{
    if (cJSON_GetObjectItemCaseSensitive(doc, "counter") == NULL) {
        GT_ENSURE(!out->anchored, GT_E_FORMAT,
                  "no rollback counter after entries that carry one");
        return GT_OK;
    }
    uint64_t c = 0;
    GT_TRY(gt_json_get_u64(doc, "counter", &c));
    GT_ENSURE(!out->anchored || c == out->counter || (out->counter < UINT64_MAX &&
                                                      c == out->counter + 1),
              GT_E_FORMAT, "rollback counter %llu after %llu (a batch adds exactly one)",
              (unsigned long long)c, (unsigned long long)out->counter);
    out->anchored = true;
    out->counter = c;
    return GT_OK;
}

static gt_err verify_bytes(const uint8_t *data, size_t len, const uint8_t *expected_key,
                           FILE *show, gt_ledger_visit_fn visit, void *ctx,
                           gt_ledger_summary *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(data, len);
    uint8_t prev[GT_SHA256_BYTES] = {0};
    uint8_t key[GT_ED25519_PUBLIC_BYTES] = {0};
    uint64_t seq = 0;
    while (gt_reader_left(&r) > 0) {
        const uint8_t *start = r.data + r.pos;
        const uint8_t *nl = memchr(start, '\n', gt_reader_left(&r));
        GT_ENSURE(nl != NULL, GT_E_TRUNCATED, "ledger line %llu: incomplete last entry",
                  (unsigned long long)seq + 1);
        gt_span line = {0};
        GT_TRY(gt_reader_span(&r, (size_t)(nl - start), &line));
        GT_TRY(gt_reader_skip(&r, 1));
        GT_ENSURE(line.len <= LEDGER_MAX_LINE, GT_E_LIMIT, "ledger line %llu: too long",
                  (unsigned long long)seq + 1);
        uint8_t hash[GT_SHA256_BYTES];
        cJSON *doc = NULL;
        gt_err err = entry_verify(line, seq, prev, key, seq == 0, hash, &doc);
        GT_TRY(gt_err_wrap(err, "ledger line %llu", (unsigned long long)seq + 1));
        if (seq == 0 && expected_key != NULL &&
            !gt_ct_equal(key, expected_key, GT_ED25519_PUBLIC_BYTES)) {
            cJSON_Delete(doc);
            return gt_errf(GT_E_AUTH, "ledger: signed by another holder key than expected");
        }
        err = counter_step(doc, out);
        if (!gt_is_ok(err)) {
            cJSON_Delete(doc);
            return gt_err_wrap(err, "ledger line %llu", (unsigned long long)seq + 1);
        }
        if (show != NULL) {
            show_entry(show, doc, hash);
        }
        if (visit != NULL) {
            const cJSON *kind = cJSON_GetObjectItemCaseSensitive(doc, "kind");
            visit(ctx, cJSON_GetStringValue(kind), cJSON_GetObjectItemCaseSensitive(doc, "detail"));
        }
        cJSON_Delete(doc);
        memcpy(prev, hash, sizeof prev);
        seq++;
    }
    GT_ENSURE(seq > 0, GT_E_FORMAT, "ledger: empty (no genesis entry)");
    out->entries = seq;  // anchored and counter were kept up to date by counter_step
    memcpy(out->head, prev, sizeof prev);
    memcpy(out->holder_key, key, sizeof key);
    return GT_OK;
}

gt_err gt_ledger_verify_bytes(const uint8_t *data, size_t len, const uint8_t *expected_key,
                              FILE *show, gt_ledger_summary *out)
{
    return verify_bytes(data, len, expected_key, show, NULL, NULL, out);
}

gt_err gt_ledger_verify_file(const char *path, const uint8_t *expected_key, FILE *show,
                             gt_ledger_summary *out)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, LEDGER_MAX_BYTES, &b));
    gt_err err = gt_ledger_verify_bytes(b.data, b.len, expected_key, show, out);
    gt_buf_free_nowipe(&b);
    return gt_err_wrap(err, "%s", path);
}

gt_err gt_ledger_replay(const char *path, const uint8_t *expected_key, gt_ledger_visit_fn visit,
                        void *ctx)
{
    gt_buf b = {0};
    gt_err err = gt_file_read_all(path, LEDGER_MAX_BYTES, &b);
    if (err.code == GT_E_NOTFOUND) {
        return GT_OK;
    }
    GT_TRY(err);
    gt_ledger_summary s;
    err = b.len == 0 ? GT_OK : verify_bytes(b.data, b.len, expected_key, NULL, visit, ctx, &s);
    gt_buf_free_nowipe(&b);
    return gt_err_wrap(err, "%s", path);
}

// A crash mid-append leaves a last line without its newline. Nothing was released for it: a
// grant's entry is fsynced before anything leaves. So the torn bytes are moved aside to
// path.torn-<unix time> (kept for the record, never replayed), the ledger is cut back to its last
// complete entry, and the holder starts; every complete entry is kept and still verified.
static gt_err torn_tail_set_aside(int fd, const char *path)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, LEDGER_MAX_BYTES, &b));
    size_t keep = b.len;
    while (keep > 0 && b.data[keep - 1] != '\n') {
        keep--;
    }
    gt_err err = GT_OK;
    if (keep < b.len) {
        char aside[4200];
        snprintf(aside, sizeof aside, "%s.torn-%lld", path, (long long)time(NULL));
        err = gt_file_write_atomic(aside, b.data + keep, b.len - keep, 0600);
        if (gt_is_ok(err) && (ftruncate(fd, (off_t)keep) != 0 || fsync(fd) != 0)) {
            err = gt_errf(GT_E_IO, "%s: cutting back a torn entry: %s", path, strerror(errno));
        }
        if (gt_is_ok(err)) {
            gt_log_warn("%s: an incomplete last entry (%zu bytes: a crash mid-append) moved aside "
                        "to %s; nothing was released for it", path, b.len - keep, aside);
        }
    }
    gt_buf_free_nowipe(&b);
    return err;
}

// Increments the guard for the open batch (lock held). After a failed increment the TPM may have
// done it anyway (a lost response): the counter is read first, so a retry never adds two.
static gt_err commit_batch(gt_ledger *l)
{
    if (l->guard == NULL || !l->batch_open) {
        return GT_OK;
    }
    uint64_t want = l->counter + 1, got = 0;
    bool written = false;
    if (l->increment_uncertain && gt_is_ok(gt_rollback_guard_read(l->guard, &got, &written)) &&
        written && got == want) {
        l->counter = got;
        l->batch_open = l->increment_uncertain = false;
        return GT_OK;
    }
    gt_err err = gt_rollback_guard_increment(l->guard, &got);
    if (!gt_is_ok(err)) {
        l->increment_uncertain = true;
        return gt_err_wrap(err, "%s: entry written, counter not incremented (retried next "
                                "append)", l->path);
    }
    l->increment_uncertain = false;
    // Someone else moved the counter: another ledger or process anchored to it. Fail-stop: the
    // batch stays open and every later append fails here too.
    GT_ENSURE(got == want, GT_E_STATE,
              "%s: rollback counter went to %llu, expected %llu: another ledger or process uses "
              "the same counter (%s)", l->path, (unsigned long long)got,
              (unsigned long long)want, gt_rollback_guard_name(l->guard));
    l->counter = got;
    l->batch_open = false;
    return GT_OK;
}

// Writes one entry (lock held): guarded, it carries the open batch's value, counter + 1; sync
// fsyncs it and then, guarded, increments the counter (the crash order: entry durable first).
static gt_err append_locked(gt_ledger *l, const char *kind, const cJSON *detail, bool sync)
{
    gt_buf line = {0};
    uint8_t hash[GT_SHA256_BYTES];
    uint64_t c = l->counter + 1;
    gt_err err = entry_build(&line, hash, l->next_seq, l->head, kind,
                             l->guard != NULL ? &c : NULL, detail, l->secret);
    if (gt_is_ok(err)) {
        off_t before = lseek(l->fd, 0, SEEK_END);
        err = write_all(l->fd, line.data, line.len, l->path, sync);
        if (!gt_is_ok(err) && before >= 0 && ftruncate(l->fd, before) != 0) {
            // The torn entry stays; verification reports it as an incomplete last entry.
            gt_log_error("%s: could not remove a torn entry: %s", l->path, strerror(errno));
        }
    }
    if (gt_is_ok(err)) {
        memcpy(l->head, hash, sizeof hash);
        l->next_seq++;
        l->unsynced = !sync;
        l->batch_open = l->guard != NULL;
        if (sync) {
            err = commit_batch(l);
        }
    }
    gt_buf_free_nowipe(&line);
    return err;
}

static gt_err write_genesis(gt_ledger *l, const uint8_t pub[GT_ED25519_PUBLIC_BYTES])
{
    cJSON *detail = cJSON_CreateObject();
    GT_ENSURE(detail != NULL, GT_E_NOMEM, "ledger: out of memory");
    char pub_hex[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(pub_hex, sizeof pub_hex, pub, GT_ED25519_PUBLIC_BYTES);
    cJSON_AddStringToObject(detail, "holder_key", pub_hex);
    gt_err err = append_locked(l, "genesis", detail, true);
    cJSON_Delete(detail);
    return err;
}

// Anchors the ledger to its guard at open (docs/ledger.md "Rollback guard"): s is the verified
// ledger, or NULL when the file was empty.
static gt_err anchor_at_open(gt_ledger *l, const gt_ledger_summary *s,
                             const uint8_t pub[GT_ED25519_PUBLIC_BYTES])
{
    const char *name = gt_rollback_guard_name(l->guard);
    uint64_t value = 0;
    bool written = false;
    GT_TRY(gt_rollback_guard_read(l->guard, &value, &written));
    gt_rollback_verdict v = GT_ROLLBACK_REFUSE;
    gt_err err = gt_rollback_check(s, value, written, name, &v);
    if (!gt_is_ok(err)) {
        gt_log_error("%s: refusing to open (rollback guard %s): %s. A holder that served from "
                     "this ledger would grant again what it already granted. Restore the ledger "
                     "that matches the counter or, for a deliberately new ledger, give it a new "
                     "counter (another NV index or counter file).", l->path, name, err.msg);
        return gt_err_wrap(err, "%s", l->path);
    }
    l->counter = value;
    switch (v) {
    case GT_ROLLBACK_MATCH: return GT_OK;
    case GT_ROLLBACK_PENDING:
        // The last batch is on disk, its increment is not: a crash came between (a durable append
        // fsyncs before it increments; lazy entries survive a process crash unsynced). Nothing
        // of that batch was released: a grant leaves only after its increment.
        l->batch_open = true;
        GT_TRY(commit_batch(l));
        gt_log_warn("%s: the last batch (counter %llu) was written but its increment missing (a "
                    "crash in between): counter incremented to it (%s)", l->path,
                    (unsigned long long)l->counter, name);
        return GT_OK;
    case GT_ROLLBACK_NEW:
    case GT_ROLLBACK_UNANCHORED:
        // The counter has never been written: give it its first value (a TPM picks it, at least
        // every counter it ever had), then the first anchored batch moves it one further.
        GT_TRY(gt_rollback_guard_increment(l->guard, &l->counter));
        if (v == GT_ROLLBACK_NEW) {
            GT_TRY(write_genesis(l, pub));
        } else {
            cJSON *d = cJSON_CreateObject();
            GT_ENSURE(d != NULL, GT_E_NOMEM, "ledger: out of memory");
            cJSON_AddStringToObject(d, "guard", name);
            err = append_locked(l, "anchor", d, true);
            cJSON_Delete(d);
            GT_TRY(err);
        }
        gt_log_info("%s: %s ledger anchored to %s at counter %llu", l->path,
                    v == GT_ROLLBACK_NEW ? "a new" : "an existing", name,
                    (unsigned long long)l->counter);
        return GT_OK;
    default: return gt_errf(GT_E_STATE, "%s: rollback check: unknown verdict", l->path);
    }
}

gt_err gt_ledger_open_guarded(gt_ledger **out, const char *path,
                              const uint8_t holder_secret[GT_ED25519_SECRET_BYTES],
                              gt_rollback_guard *guard)
{
    *out = NULL;
    gt_err err = GT_OK;
    gt_ledger *l = calloc(1, sizeof *l);
    GT_ENSURE(l != NULL, GT_E_NOMEM, "ledger: out of memory");
    l->fd = -1;
    pthread_mutex_init(&l->lock, NULL);
    memcpy(l->secret, holder_secret, sizeof l->secret);
    l->guard = gt_rollback_guard_kind(guard) == GT_ROLLBACK_NONE ? NULL : guard;
    GT_ENSURE_GOTO(err, strlen(path) < sizeof l->path, fail, GT_E_LIMIT, "path too long");
    snprintf(l->path, sizeof l->path, "%s", path);
    uint8_t pub[GT_ED25519_PUBLIC_BYTES];
    GT_TRY_GOTO(err, gt_ed25519_public(pub, holder_secret), fail);
    l->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    GT_ENSURE_GOTO(err, l->fd >= 0, fail, GT_E_IO, "%s: %s", path, strerror(errno));
    // One writer per ledger file: a second agent on the same file would fork the chain.
    GT_ENSURE_GOTO(err, flock(l->fd, LOCK_EX | LOCK_NB) == 0, fail, GT_E_STATE,
                   "%s: in use by another process", path);
    GT_TRY_GOTO(err, torn_tail_set_aside(l->fd, path), fail);
    off_t size = lseek(l->fd, 0, SEEK_END);
    gt_ledger_summary s = {0};
    if (size > 0) {
        GT_TRY_GOTO(err, gt_ledger_verify_file(path, pub, NULL, &s), fail);
        l->next_seq = s.entries;
        memcpy(l->head, s.head, sizeof l->head);
    }
    if (l->guard != NULL) {
        GT_TRY_GOTO(err, anchor_at_open(l, size > 0 ? &s : NULL, pub), fail);
    } else if (size > 0) {
        // Serving an anchored ledger unguarded would drop its protection without a word.
        GT_ENSURE_GOTO(err, !s.anchored, fail, GT_E_STATE,
                       "%s: anchored to a rollback guard (counter %llu): open it with its guard "
                       "(--rollback-guard)", path, (unsigned long long)s.counter);
    } else {
        GT_TRY_GOTO(err, write_genesis(l, pub), fail);
    }
    *out = l;
    return GT_OK;
fail:
    gt_ledger_close(l);
    return err;
}

gt_err gt_ledger_open(gt_ledger **out, const char *path,
                      const uint8_t holder_secret[GT_ED25519_SECRET_BYTES])
{
    return gt_ledger_open_guarded(out, path, holder_secret, NULL);
}

static gt_err append(gt_ledger *l, const char *kind, const cJSON *detail, bool sync)
{
    pthread_mutex_lock(&l->lock);
    gt_err err = append_locked(l, kind, detail, sync);
    pthread_mutex_unlock(&l->lock);
    return err;
}

gt_err gt_ledger_append(gt_ledger *l, const char *kind, const cJSON *detail)
{
    return append(l, kind, detail, true);
}

gt_err gt_ledger_append_lazy(gt_ledger *l, const char *kind, const cJSON *detail)
{
    return append(l, kind, detail, false);
}

gt_err gt_ledger_sync(gt_ledger *l)
{
    pthread_mutex_lock(&l->lock);
    gt_err err = GT_OK;
    if (l->unsynced) {
        if (fsync(l->fd) == 0) {
            l->unsynced = false;
        } else {
            err = gt_errf(GT_E_IO, "%s: fsync: %s", l->path, strerror(errno));
        }
    }
    if (gt_is_ok(err)) {
        err = commit_batch(l);  // the lazy entries' batch, now durable
    }
    pthread_mutex_unlock(&l->lock);
    return err;
}

void gt_ledger_close(gt_ledger *l)
{
    if (l == NULL) {
        return;
    }
    if (l->fd >= 0) {
        gt_err e = gt_ledger_sync(l);
        if (!gt_is_ok(e)) {
            gt_log_error("ledger: %s", e.msg);
        }
        close(l->fd);
    }
    pthread_mutex_destroy(&l->lock);
    gt_secure_zero(l->secret, sizeof l->secret);
    free(l);
}

// ---- finding a trainer's session --------------------------------------------------------------

typedef struct {
    const uint8_t *signing_key;
    uint64_t seq;  // of the entry being visited
    bool found;
    gt_ledger_session *out;
} session_search;

static void visit_session(void *ctx, const char *kind, const cJSON *detail)
{
    session_search *s = ctx;
    uint64_t seq = s->seq++;
    if (s->found || kind == NULL || strcmp(kind, "session") != 0) {
        return;
    }
    uint8_t key[GT_ED25519_PUBLIC_BYTES] = {0}, agreement[GT_SHA256_BYTES] = {0};
    const char *trainer = NULL;
    if (!gt_is_ok(gt_json_get_hex(detail, "signing_key", key, sizeof key)) ||
        !gt_ct_equal(key, s->signing_key, sizeof key) ||
        !gt_is_ok(gt_json_get_hex(detail, "agreement", agreement, sizeof agreement)) ||
        !gt_is_ok(gt_json_get_string(detail, "trainer", &trainer))) {
        return;
    }
    const char *appraisal =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "appraisal"));
    s->found = true;
    s->out->seq = seq;
    snprintf(s->out->trainer, sizeof s->out->trainer, "%s", trainer);
    memcpy(s->out->agreement, agreement, sizeof agreement);
    snprintf(s->out->appraisal, sizeof s->out->appraisal, "%s", appraisal ? appraisal : "");
}

gt_err gt_ledger_find_session(const char *path, const uint8_t holder_key[GT_ED25519_PUBLIC_BYTES],
                              const uint8_t signing_key[GT_ED25519_PUBLIC_BYTES],
                              gt_ledger_session *out)
{
    memset(out, 0, sizeof *out);
    GT_ENSURE(gt_path_exists(path), GT_E_NOTFOUND, "%s: no such ledger", path);
    session_search s = {.signing_key = signing_key, .out = out};
    gt_err err = gt_ledger_replay(path, holder_key, visit_session, &s);
    if (gt_is_ok(err) && !s.found) {
        char hex[2 * GT_ED25519_PUBLIC_BYTES + 1];
        gt_hex_encode(hex, sizeof hex, signing_key, GT_ED25519_PUBLIC_BYTES);
        err = gt_errf(GT_E_NOTFOUND, "%s: no session of a trainer with signing key %.16s... in "
                                     "this ledger (%llu entries)", path, hex,
                      (unsigned long long)s.seq);
    }
    if (!gt_is_ok(err)) {
        memset(out, 0, sizeof *out);
    }
    return err;
}

void gt_ledger_head(gt_ledger *l, uint64_t *entries, uint8_t head[GT_SHA256_BYTES])
{
    pthread_mutex_lock(&l->lock);
    *entries = l->next_seq;
    memcpy(head, l->head, GT_SHA256_BYTES);
    pthread_mutex_unlock(&l->lock);
}

gt_err gt_ledger_prefix_head(const char *path, const uint8_t *key, uint64_t entries,
                             uint8_t head[GT_SHA256_BYTES])
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, LEDGER_MAX_BYTES, &b));
    size_t cut = 0;
    uint64_t lines = 0;
    while (lines < entries && cut < b.len) {
        const uint8_t *nl = memchr(b.data + cut, '\n', b.len - cut);
        if (nl == NULL) {
            break;
        }
        cut = (size_t)(nl - b.data) + 1;
        lines++;
    }
    gt_err err = GT_OK;
    if (lines < entries) {
        err = gt_errf(GT_E_NOTFOUND, "%s: %llu entries, not %llu", path,
                      (unsigned long long)lines, (unsigned long long)entries);
    } else {
        gt_ledger_summary s;
        err = gt_ledger_verify_bytes(b.data, cut, key, NULL, &s);
        if (gt_is_ok(err)) {
            memcpy(head, s.head, GT_SHA256_BYTES);
        }
    }
    gt_buf_free_nowipe(&b);
    return err;
}
