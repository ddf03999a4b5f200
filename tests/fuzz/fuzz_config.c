// Fuzz target: --config files (util.h gt_config_args). Any input either fails with a message and
// hands out nothing, or expands to arguments in which every option is one of the table's, a
// flag stands alone, an option with a value is followed by one, and only a repeatable option
// appears twice.
#include <gputravel/util.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const struct option opts[] = {
    {"dataset", required_argument, NULL, 'd'}, {"root", required_argument, NULL, 'r'},
    {"threads", required_argument, NULL, 'j'}, {"witnesses", no_argument, NULL, 'w'},
    {0}};
static const char *const repeatable[] = {"root", NULL};

static const struct option *named(const char *arg)
{
    for (const struct option *o = opts; o->name != NULL; o++) {
        if (strncmp(arg, "--", 2) == 0 && strcmp(arg + 2, o->name) == 0) {
            return o;
        }
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_log_set_level(GT_LOG_ERROR);
    char *cmdline[] = {"cmd", "--threads", "1", NULL};
    gt_args a;
    gt_err e = gt_config_args((const char *)data, size, opts, repeatable, 3, cmdline, &a);
    if (!gt_is_ok(e)) {
        if (a.argv != NULL || a.argc != 0 || e.msg[0] == '\0') {
            abort();  // a failure hands nothing out and always says why
        }
        return 0;
    }
    int seen[4] = {0};
    for (int i = 0; i < a.argc; i++) {
        const struct option *o = named(a.argv[i]);
        if (o == NULL || o->val == 'j') {
            abort();  // not an option, or one the command line gave
        }
        if (++seen[o - opts] > 1 && o->val != 'r') {
            abort();
        }
        if (o->has_arg == required_argument && ++i >= a.argc) {
            abort();
        }
    }
    if (a.argv[a.argc] != NULL) {
        abort();
    }
    gt_args_free(&a);
    return 0;
}
