// attest/policy.c: the appraisal policy (JSON, schema in docs/attestation.md) and its evaluation.
// Parsing is strict: an unknown or repeated field, a wrong type or bad hex is an error naming the
// field, so a typo never silently weakens a policy. Evaluation never stops early: every broken rule adds its
// own reason. Defaults are the safe side: a debug TEE is refused unless the policy sets
// allow_debug, and an Intel TCB status other than UpToDate unless accepted_tcb_statuses lists it.
#include "policy.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 4096         // entries in one allow-list
#define MAX_HEX_BYTES 256     // one allow-listed value
#define SHORT_HEX 16          // hex digits shown in reasons
#define TCB_NOT_EVALUATED "NotEvaluated"  // accepted_tcb_statuses entry: a quote without a status

typedef struct {
    char **items;
    size_t count;
} strvec;

typedef struct {
    char *claim;   // dotted claim path
    strvec values; // lower-case hex
} allow_rule;

typedef struct {
    allow_rule *rules;
    size_t count;
} allow_set;

enum { SNP_BL, SNP_TEE, SNP_SNP, SNP_UCODE, SNP_FMC, SNP_COMPONENTS };
static const char *const snp_components[SNP_COMPONENTS] = {"bootloader", "tee", "snp",
                                                           "microcode", "fmc"};

struct gt_policy {
    bool types_given;
    bool types[GT_TEE_TYPE_MAX + 1];
    bool allow_simulation;
    bool allow_debug;       // the only key that admits a debug TEE
    bool debug_forbidden;   // legacy: the default already refuses debug; kept for old policies
    allow_set measurements[GT_TEE_TYPE_MAX + 1];
    bool tcb_given;         // false: only UpToDate is accepted
    strvec tcb_statuses;
    int64_t snp_min[SNP_COMPONENTS];  // -1: no minimum
    bool tdx_min_given;
    uint8_t tdx_min_tee_tcb_svn[16];
    int64_t sgx_min_isv_svn;
    int64_t sim_min_svn;
    bool gpu_cc_mode;
    strvec gpu_firmware;
    allow_set gpu_measurements;
    strvec agreement_hashes;
    // sgx_enclave: an enclave's identity in SGX terms (sgx and vsgx evidence, on any host).
    strvec sgx_mrenclave, sgx_mrsigner;
    int64_t sgx_isvprodid;     // -1: any
    int64_t sgx_min_isvsvn;    // -1: no minimum
    bool sgx_allow_debug;      // a debug enclave (its host's debug is allow_debug's)
};

// ---- building blocks ---------------------------------------------------------------------------

static void strvec_free(strvec *v)
{
    for (size_t i = 0; i < v->count; i++) {
        free(v->items[i]);
    }
    free(v->items);
    v->items = NULL;
    v->count = 0;
}

static gt_err strvec_add(strvec *v, const char *s)
{
    GT_ENSURE(v->count < MAX_LIST, GT_E_LIMIT, "policy: list longer than %d entries", MAX_LIST);
    char **items = realloc(v->items, (v->count + 1) * sizeof *items);
    GT_ENSURE(items != NULL, GT_E_NOMEM, "policy: out of memory");
    v->items = items;
    v->items[v->count] = strdup(s);
    GT_ENSURE(v->items[v->count] != NULL, GT_E_NOMEM, "policy: out of memory");
    v->count++;
    return GT_OK;
}

static bool strvec_has(const strvec *v, const char *s)
{
    for (size_t i = 0; i < v->count; i++) {
        if (strcmp(v->items[i], s) == 0) {
            return true;
        }
    }
    return false;
}

static void allow_set_free(allow_set *s)
{
    for (size_t i = 0; i < s->count; i++) {
        free(s->rules[i].claim);
        strvec_free(&s->rules[i].values);
    }
    free(s->rules);
    s->rules = NULL;
    s->count = 0;
}

void gt_policy_free(gt_policy *p)
{
    if (p == NULL) {
        return;
    }
    for (int t = 0; t <= GT_TEE_TYPE_MAX; t++) {
        allow_set_free(&p->measurements[t]);
    }
    strvec_free(&p->tcb_statuses);
    strvec_free(&p->gpu_firmware);
    allow_set_free(&p->gpu_measurements);
    strvec_free(&p->agreement_hashes);
    strvec_free(&p->sgx_mrenclave);
    strvec_free(&p->sgx_mrsigner);
    free(p);
}

static gt_policy *policy_new(void)
{
    gt_policy *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return NULL;
    }
    for (int i = 0; i < SNP_COMPONENTS; i++) {
        p->snp_min[i] = -1;
    }
    p->sgx_min_isv_svn = -1;
    p->sim_min_svn = -1;
    p->sgx_isvprodid = -1;
    p->sgx_min_isvsvn = -1;
    return p;
}

gt_err gt_policy_default(gt_policy **out)
{
    *out = policy_new();
    GT_ENSURE(*out != NULL, GT_E_NOMEM, "policy: out of memory");
    return GT_OK;
}

