// The agreement's shape, checked strictly before any value is read: every object may hold only
// the fields the schema names, each once, each of its type. The agreement is the contract every
// party signs, so a misspelled field must not be silently ignored (a holder who writes
// "max_uses_per_chunk " or "allow_simulaton" would otherwise sign something else than it meant).
#include <gputravel/travel.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef enum {
    T_INT,      // a whole JSON number >= 0
    T_U64,      // the same, or a decimal string (values beyond 2^53: seeds, budgets)
    T_NUMBER,   // any JSON number
    T_STRING,
    T_BOOL,
    T_OBJECT,   // fields: sub
    T_ARRAY,    // of elem (objects: sub)
    T_LOSS,     // outputs.loss: a bool or an object (sub)
} shape;

typedef struct field {
    const char *name;
    shape type;
    bool required;
    const struct field *sub;  // T_OBJECT, T_LOSS, and T_ARRAY of T_OBJECT
    shape elem;               // T_ARRAY
} field;

static const field model_fields[] = {
    {"layers", T_INT, true, NULL, 0},   {"channels", T_INT, true, NULL, 0},
    {"heads", T_INT, true, NULL, 0},    {"vocab", T_INT, true, NULL, 0},
    {"max_seq", T_INT, true, NULL, 0},  {"init_seed", T_U64, true, NULL, 0},
    {NULL, 0, false, NULL, 0}};
static const field training_fields[] = {
    {"steps", T_INT, true, NULL, 0},          {"batch", T_INT, true, NULL, 0},
    {"seq", T_INT, true, NULL, 0},            {"learning_rate", T_NUMBER, true, NULL, 0},
    {"program", T_STRING, false, NULL, 0},    {NULL, 0, false, NULL, 0}};
static const field enclave_fields[] = {
    {"mrsigner", T_STRING, false, NULL, 0},  {"mrenclave", T_STRING, false, NULL, 0},
    {"isvprodid", T_INT, false, NULL, 0},    {"min_isvsvn", T_INT, false, NULL, 0},
    {"debug", T_BOOL, false, NULL, 0},       {NULL, 0, false, NULL, 0}};
static const field holder_fields[] = {
    {"name", T_STRING, true, NULL, 0},          {"identity_key", T_STRING, true, NULL, 0},
    {"endpoint", T_STRING, true, NULL, 0},      {"dataset_id", T_STRING, true, NULL, 0},
    {"token_budget", T_U64, true, NULL, 0},     {"max_uses_per_chunk", T_INT, true, NULL, 0},
    {"recipient_key", T_STRING, false, NULL, 0}, {"enclave", T_OBJECT, false, enclave_fields, 0},
    {NULL, 0, false, NULL, 0}};
static const field party_fields[] = {
    {"accepted_measurements", T_ARRAY, false, NULL, T_STRING}, {NULL, 0, false, NULL, 0}};
static const field trainer_fields[] = {
    {"accepted_measurements", T_ARRAY, false, NULL, T_STRING}, {"ranks", T_INT, false, NULL, 0},
    {NULL, 0, false, NULL, 0}};
static const field output_fields[] = {
    {"kind", T_STRING, true, NULL, 0}, {"recipients", T_ARRAY, false, NULL, T_STRING},
    {NULL, 0, false, NULL, 0}};
static const field loss_fields[] = {
    {"every", T_INT, false, NULL, 0}, {"mantissa_bits", T_INT, false, NULL, 0},
    {NULL, 0, false, NULL, 0}};
static const field outputs_fields[] = {
    {"loss", T_LOSS, false, loss_fields, 0}, {"grad_norm", T_BOOL, false, NULL, 0},
    {"checkpoint", T_BOOL, false, NULL, 0},  {"resume", T_BOOL, false, NULL, 0},
    {NULL, 0, false, NULL, 0}};
static const field top_fields[] = {
    {"version", T_INT, true, NULL, 0},
    {"name", T_STRING, true, NULL, 0},
    {"model", T_OBJECT, true, model_fields, 0},
    {"training", T_OBJECT, true, training_fields, 0},
    {"holders", T_ARRAY, true, holder_fields, T_OBJECT},
    {"trainer", T_OBJECT, true, trainer_fields, 0},
    {"device", T_OBJECT, true, party_fields, 0},
    {"allow_simulation", T_BOOL, false, NULL, 0},
    {"transfer", T_ARRAY, false, NULL, T_STRING},
    {"output", T_OBJECT, true, output_fields, 0},
    {"outputs", T_OBJECT, false, outputs_fields, 0},
    {NULL, 0, false, NULL, 0}};

