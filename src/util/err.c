// Error values: a code from the one table in util.h plus a formatted message.
#include <gputravel/util.h>

#include <stdio.h>
#include <string.h>

gt_err gt_errf(gt_code code, const char *fmt, ...)
{
    gt_err e = {.code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    return e;
}

gt_err gt_err_wrap(gt_err e, const char *fmt, ...)
{
    if (e.code == GT_E_NONE) {
        return e;
    }
    gt_err out = {.code = e.code};
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out.msg, sizeof out.msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof out.msg) {
        // Copied by hand: the combined text may be cut at the end, and that is intended.
        size_t at = (size_t)n;
        const char *tail[2] = {": ", e.msg};
        for (int t = 0; t < 2; t++) {
            for (const char *c = tail[t]; *c && at + 1 < sizeof out.msg; c++) {
                out.msg[at++] = *c;
            }
        }
        out.msg[at] = '\0';
    }
    return out;
}

#define GT_CODE_NAME(code, text) [code] = #code,
#define GT_CODE_TEXT(code, text) [code] = text,
static const char *const code_names[GT_E_COUNT_] = {[GT_E_NONE] = "GT_E_NONE",
                                                     GT_ERR_CODES(GT_CODE_NAME)};
static const char *const code_texts[GT_E_COUNT_] = {[GT_E_NONE] = "success",
                                                     GT_ERR_CODES(GT_CODE_TEXT)};

const char *gt_code_name(gt_code code)
{
    if ((unsigned)code >= GT_E_COUNT_) {
        return "UNKNOWN";
    }
    return code_names[code] + strlen("GT_E_");
}

const char *gt_code_text(gt_code code)
{
    if ((unsigned)code >= GT_E_COUNT_) {
        return "unknown error";
    }
    return code_texts[code];
}
