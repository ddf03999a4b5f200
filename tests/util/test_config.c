// util/config: --config files into arguments. Each strictness rule is attacked with a file that
// breaks it, and the message must name the key; the command line overrides the file.
#include "testlib.h"

#include <getopt.h>
#include <string.h>

static const struct option opts[] = {
    {"dataset", required_argument, NULL, 'd'}, {"root", required_argument, NULL, 'r'},
    {"threads", required_argument, NULL, 'j'}, {"witnesses", no_argument, NULL, 'w'},
    {"json", no_argument, NULL, 'J'},          {0}};
static const char *const repeatable[] = {"root", NULL};

// The file's arguments joined by spaces, for the given command line (NULL: none).
static gt_err expand(const char *doc, char *const *cmdline, char *joined, size_t cap)
{
    int n = 0;
    while (cmdline != NULL && cmdline[n] != NULL) {
        n++;
    }
    gt_args a;
    GT_TRY(gt_config_args(doc, strlen(doc), opts, repeatable, n, cmdline, &a));
    joined[0] = '\0';
    for (int i = 0; i < a.argc; i++) {
        size_t used = strlen(joined);
        snprintf(joined + used, cap - used, "%s%s", i ? " " : "", a.argv[i]);
    }
    assert_null(a.argv[a.argc]);
    gt_args_free(&a);
    return GT_OK;
}

static void options_from_a_file(void **state)
{
    (void)state;
    char got[512];
    GT_ASSERT_OK(expand("{\"dataset\": \"ds\", \"root\": [\"a.pem\", \"b.pem\"], \"threads\": 4,"
                        " \"witnesses\": true, \"json\": false}", NULL, got, sizeof got));
    assert_string_equal(got, "--dataset ds --root a.pem --root b.pem --threads 4 --witnesses");
    GT_ASSERT_OK(expand("{}", NULL, got, sizeof got));
    assert_string_equal(got, "");
    // The command line wins: its options are left out of the file's, in either spelling.
    char *cmdline[] = {"holder", "--threads", "2", "--root=c.pem", NULL};
    GT_ASSERT_OK(expand("{\"dataset\": \"ds\", \"root\": [\"a.pem\"], \"threads\": 4}", cmdline,
                        got, sizeof got));
    assert_string_equal(got, "--dataset ds");
}

static void strict_about_keys_and_types(void **state)
{
    (void)state;
    static const struct {
        const char *doc, *says;
    } bad[] = {
        {"{\"datset\": \"ds\"}", "unknown key \"datset\""},
        {"{\"--dataset\": \"ds\"}", "unknown key \"--dataset\""},
        {"{\"config\": \"other.json\"}", "unknown key \"config\""},
        {"{\"dataset\": \"a\", \"dataset\": \"b\"}", "\"dataset\" is given twice"},
        {"{\"dataset\": true}", "\"dataset\" takes a string or a number"},
        {"{\"dataset\": {\"path\": \"ds\"}}", "\"dataset\" takes a string or a number"},
        {"{\"dataset\": null}", "\"dataset\" takes a string or a number"},
        {"{\"dataset\": [\"a\", \"b\"]}", "\"dataset\" takes one value, not a list"},
        {"{\"root\": [\"a.pem\", 7, {}]}", "\"root\" takes a string or a number"},
        {"{\"witnesses\": \"yes\"}", "\"witnesses\" is a flag: true or false"},
        {"{\"witnesses\": 1}", "\"witnesses\" is a flag: true or false"},
        {"[\"--dataset\", \"ds\"]", "expected one JSON object of options"},
        {"\"dataset\"", "expected one JSON object of options"},
        {"{\"dataset\": \"ds\"", "syntax error"},
        {"", "syntax error"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char got[512];
        gt_err e = expand(bad[i].doc, NULL, got, sizeof got);
        if (e.code == GT_E_NONE || strstr(e.msg, bad[i].says) == NULL) {
            fail_msg("%s: expected '%s', got '%s'", bad[i].doc, bad[i].says, e.msg);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(options_from_a_file),
        cmocka_unit_test(strict_about_keys_and_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