// Lower-cases and checks a hex value: even length, 1..MAX_HEX_BYTES bytes.
static gt_err hex_normalise(const char *field, const char *in, char *out, size_t cap)
{
    size_t n = strlen(in);
    GT_ENSURE(n > 0 && n % 2 == 0 && n / 2 <= MAX_HEX_BYTES && n < cap, GT_E_FORMAT,
              "policy: %s: '%.20s' is not a hex string of 1..%d bytes", field, in, MAX_HEX_BYTES);
    for (size_t i = 0; i < n; i++) {
        GT_ENSURE(isxdigit((unsigned char)in[i]), GT_E_FORMAT,
                  "policy: %s: '%.20s' is not hex", field, in);
        out[i] = (char)tolower((unsigned char)in[i]);
    }
    out[n] = '\0';
    return GT_OK;
}

static gt_err parse_hex_list(const cJSON *arr, const char *field, strvec *out)
{
    GT_ENSURE(cJSON_IsArray(arr), GT_E_FORMAT, "policy: %s must be an array of hex strings",
              field);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        GT_ENSURE(cJSON_IsString(e) && e->valuestring != NULL, GT_E_FORMAT,
                  "policy: %s must hold hex strings", field);
        char hex[2 * MAX_HEX_BYTES + 1];
        GT_TRY(hex_normalise(field, e->valuestring, hex, sizeof hex));
        GT_TRY(strvec_add(out, hex));
    }
    return GT_OK;
}

static gt_err check_claim_path(const char *field, const char *path)
{
    size_t n = strlen(path);
    GT_ENSURE(n > 0 && n < 128 && path[0] != '.' && path[n - 1] != '.' &&
                  strstr(path, "..") == NULL,
              GT_E_FORMAT, "policy: %s: bad claim name '%.40s'", field, path);
    for (size_t i = 0; i < n; i++) {
        GT_ENSURE(isalnum((unsigned char)path[i]) || path[i] == '_' || path[i] == '.',
                  GT_E_FORMAT, "policy: %s: bad claim name '%.40s'", field, path);
    }
    return GT_OK;
}

// {"claim": ["hex", ...], ...}
static gt_err parse_allow_set(const cJSON *obj, const char *field, allow_set *out)
{
    GT_ENSURE(cJSON_IsObject(obj), GT_E_FORMAT,
              "policy: %s must be an object of claim -> [hex, ...]", field);
    const cJSON *e;
    cJSON_ArrayForEach(e, obj)
    {
        char name[192];
        snprintf(name, sizeof name, "%s.%s", field, e->string);
        GT_TRY(check_claim_path(field, e->string));
        GT_ENSURE(out->count < MAX_LIST, GT_E_LIMIT, "policy: %s: too many rules", field);
        allow_rule *rules = realloc(out->rules, (out->count + 1) * sizeof *rules);
        GT_ENSURE(rules != NULL, GT_E_NOMEM, "policy: out of memory");
        out->rules = rules;
        allow_rule *r = &out->rules[out->count];
        memset(r, 0, sizeof *r);
        r->claim = strdup(e->string);
        GT_ENSURE(r->claim != NULL, GT_E_NOMEM, "policy: out of memory");
        out->count++;
        GT_TRY(parse_hex_list(e, name, &r->values));
        GT_ENSURE(r->values.count > 0, GT_E_FORMAT,
                  "policy: %s: empty allow-list (would refuse everything; remove the rule or "
                  "list values)", name);
    }
    return GT_OK;
}

static gt_err get_type_key(const char *field, const char *key, gt_tee_type *t)
{
    gt_err e = gt_tee_type_parse(key, t);
    GT_ENSURE(gt_is_ok(e) && *t != GT_TEE_AUTO, GT_E_FORMAT,
              "policy: %s: unknown TEE type '%.40s'", field, key);
    return GT_OK;
}

static gt_err get_uint(const cJSON *e, const char *field, uint64_t max, int64_t *out)
{
    GT_ENSURE(cJSON_IsNumber(e), GT_E_FORMAT, "policy: %s must be a number", field);
    double d = e->valuedouble;
    GT_ENSURE(d >= 0 && d <= (double)max && floor(d) == d, GT_E_FORMAT,
              "policy: %s must be an integer in 0..%llu", field, (unsigned long long)max);
    *out = (int64_t)d;
    return GT_OK;
}

static gt_err get_bool(const cJSON *e, const char *field, bool *out)
{
    GT_ENSURE(cJSON_IsBool(e), GT_E_FORMAT, "policy: %s must be true or false", field);
    *out = cJSON_IsTrue(e);
    return GT_OK;
}

