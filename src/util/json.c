// JSON helpers over cJSON: parse with a size limit, typed getters that name the missing field.
#include <gputravel/util.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

gt_err gt_json_parse(const char *text, size_t len, cJSON **out)
{
    *out = NULL;
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (doc == NULL) {
        size_t at = end ? (size_t)(end - text) : 0;
        return gt_errf(GT_E_FORMAT, "json: syntax error near byte %zu", at);
    }
    *out = doc;
    return GT_OK;
}

gt_err gt_json_load_file(const char *path, size_t max_len, cJSON **out)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, max_len, &b));
    gt_err err = gt_json_parse((const char *)b.data, b.len, out);
    gt_buf_free(&b);
    return gt_err_wrap(err, "%s", path);
}

static gt_err field(const cJSON *obj, const char *name, const cJSON **out)
{
    GT_ENSURE(cJSON_IsObject(obj), GT_E_FORMAT, "json: expected an object around '%s'", name);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    GT_ENSURE(f != NULL, GT_E_FORMAT, "json: missing field '%s'", name);
    *out = f;
    return GT_OK;
}

gt_err gt_json_get_string(const cJSON *obj, const char *name, const char **out)
{
    const cJSON *f = NULL;
    GT_TRY(field(obj, name, &f));
    GT_ENSURE(cJSON_IsString(f) && f->valuestring != NULL, GT_E_FORMAT,
              "json: field '%s' is not a string", name);
    *out = f->valuestring;
    return GT_OK;
}

gt_err gt_json_get_u64(const cJSON *obj, const char *name, uint64_t *out)
{
    const cJSON *f = NULL;
    GT_TRY(field(obj, name, &f));
    // Strings allow values beyond 2^53, which a JSON number (a double) cannot hold exactly.
    if (cJSON_IsString(f) && f->valuestring != NULL) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(f->valuestring, &end, 10);
        GT_ENSURE(end != f->valuestring && *end == '\0' && f->valuestring[0] != '-', GT_E_FORMAT,
                  "json: field '%s' is not an unsigned integer", name);
        *out = v;
        return GT_OK;
    }
    GT_ENSURE(cJSON_IsNumber(f), GT_E_FORMAT, "json: field '%s' is not a number", name);
    double d = f->valuedouble;
    GT_ENSURE(d >= 0 && d <= 9007199254740992.0 && floor(d) == d, GT_E_FORMAT,
              "json: field '%s' is not an unsigned integer", name);
    *out = (uint64_t)d;
    return GT_OK;
}

gt_err gt_json_get_bool(const cJSON *obj, const char *name, bool *out)
{
    const cJSON *f = NULL;
    GT_TRY(field(obj, name, &f));
    GT_ENSURE(cJSON_IsBool(f), GT_E_FORMAT, "json: field '%s' is not true/false", name);
    *out = cJSON_IsTrue(f);
    return GT_OK;
}

gt_err gt_json_get_hex(const cJSON *obj, const char *name, uint8_t *out, size_t n)
{
    const char *s = NULL;
    GT_TRY(gt_json_get_string(obj, name, &s));
    return gt_err_wrap(gt_hex_decode_exact(out, n, s), "json: field '%s'", name);
}

gt_err gt_json_write_file(const char *path, const cJSON *obj, unsigned mode)
{
    char *text = cJSON_Print(obj);
    GT_ENSURE(text != NULL, GT_E_NOMEM, "json: cannot print");
    size_t len = strlen(text);
    gt_err err = GT_OK;
    gt_buf b = {0};
    GT_TRY_GOTO(err, gt_buf_append(&b, text, len), out);
    GT_TRY_GOTO(err, gt_buf_append(&b, "\n", 1), out);
    err = gt_file_write_atomic(path, b.data, b.len, mode);
out:
    gt_buf_free_nowipe(&b);
    cJSON_free(text);
    return err;
}