// Where problems go: the first one becomes the parse error; a lint collects up to `max`.
typedef struct {
    gt_agreement_problem_fn fn;
    void *ctx;
    unsigned count, max;
    gt_err first;
} sink;

static void problem(sink *s, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(sink *s, const char *path, const char *fmt, ...)
{
    if (s->count >= s->max) {
        return;
    }
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (s->count == 0) {
        s->first = gt_errf(GT_E_FORMAT, "%s: %s", path[0] ? path : "(document)", what);
    }
    s->count++;
    if (s->fn != NULL) {
        char line[256];
        snprintf(line, sizeof line, "%s: %s", path[0] ? path : "(document)", what);
        s->fn(s->ctx, line);
    }
}

static const char *type_of(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a bool";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "something else";
}

static const char *type_wanted(shape t)
{
    switch (t) {
    case T_INT: return "an integer";
    case T_U64: return "an integer (or a decimal string beyond 2^53)";
    case T_NUMBER: return "a number";
    case T_STRING: return "a string";
    case T_BOOL: return "a bool";
    case T_OBJECT: return "an object";
    case T_ARRAY: return "an array";
    case T_LOSS: return "false or an object {every, mantissa_bits}";
    }
    return "?";
}

// Levenshtein distance of two short names, cut at 32 characters (names are shorter; a longer
// unknown key is no misspelling worth suggesting a fix for).
static unsigned edit_distance(const char *a, const char *b)
{
    size_t n = strnlen(a, 32), m = strnlen(b, 32);
    unsigned row[33];
    for (size_t j = 0; j <= m; j++) {
        row[j] = (unsigned)j;
    }
    for (size_t i = 1; i <= n; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= m; j++) {
            unsigned up = row[j];
            unsigned best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

static const field *closest(const field *fields, const char *key)
{
    const field *best = NULL;
    unsigned best_d = 3;  // suggest only a near miss: at most 2 edits, and not half the name
    for (const field *f = fields; f->name != NULL; f++) {
        unsigned d = edit_distance(key, f->name);
        if (d < best_d && d * 2 < strlen(f->name)) {
            best = f;
            best_d = d;
        }
    }
    return best;
}

static void unknown_field(sink *s, const char *path, const field *fields, const char *key)
{
    const field *near = closest(fields, key);
    if (near != NULL) {
        problem(s, path, "unknown field (did you mean %s?)", near->name);
        return;
    }
    char known[128] = "";
    size_t used = 0;
    for (const field *f = fields; f->name != NULL && used < sizeof known; f++) {
        int n = snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", f->name);
        used += n > 0 ? (size_t)n : 0;
    }
    problem(s, path, "unknown field (known here: %s)", known);
}

static void join(char *out, size_t cap, const char *path, const char *name)
{
    if (path[0] == '\0') {
        snprintf(out, cap, "%.60s", name);
    } else {
        snprintf(out, cap, "%s.%.60s", path, name);
    }
}

static void check_object(sink *s, const char *path, const cJSON *obj, const field *fields);

static bool whole(double d)
{
    return isfinite(d) && d >= 0 && floor(d) == d;
}

static void check_value(sink *s, const char *path, const cJSON *v, shape t, const field *sub,
                        shape elem)
{
    switch (t) {
    case T_INT:
    case T_U64:
        if (t == T_U64 && cJSON_IsString(v)) {
            const char *p = v->valuestring;
            bool digits = p != NULL && p[0] != '\0' && strlen(p) <= 20;
            for (; digits && *p; p++) {
                digits = *p >= '0' && *p <= '9';
            }
            if (!digits) {
                problem(s, path, "expected an integer, got a string that is not one");
            }
        } else if (!cJSON_IsNumber(v)) {
            problem(s, path, "expected an integer, got %s", type_of(v));
        } else if (!whole(v->valuedouble)) {
            problem(s, path, "expected a whole number >= 0, got %g", v->valuedouble);
        }
        return;
    case T_NUMBER:
        if (!cJSON_IsNumber(v)) {
            problem(s, path, "expected a number, got %s", type_of(v));
        }
        return;
    case T_STRING:
        if (!cJSON_IsString(v)) {
            problem(s, path, "expected a string, got %s", type_of(v));
        }
        return;
    case T_BOOL:
        if (!cJSON_IsBool(v)) {
            problem(s, path, "expected a bool (true or false), got %s", type_of(v));
        }
        return;
    case T_LOSS:
        if (cJSON_IsObject(v)) {
            check_object(s, path, v, sub);
        } else if (!cJSON_IsBool(v)) {
            problem(s, path, "expected %s, got %s", type_wanted(t), type_of(v));
        }
        return;
    case T_OBJECT:
        if (!cJSON_IsObject(v)) {
            problem(s, path, "expected an object, got %s", type_of(v));
        } else {
            check_object(s, path, v, sub);
        }
        return;
    case T_ARRAY:
        if (!cJSON_IsArray(v)) {
            problem(s, path, "expected an array, got %s", type_of(v));
            return;
        }
        int i = 0;
        const cJSON *e = NULL;
        cJSON_ArrayForEach(e, v) {
            char at[160];
            snprintf(at, sizeof at, "%s[%d]", path, i++);
            check_value(s, at, e, elem, sub, T_INT);
            if (s->count >= s->max || i > GT_AGREEMENT_MAX_HOLDERS) {
                return;  // the parser's own limits refuse longer arrays: no need to walk on
            }
        }
        return;
    }
}

// A field given twice is ambiguous (cJSON keeps both; which one did the signer mean?).
static bool given_before(const cJSON *obj, const cJSON *f)
{
    for (const cJSON *e = obj->child; e != NULL && e != f; e = e->next) {
        if (e->string != NULL && strcmp(e->string, f->string) == 0) {
            return true;
        }
    }
    return false;
}

static void check_object(sink *s, const char *path, const cJSON *obj, const field *fields)
{
    const cJSON *c = NULL;
    unsigned seen = 0;
    cJSON_ArrayForEach(c, obj) {
        char at[160];
        join(at, sizeof at, path, c->string ? c->string : "");
        // Cheap enough: an object has a handful of known fields, so a long one is mostly
        // unknown fields, and those stop a parse at the first (a lint at s->max).
        if (given_before(obj, c)) {
            problem(s, at, "field given twice (keep one)");
        } else {
            const field *f = fields;
            while (f->name != NULL && strcmp(f->name, c->string) != 0) {
                f++;
            }
            if (f->name == NULL) {
                unknown_field(s, at, fields, c->string);
            } else {
                check_value(s, at, c, f->type, f->sub, f->elem);
            }
        }
        if (s->count >= s->max || ++seen > 64) {
            if (seen > 64) {
                problem(s, path, "more than 64 fields");
            }
            return;
        }
    }
    for (const field *f = fields; f->name != NULL; f++) {
        if (f->required && cJSON_GetObjectItemCaseSensitive(obj, f->name) == NULL) {
            char at[160];
            join(at, sizeof at, path, f->name);
            problem(s, at, "missing (%s is required)", type_wanted(f->type));
        }
    }
}

static void check_doc(sink *s, const cJSON *doc)
{
    if (!cJSON_IsObject(doc)) {
        problem(s, "", "the agreement must be a JSON object, got %s", type_of(doc));
        return;
    }
    check_object(s, "", doc, top_fields);
}

gt_err gt_agreement_check_shape(const cJSON *doc)
{
    sink s = {.max = 1};
    check_doc(&s, doc);
    return s.count ? s.first : GT_OK;
}

gt_err gt_agreement_lint(const uint8_t *doc, size_t len, gt_agreement_problem_fn fn, void *ctx,
                         unsigned max, unsigned *count)
{
    *count = 0;
    GT_ENSURE(len <= GT_AGREEMENT_MAX_BYTES, GT_E_LIMIT, "agreement larger than %u bytes",
              GT_AGREEMENT_MAX_BYTES);
    cJSON *json = NULL;
    GT_TRY(gt_err_wrap(gt_json_parse((const char *)doc, len, &json), "agreement"));
    sink s = {.fn = fn, .ctx = ctx, .max = max ? max : 1};
    check_doc(&s, json);
    cJSON_Delete(json);
    *count = s.count;
    return GT_OK;
}