static gt_err parse_min_svn(gt_policy *p, const cJSON *obj)
{
    GT_ENSURE(cJSON_IsObject(obj), GT_E_FORMAT, "policy: min_svn must be an object");
    const cJSON *t;
    cJSON_ArrayForEach(t, obj)
    {
        gt_tee_type type = GT_TEE_AUTO;
        GT_TRY(get_type_key("min_svn", t->string, &type));
        GT_ENSURE(cJSON_IsObject(t), GT_E_FORMAT, "policy: min_svn.%s must be an object",
                  t->string);
        const cJSON *f;
        cJSON_ArrayForEach(f, t)
        {
            char name[160];
            snprintf(name, sizeof name, "min_svn.%s.%.64s", t->string, f->string);
            bool known = false;
            if (type == GT_TEE_SNP) {
                for (int i = 0; i < SNP_COMPONENTS; i++) {
                    if (strcmp(f->string, snp_components[i]) == 0) {
                        GT_TRY(get_uint(f, name, 255, &p->snp_min[i]));
                        known = true;
                    }
                }
            } else if (type == GT_TEE_TDX && strcmp(f->string, "tee_tcb_svn") == 0) {
                GT_ENSURE(cJSON_IsString(f) && f->valuestring != NULL, GT_E_FORMAT,
                          "policy: %s must be a hex string of 16 bytes", name);
                GT_TRY(gt_err_wrap(gt_hex_decode_exact(p->tdx_min_tee_tcb_svn, 16, f->valuestring),
                                   "policy: %s", name));
                p->tdx_min_given = true;
                known = true;
            } else if (type == GT_TEE_SGX && strcmp(f->string, "isv_svn") == 0) {
                GT_TRY(get_uint(f, name, 65535, &p->sgx_min_isv_svn));
                known = true;
            } else if (type == GT_TEE_SIM && strcmp(f->string, "svn") == 0) {
                GT_TRY(get_uint(f, name, UINT32_MAX, &p->sim_min_svn));
                known = true;
            }
            GT_ENSURE(known, GT_E_FORMAT,
                      "policy: unknown field %s (snp: bootloader tee snp microcode fmc; tdx: "
                      "tee_tcb_svn; sgx: isv_svn; sim: svn)", name);
        }
    }
    return GT_OK;
}

static gt_err parse_gpu(gt_policy *p, const cJSON *obj)
{
    GT_ENSURE(cJSON_IsObject(obj), GT_E_FORMAT, "policy: gpu must be an object");
    const cJSON *f;
    cJSON_ArrayForEach(f, obj)
    {
        if (strcmp(f->string, "cc_mode") == 0) {
            GT_TRY(get_bool(f, "gpu.cc_mode", &p->gpu_cc_mode));
        } else if (strcmp(f->string, "firmware") == 0) {
            GT_TRY(parse_hex_list(f, "gpu.firmware", &p->gpu_firmware));
            GT_ENSURE(p->gpu_firmware.count > 0, GT_E_FORMAT, "policy: gpu.firmware is empty");
        } else if (strcmp(f->string, "measurements") == 0) {
            GT_TRY(parse_allow_set(f, "gpu.measurements", &p->gpu_measurements));
        } else {
            return gt_errf(GT_E_FORMAT,
                           "policy: unknown field gpu.%.64s (cc_mode, firmware, measurements)",
                           f->string);
        }
    }
    return GT_OK;
}

// Intel's TCB status names (what the collateral evaluation reports), and NotEvaluated: no status
// at all (no collateral given, or no TCB level matched). Revoked is never accepted, so listing it
// is an error rather than a rule that silently does nothing.
static const char *const tcb_status_names[] = {
    "UpToDate", "SWHardeningNeeded", "ConfigurationNeeded", "ConfigurationAndSWHardeningNeeded",
    "OutOfDate", "OutOfDateConfigurationNeeded", TCB_NOT_EVALUATED,
};

static gt_err parse_tcb_statuses(gt_policy *p, const cJSON *arr)
{
    GT_ENSURE(cJSON_IsArray(arr), GT_E_FORMAT,
              "policy: accepted_tcb_statuses must be an array of status names");
    p->tcb_given = true;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        GT_ENSURE(cJSON_IsString(e) && e->valuestring != NULL, GT_E_FORMAT,
                  "policy: accepted_tcb_statuses must hold status names");
        GT_ENSURE(strcmp(e->valuestring, "Revoked") != 0, GT_E_FORMAT,
                  "policy: accepted_tcb_statuses: Revoked is never accepted; remove it");
        bool known = false;
        for (size_t i = 0; i < sizeof tcb_status_names / sizeof tcb_status_names[0]; i++) {
            known |= strcmp(e->valuestring, tcb_status_names[i]) == 0;
        }
        GT_ENSURE(known, GT_E_FORMAT,
                  "policy: accepted_tcb_statuses: unknown status '%.48s' (UpToDate, "
                  "SWHardeningNeeded, ConfigurationNeeded, ConfigurationAndSWHardeningNeeded, "
                  "OutOfDate, OutOfDateConfigurationNeeded, " TCB_NOT_EVALUATED ")",
                  e->valuestring);
        if (!strvec_has(&p->tcb_statuses, e->valuestring)) {
            GT_TRY(strvec_add(&p->tcb_statuses, e->valuestring));
        }
    }
    return GT_OK;
}

