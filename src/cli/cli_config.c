// --config FILE for holder and train (cli.h): the file's options before the command line's.
#include "cli.h"

#include <stdlib.h>
#include <string.h>

// A config file is a few options: anything larger is not one.
#define CONFIG_MAX_BYTES (1 << 20)

// argv's --config: *at its index, *width 2 for "--config FILE", 1 for "--config=FILE"; the
// path, "" when FILE is missing, or NULL without --config.
static const char *config_path(int argc, char **argv, int *at, int *width)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0) {
            *at = i;
            *width = i + 1 < argc ? 2 : 1;
            return i + 1 < argc ? argv[i + 1] : "";
        }
        if (strncmp(argv[i], "--config=", 9) == 0) {
            *at = i;
            *width = 1;
            return argv[i] + 9;
        }
    }
    return NULL;
}

void gt_cli_config_free(gt_cli_config *c)
{
    gt_args_free(&c->file);
    free(c->argv);
    c->argv = NULL;
}

bool gt_cli_config_has(int argc, char **argv, const char *key)
{
    int at = 0, width = 0;
    const char *path = config_path(argc, argv, &at, &width);
    cJSON *doc = NULL;
    if (path == NULL || path[0] == '\0' ||
        !gt_is_ok(gt_json_load_file(path, CONFIG_MAX_BYTES, &doc))) {
        return false;  // no file to ask; the expansion reports what is wrong with it
    }
    bool has = cJSON_IsObject(doc) && cJSON_GetObjectItemCaseSensitive(doc, key) != NULL;
    cJSON_Delete(doc);
    return has;
}

// argv[0], the file's options, then the command line's arguments but --config.
static gt_err splice(gt_cli_config *c, int *argc, char ***argv, int at, int width)
{
    int n = 1 + c->file.argc + *argc - width;
    c->argv = calloc((size_t)n + 1, sizeof *c->argv);
    GT_ENSURE(c->argv != NULL, GT_E_NOMEM, "out of memory");
    int k = 0;
    c->argv[k++] = (*argv)[0];
    for (int i = 0; i < c->file.argc; i++) {
        c->argv[k++] = c->file.argv[i];
    }
    for (int i = 1; i < *argc; i++) {
        if (i < at || i >= at + width) {
            c->argv[k++] = (*argv)[i];
        }
    }
    *argc = k;
    *argv = c->argv;
    return GT_OK;
}

int gt_cli_config_expand(const char *cmd, const struct option *opts,
                         const char *const *repeatable, int *argc, char ***argv,
                         gt_cli_config *c)
{
    memset(c, 0, sizeof *c);
    int at = 0, width = 0;
    const char *path = config_path(*argc, *argv, &at, &width);
    if (path == NULL) {
        return GT_EXIT_OK;
    }
    int again = 0, w2 = 0;
    if (path[0] == '\0' || config_path(*argc - at - width + 1, *argv + at + width - 1, &again,
                                       &w2) != NULL) {
        return gt_cli_usage(cmd, "--config takes one FILE, once");
    }
    gt_buf b = {0};
    gt_err err = gt_file_read_all(path, CONFIG_MAX_BYTES, &b);
    if (gt_is_ok(err)) {
        err = gt_config_args((const char *)b.data, b.len, opts, repeatable, *argc, *argv,
                             &c->file);
    }
    gt_buf_free(&b);
    if (gt_is_ok(err)) {
        err = splice(c, argc, argv, at, width);
    }
    if (!gt_is_ok(err)) {
        gt_cli_config_free(c);
        return gt_cli_fail(cmd, gt_err_wrap(err, "--config %s", path));
    }
    return GT_EXIT_OK;
}
