// Shared command-line helpers (cli.h): strict number parsing for flags (the whole string must be a number in
// range; "12x", "", " 3", "-1" for an unsigned flag, and overflow are errors naming the flag),
// and the output folder of a benchmark.
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gt_err gt_cli_parse_u64(const char *flag, const char *s, uint64_t min, uint64_t max,
                        uint64_t *out)
{
    GT_ENSURE(s != NULL && s[0] >= '0' && s[0] <= '9', GT_E_ARG,
              "%s '%s': not a whole number", flag, s ? s : "");
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    GT_ENSURE(errno == 0 && end != s && *end == '\0', GT_E_ARG, "%s '%s': not a whole number",
              flag, s);
    GT_ENSURE(v >= min && v <= max, GT_E_ARG, "%s %llu: must be %llu..%llu", flag, v,
              (unsigned long long)min, (unsigned long long)max);
    *out = v;
    return GT_OK;
}

gt_err gt_cli_parse_u32(const char *flag, const char *s, uint32_t min, uint32_t max,
                        uint32_t *out)
{
    uint64_t v = 0;
    GT_TRY(gt_cli_parse_u64(flag, s, min, max, &v));
    *out = (uint32_t)v;
    return GT_OK;
}

gt_err gt_cli_parse_int(const char *flag, const char *s, int min, int max, int *out)
{
    GT_ENSURE(s != NULL && s[0] != '\0' && s[0] != ' ', GT_E_ARG, "%s '%s': not a whole number",
              flag, s ? s : "");
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    GT_ENSURE(errno == 0 && end != s && *end == '\0', GT_E_ARG, "%s '%s': not a whole number",
              flag, s);
    GT_ENSURE(v >= min && v <= max, GT_E_ARG, "%s %ld: must be %d..%d", flag, v, min, max);
    *out = (int)v;
    return GT_OK;
}

gt_err gt_cli_parse_double(const char *flag, const char *s, double min, double max, double *out)
{
    GT_ENSURE(s != NULL && s[0] != '\0' && s[0] != ' ', GT_E_ARG, "%s '%s': not a number", flag,
              s ? s : "");
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    GT_ENSURE(errno == 0 && end != s && *end == '\0' && isfinite(v), GT_E_ARG,
              "%s '%s': not a number", flag, s);
    GT_ENSURE(v >= min && v <= max, GT_E_ARG, "%s %g: must be %g..%g", flag, v, min, max);
    *out = v;
    return GT_OK;
}

// Prints o as indented JSON on stdout and frees it (every --json output goes through here).
int gt_cli_print_json(cJSON *o)
{
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (text == NULL) {
        return gt_cli_fail("json", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    printf("%s\n", text);
    free(text);
    return GT_EXIT_OK;
}

gt_err gt_cli_bench_dir(char *dir, size_t cap, const char *out, const char *name)
{
    int n = out != NULL ? snprintf(dir, cap, "%s", out)
                        : snprintf(dir, cap, "/tmp/gputravel-bench-%s-XXXXXX", name);
    GT_ENSURE(n > 0 && (size_t)n < cap, GT_E_ARG, "--out: path too long");
    if (out == NULL) {
        GT_ENSURE(mkdtemp(dir) != NULL, GT_E_IO, "mkdtemp %s: %s", dir, strerror(errno));
    }
    return gt_mkdir_p(dir, 0700);
}