// A field given twice is ambiguous (the JSON reader keeps both; which one rules?), so it is an
// error. Cheap: an unknown field stops the parse, so at most the known fields precede f.
static bool given_before(const cJSON *doc, const cJSON *f);

static gt_err parse_sgx_enclave(gt_policy *p, const cJSON *obj)
{
    GT_ENSURE(cJSON_IsObject(obj), GT_E_FORMAT, "policy: sgx_enclave must be an object");
    const cJSON *f;
    cJSON_ArrayForEach(f, obj)
    {
        const char *k = f->string;
        char name[96];
        snprintf(name, sizeof name, "sgx_enclave.%.64s", k);
        GT_ENSURE(!given_before(obj, f), GT_E_FORMAT, "policy: field '%s' is given twice", name);
        strvec *list = strcmp(k, "mrenclave") == 0  ? &p->sgx_mrenclave
                       : strcmp(k, "mrsigner") == 0 ? &p->sgx_mrsigner
                                                    : NULL;
        if (list != NULL) {
            GT_TRY(parse_hex_list(f, name, list));
            GT_ENSURE(list->count > 0, GT_E_FORMAT, "policy: %s is empty", name);
            for (size_t i = 0; i < list->count; i++) {
                GT_ENSURE(strlen(list->items[i]) == 64, GT_E_FORMAT,
                          "policy: %s: a 32-byte hex value expected", name);
            }
        } else if (strcmp(k, "isvprodid") == 0) {
            GT_TRY(get_uint(f, name, 65535, &p->sgx_isvprodid));
        } else if (strcmp(k, "min_isvsvn") == 0) {
            GT_TRY(get_uint(f, name, 65535, &p->sgx_min_isvsvn));
        } else if (strcmp(k, "allow_debug") == 0) {
            GT_TRY(get_bool(f, name, &p->sgx_allow_debug));
        } else {
            return gt_errf(GT_E_FORMAT, "policy: unknown field %s (mrenclave, mrsigner, "
                                        "isvprodid, min_isvsvn, allow_debug)", name);
        }
    }
    return GT_OK;
}

static bool given_before(const cJSON *doc, const cJSON *f)
{
    for (const cJSON *e = doc->child; e != NULL && e != f; e = e->next) {
        if (strcmp(e->string, f->string) == 0) {
            return true;
        }
    }
    return false;
}

static gt_err parse_doc(gt_policy *p, const cJSON *doc)
{
    GT_ENSURE(cJSON_IsObject(doc), GT_E_FORMAT, "policy: the document must be a JSON object");
    const cJSON *f;
    cJSON_ArrayForEach(f, doc)
    {
        const char *k = f->string;
        GT_ENSURE(!given_before(doc, f), GT_E_FORMAT, "policy: field '%.64s' is given twice", k);
        if (strcmp(k, "version") == 0) {
            int64_t v = 0;
            GT_TRY(get_uint(f, "version", 1000, &v));
            GT_ENSURE(v == 1, GT_E_UNSUPPORTED, "policy: version %lld (expected 1)", (long long)v);
        } else if (strcmp(k, "comment") == 0) {
            GT_ENSURE(cJSON_IsString(f), GT_E_FORMAT, "policy: comment must be a string");
        } else if (strcmp(k, "accepted_tee_types") == 0) {
            GT_ENSURE(cJSON_IsArray(f), GT_E_FORMAT,
                      "policy: accepted_tee_types must be an array of names");
            p->types_given = true;
            const cJSON *e;
            cJSON_ArrayForEach(e, f)
            {
                GT_ENSURE(cJSON_IsString(e) && e->valuestring != NULL, GT_E_FORMAT,
                          "policy: accepted_tee_types must hold names");
                gt_tee_type t = GT_TEE_AUTO;
                GT_TRY(get_type_key("accepted_tee_types", e->valuestring, &t));
                p->types[t] = true;
            }
        } else if (strcmp(k, "allow_simulation") == 0) {
            GT_TRY(get_bool(f, k, &p->allow_simulation));
        } else if (strcmp(k, "allow_debug") == 0) {
            GT_TRY(get_bool(f, k, &p->allow_debug));
        } else if (strcmp(k, "debug_forbidden") == 0) {
            GT_TRY(get_bool(f, k, &p->debug_forbidden));
        } else if (strcmp(k, "measurements") == 0) {
            GT_ENSURE(cJSON_IsObject(f), GT_E_FORMAT,
                      "policy: measurements must be an object of type -> {claim: [hex]}");
            const cJSON *t;
            cJSON_ArrayForEach(t, f)
            {
                gt_tee_type type = GT_TEE_AUTO;
                GT_TRY(get_type_key("measurements", t->string, &type));
                char name[64];
                snprintf(name, sizeof name, "measurements.%s", t->string);
                GT_TRY(parse_allow_set(t, name, &p->measurements[type]));
            }
        } else if (strcmp(k, "accepted_tcb_statuses") == 0) {
            GT_TRY(parse_tcb_statuses(p, f));
        } else if (strcmp(k, "min_svn") == 0) {
            GT_TRY(parse_min_svn(p, f));
        } else if (strcmp(k, "gpu") == 0) {
            GT_TRY(parse_gpu(p, f));
        } else if (strcmp(k, "sgx_enclave") == 0) {
            GT_TRY(parse_sgx_enclave(p, f));
        } else if (strcmp(k, "accepted_agreement_hashes") == 0) {
            GT_TRY(parse_hex_list(f, k, &p->agreement_hashes));
        } else {
            return gt_errf(GT_E_FORMAT, "policy: unknown field '%.64s'", k);
        }
    }
    return GT_OK;
}

