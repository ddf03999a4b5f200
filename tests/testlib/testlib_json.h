// JSON comparison for tests that check emitted claims against a committed .expected.json.
#ifndef GT_TESTLIB_JSON_H
#define GT_TESTLIB_JSON_H

#include "testlib.h"

// Fails the test unless got and want hold the same values: every member of an object in got must
// exist in want with an equal value (numbers compared exactly, strings byte for byte, arrays
// element by element), and every member of want must exist in got, except top-level members of
// want named in ignore_want (NULL-terminated, may be NULL): fields the producer does not emit.
// what names the comparison in failure messages.
void gt_test_json_expect_equal(const cJSON *got, const cJSON *want,
                               const char *const *ignore_want, const char *what);

// Loads tests/testdata/<rel> as JSON (fails the test if it cannot); caller cJSON_Deletes.
cJSON *gt_test_load_json(const char *rel);

#endif
