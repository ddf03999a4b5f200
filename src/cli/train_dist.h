// gputravel train --distributed: data-parallel ranks on Open MPI (docs/collective.md "Training across
// ranks"). Each rank is one process with its own device; the gradients are summed by the
// encrypted ring with the device endpoint, so they leave a device only sealed by it.
#ifndef GPUTRAVEL_CLI_TRAIN_DIST_H
#define GPUTRAVEL_CLI_TRAIN_DIST_H

#include <gputravel/device.h>
#include <gputravel/collective.h>
#include <gputravel/train.h>
#include <gputravel/orchestr.h>
#include <gputravel/travel.h>

typedef struct {
    int rank, nranks;
    gt_agreement *agreement;  // --peers: trainer.ranks and the accepted measurements
    gt_ring_device *ep;
    gt_ring *ring;
    gt_dbuf grads;
    double ring_s;            // seconds spent in the collectives, all steps
    // --zero 1: the AdamW state sharded (ZeRO-1). The gradients are reduce-scattered, this rank
    // updates params [shard_off, +shard_len), then the parameters are all-gathered.
    bool zero;
    gt_gpt2 *model;           // borrowed (its parameters and partial sums of squares)
    uint64_t nparams, shard_off, shard_len;
} train_dist;

// True when mpirun started this process (Open MPI's, PMIx's or PMI's rank variables).
bool gt_train_dist_under_mpirun(void);
// socket with every "%r" replaced by rank (one devd, one folder per rank).
GT_MUST_USE gt_err gt_train_dist_rank_path(char *out, size_t cap, const char *socket, int rank);
// Reads the agreement (GT_E_ARG unless trainer.ranks is the job's size).
GT_MUST_USE gt_err gt_train_dist_init(train_dist *d, const char *agreement_path);
// The rank's device: cpu, or sim at socket (every "%r" replaced by the rank) opened with the
// agreement's hash; its outputs declared from the agreement (the peers' rules).
GT_MUST_USE gt_err gt_train_dist_open_device(train_dist *d, gt_device_config *dc,
                                             const char *socket, gt_device **dev);
// Attested admission of every rank's device, then the ring over the gradient buffer.
GT_MUST_USE gt_err gt_train_dist_start(train_dist *d, gt_device *dev, gt_dbuf grads);
// The gradient buffer's n floats summed over the ranks, on the devices, for step.
GT_MUST_USE gt_err gt_train_dist_allreduce(train_dist *d, uint64_t n, uint64_t step);
// ZeRO-1 from now on: this rank's shard of m's parameters (gt_ring_shard), its AdamW state for
// that shard only (gt_gpt2_zero_shard); logs the optimizer bytes this rank's device holds.
GT_MUST_USE gt_err gt_train_dist_zero_start(train_dist *d, gt_gpt2 *m);
// The step's gradients summed: all-reduced (replicated), or reduce-scattered (ZeRO-1; with
// need_norm, then this shard's sum of squares all-gathered between the devices too).
GT_MUST_USE gt_err gt_train_dist_sum_grads(train_dist *d, gt_gpt2 *m, uint64_t step,
                                           bool need_norm);
// After the update: ZeRO-1 all-gathers the parameters (each rank's updated shard copied to
// every device); replicated: nothing to do.
GT_MUST_USE gt_err gt_train_dist_after_update(train_dist *d, uint64_t step);
// The mean of every rank's released loss (released scalars: plain MPI is fine).
GT_MUST_USE gt_err gt_train_dist_mean(train_dist *d, float local, float *mean);
// SHA-256 of the parameters compared across ranks; *hex receives the first 16 hex digits.
GT_MUST_USE gt_err gt_train_dist_same_params(train_dist *d, gt_gpt2 *m, char hex[17]);
// Ends the job (MPI_Abort) after giving the other ranks up to 2 s to print their own errors.
void gt_train_dist_abort(int code);
void gt_train_dist_free(train_dist *d);

// ---- train --agreement A --distributed (train_dist_agreement.c) -----------------------------
// A rank of collaborative training across ranks (docs/collaboration.md "Across ranks").
typedef struct {
    train_dist d;
    gt_collab_ranks ranks;  // what orchestr/ calls: the ring's admission and sums, allgather
    char state_dir[4200];   // DIR/rank<r>
    char socket[4200];      // --device-socket with "%r" replaced by the rank
    char name[160];         // NAME.rank<r>: the trainer each holder's ledger names
} train_dist_collab;

// MPI_Init, the agreement's trainer.ranks checked against the job, this rank's folder, socket
// and name (socket may be NULL).
GT_MUST_USE gt_err gt_train_dist_collab_init(train_dist_collab *t, int *argc, char ***argv,
                                             const char *agreement, const char *state_dir,
                                             const char *socket, const char *name);
// The end of a rank: on an error, the error with the rank and the job ended (MPI_Abort, does
// not return); else MPI_Finalize.
void gt_train_dist_collab_end(train_dist_collab *t, gt_err err);

#endif