gt_err gt_policy_parse(gt_policy **out, const char *json, size_t len)
{
    *out = NULL;
    GT_ENSURE(len <= GT_POLICY_MAX_BYTES, GT_E_LIMIT, "policy: %zu bytes is too large", len);
    cJSON *doc = NULL;
    GT_TRY(gt_err_wrap(gt_json_parse(json, len, &doc), "policy"));
    gt_policy *p = policy_new();
    gt_err err = p != NULL ? parse_doc(p, doc) : gt_errf(GT_E_NOMEM, "policy: out of memory");
    if (gt_is_ok(err) && p->allow_debug && p->debug_forbidden) {
        err = gt_errf(GT_E_FORMAT, "policy: allow_debug true contradicts debug_forbidden true "
                                   "(debug is refused unless allow_debug is true: keep one)");
    }
    cJSON_Delete(doc);
    if (!gt_is_ok(err)) {
        gt_policy_free(p);
        return err;
    }
    *out = p;
    return GT_OK;
}

gt_err gt_policy_load_file(gt_policy **out, const char *path)
{
    *out = NULL;
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, GT_POLICY_MAX_BYTES, &b));
    gt_err err = gt_policy_parse(out, (const char *)b.data, b.len);
    gt_buf_free_nowipe(&b);
    return gt_is_ok(err) ? err : gt_err_wrap(err, "%s", path);
}

// ---- evaluation ----------------------------------------------------------------------------------

