// gputravel train --distributed: what each rank adds to plain train (train_dist.h): the
// agreement that admits the ranks, the device per rank, the attested admission, the ring over
// the gradient buffer with the device endpoint, and the checks that the ranks stayed in step.
#include "train_dist.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RING_TIMEOUT_MS 30000

bool gt_train_dist_under_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
           getenv("PMI_RANK") != NULL;
}

gt_err gt_train_dist_init(train_dist *d, const char *agreement_path)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->nranks);
    GT_ENSURE(d->nranks >= 2, GT_E_ARG, "--distributed needs at least 2 ranks (mpirun -np 2)");
    d->agreement = calloc(1, sizeof *d->agreement);
    GT_ENSURE(d->agreement != NULL, GT_E_NOMEM, "out of memory");
    GT_TRY(gt_err_wrap(gt_agreement_load(d->agreement, agreement_path), "agreement %s",
                       agreement_path));
    GT_ENSURE(d->agreement->ranks == (uint32_t)d->nranks, GT_E_ARG,
              "agreement %s: trainer.ranks is %u, but mpirun started %d ranks", agreement_path,
              d->agreement->ranks, d->nranks);
    // Every rank says who it is (a killed rank can then be named, and its process found).
    fprintf(stderr, "gputravel train: rank %d of %d, pid %ld\n", d->rank, d->nranks,
            (long)getpid());
    return GT_OK;
}

gt_err gt_train_dist_rank_path(char *out, size_t cap, const char *socket, int rank)
{
    size_t n = 0;
    for (const char *p = socket; *p != '\0'; p++) {
        int w = p[0] == '%' && p[1] == 'r' ? snprintf(out + n, cap - n, "%d", rank)
                                           : snprintf(out + n, cap - n, "%c", *p);
        GT_ENSURE(w > 0 && (size_t)w < cap - n, GT_E_LIMIT, "--device-socket too long");
        n += (size_t)w;
        p += p[0] == '%' && p[1] == 'r';
    }
    return GT_OK;
}

gt_err gt_train_dist_open_device(train_dist *d, gt_device_config *dc, const char *socket,
                                 gt_device **dev)
{
    const gt_agreement *a = d->agreement;
    char path[4096] = "";
    if (dc->kind == GT_DEVICE_SIM) {
        GT_TRY(gt_train_dist_rank_path(path, sizeof path, socket, d->rank));
        dc->socket_path = path;
        gt_device_sim_options opt;
        memset(&opt, 0, sizeof opt);
        memcpy(opt.agreement_hash, a->hash, GT_SHA256_BYTES);  // devd binds its session to it
        GT_TRY(gt_device_open_sim(dev, dc, &opt));
    } else {
        GT_ENSURE(dc->kind == GT_DEVICE_CPU, GT_E_UNSUPPORTED,
                  "--distributed runs on --device cpu or sim (cuda peers are not done yet)");
        GT_TRY(gt_device_open(dev, dc));
    }
    dc->socket_path = NULL;  // path is this function's
    gt_device_outputs o;
    gt_agreement_device_outputs(a, &o);
    return gt_err_wrap(gt_device_declare_outputs(*dev, &o, (gt_span){a->doc, a->doc_len}),
                       "declaring the agreement's outputs");
}

gt_err gt_train_dist_start(train_dist *d, gt_device *dev, gt_dbuf grads)
{
    gt_ring_device_opts eo = {.timeout_ms = RING_TIMEOUT_MS};
    GT_TRY(gt_ring_device_admit(&d->ep, dev, MPI_COMM_WORLD, &eo));
    gt_ring_device_set_buffer(d->ep, grads);
    d->grads = grads;
    uint8_t run[16];
    gt_ring_device_run_id(d->ep, run);
    gt_ring_opts ro = {.bucket_bytes = 4u << 20, .window = 2, .timeout_ms = RING_TIMEOUT_MS};
    return gt_ring_new(&d->ring, MPI_COMM_WORLD, run, &ro);
}

gt_err gt_train_dist_allreduce(train_dist *d, uint64_t n, uint64_t step)
{
    double t0 = gt_now_seconds();
    gt_ring_device_set_buffer(d->ep, d->grads);
    gt_ring_endpoint ep = gt_ring_device_endpoint(d->ep);
    gt_err err = gt_ring_allreduce(d->ring, &ep, n, step);
    d->ring_s += gt_now_seconds() - t0;
    return gt_err_wrap(err, "gradient all-reduce of step %llu", (unsigned long long)step + 1);
}

gt_err gt_train_dist_zero_start(train_dist *d, gt_gpt2 *m)
{
    d->zero = true;
    d->model = m;
    d->nparams = gt_gpt2_num_params(m);
    gt_ring_shard(d->nparams, (uint32_t)d->nranks, (uint32_t)d->rank, &d->shard_off,
                  &d->shard_len);
    GT_TRY(gt_gpt2_zero_shard(m, d->shard_off, d->shard_len, (uint32_t)d->rank,
                              (uint32_t)d->nranks));
    gt_log_info("train: rank %d of %d: ZeRO-1, parameters [%llu, +%llu) of %llu, AdamW state "
                "%llu bytes on this device (replicated: %llu)", d->rank, d->nranks,
                (unsigned long long)d->shard_off, (unsigned long long)d->shard_len,
                (unsigned long long)d->nparams, (unsigned long long)d->shard_len * 8,
                (unsigned long long)d->nparams * 8);
    return GT_OK;
}

