#include "testlib_json.h"

#include <stdio.h>
#include <string.h>

static bool ignored(const char *name, const char *const *ignore)
{
    for (size_t i = 0; ignore != NULL && ignore[i] != NULL; i++) {
        if (strcmp(name, ignore[i]) == 0) {
            return true;
        }
    }
    return false;
}

static void compare(const cJSON *got, const cJSON *want, const char *const *ignore,
                    const char *path)
{
    char sub[512];
    if (cJSON_IsObject(want)) {
        if (!cJSON_IsObject(got)) {
            fail_msg("%s: expected an object", path);
        }
        const cJSON *g = NULL;
        cJSON_ArrayForEach(g, got) {
            snprintf(sub, sizeof sub, "%s.%s", path, g->string);
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(want, g->string);
            if (w == NULL) {
                fail_msg("%s: emitted but not in the expected file", sub);
            }
            compare(g, w, NULL, sub);
        }
        const cJSON *w = NULL;
        cJSON_ArrayForEach(w, want) {
            if (!ignored(w->string, ignore) &&
                cJSON_GetObjectItemCaseSensitive(got, w->string) == NULL) {
                fail_msg("%s.%s: expected but not emitted", path, w->string);
            }
        }
    } else if (cJSON_IsArray(want)) {
        if (!cJSON_IsArray(got) || cJSON_GetArraySize(got) != cJSON_GetArraySize(want)) {
            fail_msg("%s: expected an array of %d", path, cJSON_GetArraySize(want));
        }
        for (int i = 0; i < cJSON_GetArraySize(want); i++) {
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            compare(cJSON_GetArrayItem(got, i), cJSON_GetArrayItem(want, i), NULL, sub);
        }
    } else if (cJSON_IsString(want)) {
        if (!cJSON_IsString(got) || strcmp(got->valuestring, want->valuestring) != 0) {
            char *g = cJSON_PrintUnformatted(got);
            fail_msg("%s: got %s, expected \"%s\"", path, g ? g : "?", want->valuestring);
        }
    } else if (cJSON_IsNumber(want)) {
        if (!cJSON_IsNumber(got) || got->valuedouble != want->valuedouble) {
            char *g = cJSON_PrintUnformatted(got);
            fail_msg("%s: got %s, expected %.17g", path, g ? g : "?", want->valuedouble);
        }
    } else if (cJSON_IsBool(want)) {
        if (!cJSON_IsBool(got) || cJSON_IsTrue(got) != cJSON_IsTrue(want)) {
            fail_msg("%s: expected %s", path, cJSON_IsTrue(want) ? "true" : "false");
        }
    } else if (cJSON_IsNull(want)) {
        if (!cJSON_IsNull(got)) {
            fail_msg("%s: expected null", path);
        }
    } else {
        fail_msg("%s: unexpected JSON type in the expected file", path);
    }
}

void gt_test_json_expect_equal(const cJSON *got, const cJSON *want,
                               const char *const *ignore_want, const char *what)
{
    compare(got, want, ignore_want, what);
}

cJSON *gt_test_load_json(const char *rel)
{
    char path[4096];
    gt_test_data_path(path, sizeof path, rel);
    cJSON *doc = NULL;
    GT_ASSERT_OK(gt_json_load_file(path, 16u << 20, &doc));
    return doc;
}