static const char *claim_string(const cJSON *claims, const char *path)
{
    const cJSON *c = gt_claims_get(claims, path);
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static bool claim_number(const cJSON *claims, const char *path, double *out)
{
    const cJSON *c = gt_claims_get(claims, path);
    if (!cJSON_IsNumber(c)) {
        return false;
    }
    *out = c->valuedouble;
    return true;
}

static gt_err eval_allow_set(const allow_set *s, const char *what, const cJSON *claims,
                             gt_strlist *reasons)
{
    for (size_t i = 0; i < s->count; i++) {
        const allow_rule *r = &s->rules[i];
        const char *v = claim_string(claims, r->claim);
        if (v == NULL) {
            GT_TRY(gt_strlist_addf(reasons, "policy: %s: claim '%s' is not in the evidence", what,
                                   r->claim));
        } else if (!strvec_has(&r->values, v)) {
            GT_TRY(gt_strlist_addf(reasons, "policy: %s: %s %.*s... is not in the allow-list", what,
                                   r->claim, SHORT_HEX, v));
        }
    }
    return GT_OK;
}

static gt_err eval_types(const gt_policy *p, gt_tee_type type, gt_strlist *reasons)
{
    if (p->types_given && !p->types[type]) {
        char list[96] = "";
        for (int t = 1; t <= GT_TEE_TYPE_MAX; t++) {
            if (p->types[t]) {
                strncat(list, list[0] ? ", " : "", sizeof list - strlen(list) - 1);
                strncat(list, gt_tee_type_name((gt_tee_type)t), sizeof list - strlen(list) - 1);
            }
        }
        GT_TRY(gt_strlist_addf(reasons, "policy: TEE type %s is not accepted (accepted: %s)",
                               gt_tee_type_name(type), list[0] ? list : "none"));
    }
    if (type == GT_TEE_SIM && !p->allow_simulation) {
        GT_TRY(gt_strlist_addf(reasons, "policy: %s evidence refused: the policy does not set "
                                        "allow_simulation",
                               GT_INSECURE_SIMULATION));
    }
    return GT_OK;
}

// Debug TEEs are refused unless the policy sets allow_debug (debug_forbidden: false does not
// re-enable them). A CPU TEE or sim evidence that does not state its debug attribute is refused
// too: unknown is not "off". NVIDIA SPDM evidence has no debug attribute of its own.
static gt_err eval_debug(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                         gt_strlist *reasons, gt_strlist *warnings)
{
    if (type == GT_TEE_NVGPU) {
        return GT_OK;
    }
    const cJSON *d = gt_claims_get(claims, "debug");
    const char *name = gt_tee_type_name(type);
    bool enclave = type == GT_TEE_SGX || type == GT_TEE_VSGX;
    if (p->allow_debug || (enclave && p->sgx_allow_debug)) {
        if (!cJSON_IsFalse(d)) {
            return gt_strlist_addf(warnings, "policy: the %s evidence %s: accepted because the "
                                             "policy sets allow_debug",
                                   name, cJSON_IsTrue(d) ? "has debug enabled"
                                                         : "does not state its debug attribute");
        }
        return GT_OK;
    }
    if (!cJSON_IsBool(d)) {
        return gt_strlist_addf(reasons, "policy: debug TEE refused: the %s evidence does not state "
                                        "its debug attribute, and the policy does not set "
                                        "allow_debug",
                               name);
    }
    if (cJSON_IsTrue(d)) {
        return gt_strlist_addf(reasons, "policy: debug TEE refused: the policy does not set "
                                        "allow_debug (the %s evidence has debug enabled)",
                               name);
    }
    return GT_OK;
}

// Only Intel quotes carry a TCB status (from the collateral). Without accepted_tcb_statuses the
// accepted set is UpToDate alone; a quote with no status is accepted only if NotEvaluated is
// listed. SNP (reported_tcb), sim (svn) and nvgpu have no status: min_svn and the allow-lists
// cover them.
static gt_err eval_tcb(const gt_policy *p, gt_tee_type type, const char *status,
                       gt_strlist *reasons)
{
    if (type != GT_TEE_TDX && type != GT_TEE_SGX) {
        return GT_OK;
    }
    if (status != NULL && strcmp(status, "Revoked") == 0) {
        return gt_strlist_addf(reasons, "tcb: status Revoked is never accepted");
    }
    char list[256] = "";
    if (!p->tcb_given) {
        snprintf(list, sizeof list, "UpToDate, the default without accepted_tcb_statuses");
    }
    for (size_t i = 0; i < p->tcb_statuses.count; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, p->tcb_statuses.items[i], sizeof list - strlen(list) - 1);
    }
    bool none = status == NULL || status[0] == '\0';
    if (none ? strvec_has(&p->tcb_statuses, TCB_NOT_EVALUATED)
             : (p->tcb_given ? strvec_has(&p->tcb_statuses, status)
                             : strcmp(status, "UpToDate") == 0)) {
        return GT_OK;
    }
    if (none) {
        return gt_strlist_addf(reasons, "policy: TCB status not evaluated (no Intel collateral "
                                        "given, or no TCB level matched) not accepted "
                                        "(accepted: %s; list " TCB_NOT_EVALUATED " to accept it)",
                               list[0] ? list : "none");
    }
    return gt_strlist_addf(reasons, "policy: TCB status %s not accepted (accepted: %s)", status,
                           list[0] ? list : "none");
}

static gt_err eval_min_number(const cJSON *claims, const char *path, int64_t min, const char *what,
                              gt_strlist *reasons)
{
    if (min < 0) {
        return GT_OK;
    }
    double v = 0;
    if (!claim_number(claims, path, &v)) {
        return gt_strlist_addf(reasons, "policy: %s: claim '%s' is not in the evidence", what,
                               path);
    }
    if (v < (double)min) {
        return gt_strlist_addf(reasons, "policy: %s %s %.0f is below the minimum %lld", what, path,
                               v, (long long)min);
    }
    return GT_OK;
}

static gt_err eval_min_svn(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                           gt_strlist *reasons)
{
    switch (type) {
    case GT_TEE_SNP:
        for (int i = 0; i < SNP_COMPONENTS; i++) {
            char path[64];
            snprintf(path, sizeof path, "reported_tcb.%s", snp_components[i]);
            GT_TRY(eval_min_number(claims, path, p->snp_min[i], "snp min_svn", reasons));
        }
        return GT_OK;
    case GT_TEE_SGX:
        return eval_min_number(claims, "isv_svn", p->sgx_min_isv_svn, "sgx min_svn", reasons);
    case GT_TEE_SIM:
        return eval_min_number(claims, "svn", p->sim_min_svn, "sim min_svn", reasons);
    case GT_TEE_TDX: {
        if (!p->tdx_min_given) {
            return GT_OK;
        }
        const char *hex = claim_string(claims, "tee_tcb_svn");
        uint8_t svn[16];
        if (hex == NULL || !gt_is_ok(gt_hex_decode_exact(svn, sizeof svn, hex))) {
            return gt_strlist_addf(reasons, "policy: tdx min_svn: claim 'tee_tcb_svn' is not in "
                                            "the evidence");
        }
        for (int i = 0; i < 16; i++) {
            if (svn[i] < p->tdx_min_tee_tcb_svn[i]) {
                GT_TRY(gt_strlist_addf(reasons, "policy: tdx min_svn tee_tcb_svn[%d] %u is below "
                                                "the minimum %u",
                                       i, svn[i], p->tdx_min_tee_tcb_svn[i]));
            }
        }
        return GT_OK;
    }
    case GT_TEE_NVGPU:
    case GT_TEE_AUTO:
    default:
        return GT_OK;
    }
}

