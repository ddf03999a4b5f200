// The swtpm fixture (swtpm.h) on the holder layer's gt_rollback_swtpm_start.
#include "testlib.h"
#include "swtpm.h"

#include <gputravel/holder.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool gt_test_swtpm_find(gt_test_swtpm *t, char *why, size_t cap)
{
    memset(t, 0, sizeof *t);
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path && *path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        snprintf(t->exe, sizeof t->exe, "%s/swtpm", d);
        if (access(t->exe, X_OK) == 0) {
            return true;
        }
    }
    t->exe[0] = '\0';
    snprintf(why, cap, "swtpm is not installed (Debian packages swtpm swtpm-tools; "
                       "scripts/deps.sh installs them): the TPM rollback-guard cases cannot run");
    return false;
}

void gt_test_swtpm_start(gt_test_swtpm *t, const char *state_dir)
{
    assert_true(t->exe[0] != '\0');
    snprintf(t->state_dir, sizeof t->state_dir, "%s", state_dir);
    snprintf(t->log, sizeof t->log, "%s.log", state_dir);
    GT_ASSERT_OK(gt_rollback_swtpm_start(state_dir, t->log, &t->proc, &t->port, t->spec,
                                         sizeof t->spec));
}

void gt_test_swtpm_stop(gt_test_swtpm *t)
{
    if (t->proc.pid > 0) {
        gt_proc_stop(&t->proc, 5000);
    }
    t->proc = (gt_proc){0};
}
