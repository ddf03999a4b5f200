// gputravel demo, before step 1: the work folder (a new one, or one an earlier demo made).
#include "demo.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

gt_err demo_prepare_dir(demo *d, const char *out)
{
    if (out == NULL) {
        snprintf(d->dir, sizeof d->dir, "/tmp/gputravel-demo-XXXXXX");
        GT_ENSURE(mkdtemp(d->dir) != NULL, GT_E_IO, "mkdtemp: %s", strerror(errno));
    } else {
        GT_ENSURE(strlen(out) < 1024, GT_E_LIMIT, "--out: path too long");
        snprintf(d->dir, sizeof d->dir, "%s", out);
        GT_TRY(gt_mkdir_p(d->dir, 0700));
    }
    char marker[4096];
    GT_TRY(gt_path_join(marker, sizeof marker, d->dir, DEMO_MARKER));
    DIR *dir = opendir(d->dir);
    GT_ENSURE(dir != NULL, GT_E_IO, "%s: %s", d->dir, strerror(errno));
    bool empty = true;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        empty = empty && (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0);
    }
    closedir(dir);
    GT_ENSURE(empty || gt_path_exists(marker), GT_E_STATE,
              "%s is not empty and was not made by gputravel demo: choose another --out", d->dir);
    // A demo folder from an earlier run: start over (its keys and datasets were demo data).
    dir = opendir(d->dir);
    gt_err err = GT_OK;
    while (dir != NULL && gt_is_ok(err) && (e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", d->dir, e->d_name);
            err = gt_rmtree_below(p, d->dir);
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    GT_TRY(err);
    GT_TRY(gt_file_write_atomic(marker, "gputravel demo work folder\n", 27, 0644));
    snprintf(d->sim_root, sizeof d->sim_root, "%s/sim-root", d->dir);
    snprintf(d->root_pub, sizeof d->root_pub, "%s/root-pub.pem", d->sim_root);
    snprintf(d->policy, sizeof d->policy, "%s/policy.json", d->dir);
    snprintf(d->agreement_path, sizeof d->agreement_path, "%s/agreement.json", d->dir);
    snprintf(d->socket, sizeof d->socket, "%s/devd.sock", d->dir);
    snprintf(d->state, sizeof d->state, "%s/trainer", d->dir);
    snprintf(d->devd_log, sizeof d->devd_log, "%s/logs/devd.log", d->dir);
    snprintf(d->tampered, sizeof d->tampered, "%s/tampered", d->dir);
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        const char *n = holder_names[i];
        snprintf(h->shard, sizeof h->shard, "%s/%s/text.bin", d->dir, n);
        snprintf(h->keys, sizeof h->keys, "%s/%s/keys", d->dir, n);
        snprintf(h->dataset, sizeof h->dataset, "%s/%s/dataset", d->dir, n);
        snprintf(h->ledger, sizeof h->ledger, "%s/%s/ledger.log", d->dir, n);
        snprintf(h->log, sizeof h->log, "%s/logs/holder-%s.log", d->dir, n);
        char hd[4096];
        snprintf(hd, sizeof hd, "%s/%s", d->dir, n);
        GT_TRY(gt_mkdir_p(hd, 0700));
    }
    char logs[4096];
    snprintf(logs, sizeof logs, "%s/logs", d->dir);
    GT_TRY(gt_mkdir_p(logs, 0700));
    // Every process of the demo shares one simulated platform root.
    GT_TRY(gt_cli_sim_root_use(d->sim_root));
    ssize_t n = readlink("/proc/self/exe", d->self, sizeof d->self - 1);
    GT_ENSURE(n > 0, GT_E_IO, "cannot find this executable: %s", strerror(errno));
    d->self[n] = '\0';
    return GT_OK;
}