// GPU rules apply to NVIDIA evidence and to sim evidence of a (simulated) device.
static gt_err eval_gpu(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                       gt_strlist *reasons)
{
    bool device = type == GT_TEE_NVGPU ||
                  (type == GT_TEE_SIM && cJSON_IsTrue(gt_claims_get(claims, "device")));
    if (!device) {
        return GT_OK;
    }
    if (p->gpu_cc_mode) {
        const cJSON *cc = gt_claims_get(claims, "cc_mode");
        if (!cJSON_IsBool(cc)) {
            GT_TRY(gt_strlist_addf(reasons, "policy: gpu: CC mode required, but the evidence does "
                                            "not state it"));
        } else if (!cJSON_IsTrue(cc)) {
            GT_TRY(gt_strlist_addf(reasons, "policy: gpu: CC mode required, and the device "
                                            "reports it off"));
        }
    }
    if (p->gpu_firmware.count > 0) {
        const char *fw = claim_string(claims, type == GT_TEE_NVGPU ? "fwid" : "measurement");
        if (fw == NULL) {
            GT_TRY(gt_strlist_addf(reasons, "policy: gpu: the evidence states no firmware "
                                            "measurement"));
        } else if (!strvec_has(&p->gpu_firmware, fw)) {
            GT_TRY(gt_strlist_addf(reasons, "policy: gpu: firmware %.*s... is not in the "
                                            "allow-list",
                                   SHORT_HEX, fw));
        }
    }
    return eval_allow_set(&p->gpu_measurements, "gpu", claims, reasons);
}

// The path of the claim that carries the verifier's freshness value.
static const char *binding_claim(gt_tee_type type)
{
    return type == GT_TEE_NVGPU ? "request.nonce" : "report_data";
}

static gt_err eval_binding(gt_tee_type type, const cJSON *claims, const gt_appraise_params *prm,
                           gt_strlist *reasons)
{
    if (prm->expected_report_data == NULL && prm->nonce == NULL) {
        return GT_OK;
    }
    const char *path = binding_claim(type);
    const char *hex = claim_string(claims, path);
    uint8_t got[GT_REPORT_DATA_BYTES];
    size_t got_len = 0;
    if (hex == NULL || !gt_is_ok(gt_hex_decode(got, sizeof got, &got_len, hex))) {
        return gt_strlist_addf(reasons, "binding: the evidence has no readable %s claim", path);
    }
    // NVIDIA's 32-byte request nonce carries the first 32 bytes of report_data.
    if (prm->expected_report_data != NULL) {
        size_t n = type == GT_TEE_NVGPU ? got_len : GT_REPORT_DATA_BYTES;
        if (got_len != n || n > GT_REPORT_DATA_BYTES ||
            !gt_ct_equal(got, prm->expected_report_data, n)) {
            GT_TRY(gt_strlist_addf(reasons, "binding: %s does not match the expected report_data "
                                            "(stale or replayed evidence, another session, or "
                                            "another agreement)",
                                   path));
        }
    }
    if (prm->nonce != NULL) {
        uint8_t want[GT_REPORT_DATA_BYTES] = {0};
        bool ok = false;
        if (type == GT_TEE_NVGPU) {
            ok = prm->nonce_len == got_len && gt_ct_equal(got, prm->nonce, got_len);
        } else if (prm->nonce_len <= GT_REPORT_DATA_BYTES && got_len == GT_REPORT_DATA_BYTES) {
            memcpy(want, prm->nonce, prm->nonce_len);
            ok = gt_ct_equal(got, want, sizeof want);
        }
        if (!ok) {
            GT_TRY(gt_strlist_addf(reasons, "binding: %s does not match the nonce%s", path,
                                   type == GT_TEE_NVGPU ? "" : " (nonce || zero padding)"));
        }
    }
    return GT_OK;
}

static gt_err eval_agreement(const gt_policy *p, const gt_appraise_params *prm,
                             gt_strlist *reasons)
{
    if (p->agreement_hashes.count == 0) {
        return GT_OK;
    }
    if (prm->agreement_hash == NULL || prm->agreement_hash_len == 0 ||
        prm->agreement_hash_len > MAX_HEX_BYTES) {
        return gt_strlist_addf(reasons, "policy: an accepted agreement hash is required, and none "
                                        "was given");
    }
    char hex[2 * MAX_HEX_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, prm->agreement_hash, prm->agreement_hash_len);
    if (!strvec_has(&p->agreement_hashes, hex)) {
        return gt_strlist_addf(reasons, "policy: agreement %.*s... is not accepted", SHORT_HEX,
                               hex);
    }
    return GT_OK;
}

