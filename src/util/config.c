// Option files for --config (util.h): a JSON object of long options, turned into arguments.
#include <gputravel/util.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

// Far more than any command has options: a bound on what one file may expand to.
#define CONFIG_MAX_ARGS 512

static gt_err push(gt_args *a, const char *s)
{
    GT_ENSURE(a->argc < CONFIG_MAX_ARGS, GT_E_LIMIT, "config: more than %d arguments",
              CONFIG_MAX_ARGS);
    char **grown = realloc(a->argv, (size_t)(a->argc + 2) * sizeof *grown);
    GT_ENSURE(grown != NULL, GT_E_NOMEM, "config: out of memory");
    a->argv = grown;
    a->argv[a->argc] = strdup(s);
    GT_ENSURE(a->argv[a->argc] != NULL, GT_E_NOMEM, "config: out of memory");
    a->argv[++a->argc] = NULL;
    return GT_OK;
}

void gt_args_free(gt_args *a)
{
    for (int i = 0; i < a->argc; i++) {
        free(a->argv[i]);
    }
    free(a->argv);
    a->argc = 0;
    a->argv = NULL;
}

static const struct option *find_option(const struct option *opts, const char *name)
{
    for (const struct option *o = opts; o->name != NULL; o++) {
        if (strcmp(o->name, name) == 0) {
            return o;
        }
    }
    return NULL;
}

static bool listed(const char *const *names, const char *name)
{
    for (size_t i = 0; names != NULL && names[i] != NULL; i++) {
        if (strcmp(names[i], name) == 0) {
            return true;
        }
    }
    return false;
}

// Whether the command line gives --name (as "--name" or "--name=VALUE").
static bool given(int argc, char *const *argv, const char *name)
{
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) == 0 && strncmp(a + 2, name, n) == 0 &&
            (a[2 + n] == '\0' || a[2 + n] == '=')) {
            return true;
        }
    }
    return false;
}

// One value of an option that takes one: a string as it is, a number as its shortest text.
static gt_err push_value(gt_args *out, const char *key, const cJSON *v)
{
    if (cJSON_IsString(v)) {
        return push(out, v->valuestring);
    }
    GT_ENSURE(cJSON_IsNumber(v), GT_E_FORMAT, "config: \"%s\" takes a string or a number", key);
    char text[40];
    snprintf(text, sizeof text, "%.17g", v->valuedouble);
    return push(out, text);
}

static gt_err take_key(const cJSON *item, const struct option *opt, const char *const *repeatable,
                       gt_args *out)
{
    const char *key = item->string;
    char flag[128];
    snprintf(flag, sizeof flag, "--%s", key);
    if (opt->has_arg == no_argument) {
        GT_ENSURE(cJSON_IsBool(item), GT_E_FORMAT, "config: \"%s\" is a flag: true or false",
                  key);
        return cJSON_IsTrue(item) ? push(out, flag) : GT_OK;
    }
    if (!cJSON_IsArray(item)) {
        GT_TRY(push(out, flag));
        return push_value(out, key, item);
    }
    GT_ENSURE(listed(repeatable, key), GT_E_FORMAT,
              "config: \"%s\" takes one value, not a list", key);
    for (const cJSON *v = item->child; v != NULL; v = v->next) {
        GT_TRY(push(out, flag));
        GT_TRY(push_value(out, key, v));
    }
    return GT_OK;
}

static gt_err take_object(const cJSON *doc, const struct option *opts,
                          const char *const *repeatable, int given_argc,
                          char *const *given_argv, gt_args *out)
{
    GT_ENSURE(cJSON_IsObject(doc), GT_E_FORMAT,
              "config: expected one JSON object of options (long names without --)");
    GT_ENSURE(cJSON_GetArraySize(doc) <= CONFIG_MAX_ARGS, GT_E_LIMIT,
              "config: more than %d keys", CONFIG_MAX_ARGS);
    for (const cJSON *item = doc->child; item != NULL; item = item->next) {
        const char *key = item->string;
        GT_ENSURE(key != NULL, GT_E_FORMAT, "config: an entry without a key");
        for (const cJSON *prev = doc->child; prev != item; prev = prev->next) {
            GT_ENSURE(strcmp(prev->string, key) != 0, GT_E_FORMAT,
                      "config: \"%.100s\" is given twice", key);
        }
        const struct option *opt = find_option(opts, key);
        GT_ENSURE(opt != NULL && strlen(key) < 100, GT_E_FORMAT,
                  "config: unknown key \"%.100s\" (the keys are this command's long options, "
                  "without --)", key);
        if (!given(given_argc, given_argv, key)) {
            GT_TRY(take_key(item, opt, repeatable, out));
        }
    }
    return GT_OK;
}

gt_err gt_config_args(const char *doc, size_t len, const struct option *opts,
                      const char *const *repeatable, int given_argc, char *const *given_argv,
                      gt_args *out)
{
    memset(out, 0, sizeof *out);
    cJSON *j = NULL;
    GT_TRY(gt_err_wrap(gt_json_parse(doc, len, &j), "config"));
    gt_err err = take_object(j, opts, repeatable, given_argc, given_argv, out);
    cJSON_Delete(j);
    if (gt_is_ok(err) && out->argv == NULL) {
        out->argv = calloc(1, sizeof *out->argv);  // no options: still a NULL-terminated list
        err = out->argv != NULL ? GT_OK : gt_errf(GT_E_NOMEM, "config: out of memory");
    }
    if (!gt_is_ok(err)) {
        gt_args_free(out);
    }
    return err;
}
