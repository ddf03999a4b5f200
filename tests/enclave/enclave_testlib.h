// Shared by the enclave/ tests: loading the SGX test data and comparing against expected.json.
#ifndef GT_ENCLAVE_TESTLIB_H
#define GT_ENCLAVE_TESTLIB_H

#include "testlib.h"
#include "testlib_json.h"

#include <gputravel/enclave.h>

#include <stdio.h>
#include <string.h>

#define SGXE_DIR "sgx-enclave/"

static inline void sgxe_read(const char *file, gt_buf *b)
{
    char rel[256];
    snprintf(rel, sizeof rel, SGXE_DIR "%s", file);
    gt_test_read_data(rel, b);
}

static inline cJSON *sgxe_expected(const char *file)
{
    char rel[256];
    snprintf(rel, sizeof rel, SGXE_DIR "%s.expected.json", file);
    return gt_test_load_json(rel);
}

static inline bool sgxe_ignored(const char *key, const char *const *ignore)
{
    for (size_t i = 0; ignore != NULL && ignore[i] != NULL; i++) {
        if (strcmp(ignore[i], key) == 0) {
            return true;
        }
    }
    return false;
}

// Every member of want (but those in ignore) is in got with an equal value.
static inline void sgxe_expect_members(const cJSON *got, const cJSON *want,
                                       const char *const *ignore, const char *what)
{
    assert_non_null(want);
    int compared = 0;
    for (const cJSON *w = want->child; w != NULL; w = w->next) {
        if (sgxe_ignored(w->string, ignore)) {
            continue;
        }
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, w->string);
        if (g == NULL || !cJSON_Compare(g, w, true)) {
            char *gs = g ? cJSON_PrintUnformatted(g) : NULL, *ws = cJSON_PrintUnformatted(w);
            fail_msg("%s: %s is %s, expected %s", what, w->string, gs ? gs : "(missing)",
                     ws ? ws : "?");
        }
        compared++;
    }
    assert_true(compared > 0);
}

#endif