// sgx_enclave: the enclave's MRENCLAVE, MRSIGNER, ISVPRODID and ISVSVN (sgx and vsgx claims).
static gt_err eval_sgx_enclave(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                               gt_strlist *reasons)
{
    if (type != GT_TEE_SGX && type != GT_TEE_VSGX) {
        return GT_OK;
    }
    static const struct {
        const char *claim, *field;
        size_t off;
    } lists[] = {{"mr_enclave", "mrenclave", offsetof(gt_policy, sgx_mrenclave)},
                 {"mr_signer", "mrsigner", offsetof(gt_policy, sgx_mrsigner)}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const strvec *v = (const strvec *)((const char *)p + lists[i].off);
        const char *got = claim_string(claims, lists[i].claim);
        if (v->count > 0 && (got == NULL || !strvec_has(v, got))) {
            GT_TRY(gt_strlist_addf(reasons, "policy: sgx_enclave.%s: %s %.*s... is not in the "
                                            "allow-list", lists[i].field, lists[i].claim,
                                   SHORT_HEX, got ? got : "(none)"));
        }
    }
    double prod = 0;
    if (p->sgx_isvprodid >= 0 &&
        (!claim_number(claims, "isv_prod_id", &prod) || prod != (double)p->sgx_isvprodid)) {
        GT_TRY(gt_strlist_addf(reasons, "policy: sgx_enclave.isvprodid: the enclave's ISVPRODID "
                                        "%.0f is not %lld", prod, (long long)p->sgx_isvprodid));
    }
    return eval_min_number(claims, "isv_svn", p->sgx_min_isvsvn, "sgx_enclave.min_isvsvn",
                           reasons);
}

static gt_err evaluate(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                       const char *tcb_status, const gt_appraise_params *params,
                       gt_strlist *reasons, gt_strlist *warnings);

// vsgx: the host evidence under the same policy (its TEE type, measurements, debug, TCB, SVNs),
// but not the verifier's binding: the host's report_data binds the virtual QE (checked by the
// verifier), the enclave's report_data binds the session.
static gt_err eval_vsgx_host(const gt_policy *p, const cJSON *claims,
                             const gt_appraise_params *params, gt_strlist *reasons,
                             gt_strlist *warnings)
{
    const cJSON *host = gt_claims_get(claims, "host");
    const char *name = claim_string(claims, "host.tee");
    gt_tee_type t = GT_TEE_AUTO;
    if (host == NULL || name == NULL || !gt_is_ok(gt_tee_type_parse(name, &t)) ||
        t == GT_TEE_AUTO || t == GT_TEE_VSGX) {
        return gt_strlist_addf(reasons, "policy: vsgx: the evidence names no host TEE");
    }
    gt_appraise_params hp = *params;
    hp.expected_report_data = NULL;
    hp.nonce = NULL;
    hp.nonce_len = 0;
    gt_strlist hr = {0}, hw = {0};
    const char *tcb = claim_string(host, "tcb_status");
    gt_err err = evaluate(p, t, host, tcb ? tcb : "", &hp, &hr, &hw);
    for (size_t i = 0; gt_is_ok(err) && i < hr.count; i++) {
        err = gt_strlist_addf(reasons, "host %s: %s", name, hr.items[i]);
    }
    for (size_t i = 0; gt_is_ok(err) && i < hw.count; i++) {
        err = gt_strlist_addf(warnings, "host %s: %s", name, hw.items[i]);
    }
    gt_strlist_free(&hr);
    gt_strlist_free(&hw);
    return err;
}

// The rules on one evidence; the agreement rule is the caller's (it judges the call, not the
// evidence: a vsgx host is not asked again).
static gt_err evaluate(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                       const char *tcb_status, const gt_appraise_params *params,
                       gt_strlist *reasons, gt_strlist *warnings)
{
    GT_ENSURE(type >= GT_TEE_SIM && type <= GT_TEE_TYPE_MAX, GT_E_ARG, "policy: bad type");
    GT_TRY(eval_types(p, type, reasons));
    char what[48];
    snprintf(what, sizeof what, "%s measurement", gt_tee_type_name(type));
    GT_TRY(eval_allow_set(&p->measurements[type], what, claims, reasons));
    if (type == GT_TEE_VSGX) {
        GT_TRY(eval_vsgx_host(p, claims, params, reasons, warnings));
    }
    GT_TRY(eval_sgx_enclave(p, type, claims, reasons));
    GT_TRY(eval_debug(p, type, claims, reasons, warnings));
    GT_TRY(eval_tcb(p, type, tcb_status, reasons));
    GT_TRY(eval_min_svn(p, type, claims, reasons));
    GT_TRY(eval_gpu(p, type, claims, reasons));
    return eval_binding(type, claims, params, reasons);
}

gt_err gt_policy_evaluate(const gt_policy *p, gt_tee_type type, const cJSON *claims,
                          const char *tcb_status, const gt_appraise_params *params,
                          gt_strlist *reasons, gt_strlist *warnings)
{
    GT_TRY(evaluate(p, type, claims, tcb_status, params, reasons, warnings));
    return eval_agreement(p, params, reasons);
}
