// gputravel train --agreement A --distributed: one rank of collaborative training across ranks
// (train_dist.h; docs/collaboration.md "Across ranks"). orchestr/ runs the rounds; this file
// gives it MPI and the ring through gt_collab_ranks.
#include "cli.h"
#include "train_dist.h"

#include <stdio.h>
#include <string.h>

static gt_err ranks_start(void *ctx, gt_device *dev, gt_dbuf grads)
{
    return gt_train_dist_start(ctx, dev, grads);
}

static gt_err ranks_allgather(void *ctx, const void *mine, size_t len, void *all)
{
    (void)ctx;
    GT_ENSURE(len <= (size_t)INT32_MAX, GT_E_LIMIT, "allgather of %zu bytes", len);
    // Released values only (outcomes, steps, losses, run ids): plain MPI is fine. A dead rank
    // ends the job through mpirun, which kills the others waiting here.
    int rc = MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, MPI_COMM_WORLD);
    GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "MPI_Allgather failed (%d)", rc);
    return GT_OK;
}

static gt_err ranks_allreduce(void *ctx, uint64_t n, uint64_t step)
{
    return gt_train_dist_allreduce(ctx, n, step);
}

gt_err gt_train_dist_collab_init(train_dist_collab *t, int *argc, char ***argv,
                                 const char *agreement, const char *state_dir,
                                 const char *socket, const char *name)
{
    memset(t, 0, sizeof *t);
    MPI_Init(argc, argv);
    GT_TRY(gt_train_dist_init(&t->d, agreement));
    t->ranks = (gt_collab_ranks){.rank = t->d.rank, .nranks = t->d.nranks, .ctx = &t->d,
                                 .start = ranks_start, .allgather = ranks_allgather,
                                 .allreduce = ranks_allreduce};
    char sub[64];
    snprintf(sub, sizeof sub, "rank%d", t->d.rank);
    GT_TRY(gt_path_join(t->state_dir, sizeof t->state_dir, state_dir, sub));
    if (socket != NULL) {
        GT_TRY(gt_train_dist_rank_path(t->socket, sizeof t->socket, socket, t->d.rank));
    }
    int n = snprintf(t->name, sizeof t->name, "%s.rank%d", name, t->d.rank);
    GT_ENSURE(n > 0 && (size_t)n < sizeof t->name, GT_E_LIMIT, "--name too long");
    if (t->d.rank != 0) {
        gt_cli.quiet = true;  // rank 0 prints; the others say only what went wrong
        if (!gt_cli.verbose) {
            gt_log_set_level(GT_LOG_WARN);
        }
    }
    return GT_OK;
}

void gt_train_dist_collab_end(train_dist_collab *t, gt_err err)
{
    if (!gt_is_ok(err)) {
        fprintf(stderr, "gputravel train: rank %d of %d: error: %s\n", t->d.rank, t->d.nranks,
                err.msg);
        fflush(stderr);
        fflush(stdout);
        gt_train_dist_abort(GT_EXIT_FAIL);
    }
    gt_train_dist_free(&t->d);
    MPI_Finalize();
}