// One collective of the ring over buf, timed.
static gt_err ring_run(train_dist *d, gt_dbuf buf, uint64_t n, uint64_t step, uint32_t phase)
{
    double t0 = gt_now_seconds();
    gt_ring_device_set_buffer(d->ep, buf);
    gt_ring_endpoint ep = gt_ring_device_endpoint(d->ep);
    gt_err err = phase == GT_RING_PHASE_REDUCE_SCATTER ? gt_ring_reduce_scatter(d->ring, &ep, n, step)
                 : phase == GT_RING_PHASE_ALLGATHER    ? gt_ring_allgather(d->ring, &ep, n, step)
                                                       : gt_ring_allreduce(d->ring, &ep, n, step);
    d->ring_s += gt_now_seconds() - t0;
    return err;
}

gt_err gt_train_dist_sum_grads(train_dist *d, gt_gpt2 *m, uint64_t step, bool need_norm)
{
    if (!d->zero) {
        return gt_train_dist_allreduce(d, gt_gpt2_num_params(m), step);
    }
    GT_TRY(gt_err_wrap(ring_run(d, d->grads, d->nparams, step, GT_RING_PHASE_REDUCE_SCATTER),
                       "gradient reduce-scatter of step %llu", (unsigned long long)step + 1));
    if (!need_norm) {
        return GT_OK;
    }
    gt_dbuf partials = 0;
    GT_TRY(gt_gpt2_zero_partial(m, &partials));
    // nranks f64 partials are 2 floats each: shard r of 2N floats is exactly rank r's partial,
    // and the all-gather copies bits (it never adds), so every device gets every partial as is.
    return gt_err_wrap(ring_run(d, partials, 2 * (uint64_t)d->nranks, step,
                                GT_RING_PHASE_ALLGATHER),
                       "all-gather of the partial sums of squares of step %llu",
                       (unsigned long long)step + 1);
}

gt_err gt_train_dist_after_update(train_dist *d, uint64_t step)
{
    if (!d->zero) {
        return GT_OK;
    }
    gt_gpt2_state_bufs sb;
    GT_TRY(gt_gpt2_state_bufs_get(d->model, false, &sb));
    return gt_err_wrap(ring_run(d, sb.params, d->nparams, step, GT_RING_PHASE_ALLGATHER),
                       "parameter all-gather of step %llu", (unsigned long long)step + 1);
}

gt_err gt_train_dist_mean(train_dist *d, float local, float *mean)
{
    double mine = local, sum = 0.0;
    int rc = MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "MPI_Allreduce of the released losses failed (%d)",
              rc);
    *mean = (float)(sum / d->nranks);
    return GT_OK;
}

gt_err gt_train_dist_same_params(train_dist *d, gt_gpt2 *m, char hex[17])
{
    size_t n = gt_gpt2_num_params(m);
    float *p = malloc(n * sizeof *p);
    uint8_t mine[GT_SHA256_BYTES], *all = calloc((size_t)d->nranks, GT_SHA256_BYTES);
    gt_err err = p && all ? gt_gpt2_params_read(m, p, n) : gt_errf(GT_E_NOMEM, "out of memory");
    if (gt_is_ok(err)) {
        err = gt_hash(GT_HASH_SHA256, mine, p, n * sizeof *p);
    }
    if (gt_is_ok(err) && MPI_Allgather(mine, GT_SHA256_BYTES, MPI_BYTE, all, GT_SHA256_BYTES,
                                       MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) {
        err = gt_errf(GT_E_PEER, "MPI_Allgather of the parameter hashes failed");
    }
    for (int r = 1; r < d->nranks && gt_is_ok(err); r++) {
        if (memcmp(all + (size_t)r * GT_SHA256_BYTES, all, GT_SHA256_BYTES) != 0) {
            err = gt_errf(GT_E_STATE, "rank %d's parameters differ from rank 0's", r);
        }
    }
    if (gt_is_ok(err)) {
        gt_hex_encode(hex, 17, mine, 8);
    }
    free(p);
    free(all);
    return err;
}

void gt_train_dist_abort(int code)
{
    // Most failures are every rank's (a refused hello, a rejected chunk: the ring votes), and
    // each rank prints its own; a short barrier lets them all say why before the first abort
    // ends the job. A dead or wedged rank never joins it: the wait is bounded.
    MPI_Request req;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS) {
        double deadline = gt_now_seconds() + 2.0;
        int done = 0;
        while (!done && gt_now_seconds() < deadline &&
               MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS) {
            sched_yield();
        }
    }
    MPI_Abort(MPI_COMM_WORLD, code);
}

void gt_train_dist_free(train_dist *d)
{
    gt_ring_free(d->ring);
    gt_ring_device_free(d->ep);
    free(d->agreement);
    memset(d, 0, sizeof *d);
}
