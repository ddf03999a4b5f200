// gputravel bench dtrain: the data-parallel training step, under mpirun, three ways side by side:
// the gradients summed by the devices over the encrypted ring (replicated AdamW state), the same
// with ZeRO-1 (reduce-scatter, shard update, parameter all-gather), and an INSECURE plain
// baseline that copies the gradients out and sums them with Open MPI's MPI_Allreduce. Paired
// per round; the tables of several rank counts in one --out folder make the scaling table.
#include "cli.h"

#include <gputravel/collective.h>
#include <gputravel/train.h>

#include "bench_world.h"

#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "bench dtrain"
#define MAX_ROUNDS 200
#define MAX_NP 64

enum { M_PLAIN, M_ENC, M_ZERO, NMODES };
static const char *const mode_names[NMODES] = {"plain MPI_Allreduce (INSECURE baseline)",
                                               "encrypted ring, replicated AdamW",
                                               "encrypted ring, ZeRO-1"};

void gt_cmd_bench_dtrain_usage(void)
{
    printf("usage: mpirun -np N gputravel bench dtrain [--layers L] [--channels C] [--heads H]\n"
           "                     [--vocab V] [--batch B] [--seq T] [--rounds R] [--threads K]\n"
           "                     [--bucket SIZE] [--out DIR]\n"
           "\n"
           "Must be started under mpirun (Open MPI), N >= 1 ranks, each with its own cpu device\n"
           "and a random model of the given shape (default: L 4, C 128, H 4, V 64, B 4, T 64).\n"
           "Each round times one training step (forward, backward, gradient sum, AdamW with\n"
           "clipping at 1.0) three ways, in rotating order, each on its own copy of the model:\n"
           "  plain      the gradients copied out of the device and summed with MPI_Allreduce:\n"
           "             INSECURE, plaintext gradients on the host and on the wire; a baseline\n"
           "             that exists only in this benchmark\n"
           "  encrypted  the devices sum them over the encrypted ring (attested admission of\n"
           "             every rank's device; what train --distributed does)\n"
           "  zero1      the same with ZeRO-1 (train --distributed --zero 1)\n"
           "A step's time is its slowest rank's. Prints the median step time of each way, the\n"
           "median (and range) of the paired ratios to plain, and the AdamW bytes per device;\n"
           "writes DIR/dtrain-npN.txt. With results for other rank counts in DIR (run it again\n"
           "with -np 1, 2, 4 and the same --out), also DIR/dtrain.txt (step time and scaling\n"
           "efficiency T(1)/T(N) by ranks) and DIR/dtrain.png. With 1 rank there is nothing to\n"
           "sum: the three ways are the compute alone.\n"
           "\n"
           "  --rounds R   paired rounds, after one untimed warm-up round (default 10)\n"
           "  --threads K  the cpu device's threads (default 1)\n"
           "  --bucket SIZE  the ring's bucket (default 4M)\n"
           "  --out DIR    where the tables go (default: a new folder under /tmp)\n");
}

typedef struct {
    gt_gpt2_config cfg;
    int B, T, rounds, threads;
    uint64_t bucket;
    const char *out;
} options;

static gt_err parse_flags(int argc, char **argv, options *o)
{
    static const struct option longs[] = {
        {"layers", required_argument, NULL, 'L'}, {"channels", required_argument, NULL, 'C'},
        {"heads", required_argument, NULL, 'H'},  {"vocab", required_argument, NULL, 'V'},
        {"batch", required_argument, NULL, 'B'},  {"seq", required_argument, NULL, 'T'},
        {"rounds", required_argument, NULL, 'r'}, {"threads", required_argument, NULL, 'k'},
        {"bucket", required_argument, NULL, 'b'}, {"out", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'L': GT_TRY(gt_cli_parse_int("--layers", optarg, 1, 96, &o->cfg.num_layers)); break;
        case 'C': GT_TRY(gt_cli_parse_int("--channels", optarg, 1, 8192, &o->cfg.channels)); break;
        case 'H': GT_TRY(gt_cli_parse_int("--heads", optarg, 1, 128, &o->cfg.num_heads)); break;
        case 'V': GT_TRY(gt_cli_parse_int("--vocab", optarg, 2, 65536, &o->cfg.vocab_size)); break;
        case 'B': GT_TRY(gt_cli_parse_int("--batch", optarg, 1, 1024, &o->B)); break;
        case 'T': GT_TRY(gt_cli_parse_int("--seq", optarg, 1, 8192, &o->T)); break;
        case 'r': GT_TRY(gt_cli_parse_int("--rounds", optarg, 1, MAX_ROUNDS, &o->rounds)); break;
        case 'k': GT_TRY(gt_cli_parse_int("--threads", optarg, 1, 256, &o->threads)); break;
        case 'b': GT_TRY(gt_parse_size(optarg, &o->bucket)); break;
        case 'o': o->out = optarg; break;
        default: return gt_errf(GT_E_ARG, "unknown option (see --help)");
        }
    }
    GT_ENSURE(optind == argc, GT_E_ARG, "unexpected argument '%s'", argv[optind]);
    o->cfg.max_seq_len = o->T;
    o->cfg.padded_vocab_size = gt_gpt2_pad_vocab(o->cfg.vocab_size);
    return gt_gpt2_config_check(&o->cfg);
}

// ---- one way of training: its device, its model, its ring ---------------------------------

typedef struct {
    int mode, rank, nranks;
    gt_device *dev;
    gt_gpt2 *m;
    gt_dbuf inp, tgt, grads;
    gt_ring_device *ep;
    gt_ring *ring;
    float *host;  // plain: the gradients in the clear
    uint64_t n, step;
} lane;

// An agreement for nranks ranks that accepts this executable as trainer and device (sim).
static gt_err bench_agreement(gt_agreement *a, int nranks)
{
    uint8_t m[GT_MEASUREMENT_BYTES];
    GT_TRY(gt_sim_measure_exe(m, NULL));
    char hex[2 * GT_MEASUREMENT_BYTES + 1], doc[4096];
    gt_hex_encode(hex, sizeof hex, m, sizeof m);
    int n = snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"bench-dtrain\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":64,\"max_seq\":16,\"init_seed\":5},\"training\":{\"steps\":"
             "100,\"batch\":2,\"seq\":8,\"learning_rate\":0.001},\"holders\":[{\"name\":\"h0\","
             "\"identity_key\":\"11%062d\",\"endpoint\":\"127.0.0.1:1\",\"dataset_id\":\"%032d\","
             "\"token_budget\":100000,\"max_uses_per_chunk\":1}],\"trainer\":{"
             "\"accepted_measurements\":[\"%s\"],\"ranks\":%d},\"device\":{"
             "\"accepted_measurements\":[\"%s\"]},\"allow_simulation\":true,\"output\":{"
             "\"kind\":\"loss_only\"}}", 0, 0, hex, nranks, hex);
    GT_ENSURE(n > 0 && (size_t)n < sizeof doc, GT_E_LIMIT, "agreement too long");
    return gt_agreement_parse(a, (const uint8_t *)doc, (size_t)n);
}

static gt_err lane_open(lane *l, const options *o, int mode, const gt_agreement *a)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &l->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &l->nranks);
    l->mode = mode;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = o->threads};
    GT_TRY(gt_device_open(&l->dev, &dc));
    GT_TRY(gt_gpt2_create(&l->m, l->dev, &o->cfg));
    GT_TRY(gt_gpt2_init_random(l->m, 1234));
    l->n = gt_gpt2_num_params(l->m);
    size_t bt = (size_t)o->B * (size_t)o->T;
    int32_t *tok = malloc((bt + 1) * sizeof *tok);
    GT_ENSURE(tok != NULL, GT_E_NOMEM, "out of memory");
    for (size_t i = 0; i <= bt; i++) {  // this rank's own tokens
        tok[i] = (int32_t)((i * 2654435761u + (size_t)l->rank * 7919u) % (size_t)o->cfg.vocab_size);
    }
    gt_err err = gt_device_alloc(l->dev, bt * 4, 0, &l->inp);
    err = gt_is_ok(err) ? gt_device_alloc(l->dev, bt * 4, 0, &l->tgt) : err;
    err = gt_is_ok(err) ? gt_device_copy_in(l->dev, l->inp, 0, tok, bt * 4) : err;
    err = gt_is_ok(err) ? gt_device_copy_in(l->dev, l->tgt, 0, tok + 1, bt * 4) : err;
    free(tok);
    GT_TRY(err);
    if (l->nranks == 1) {
        return mode == M_ZERO ? gt_gpt2_zero_shard(l->m, 0, l->n, 0, 1) : GT_OK;
    }
    if (mode == M_PLAIN) {
        l->host = malloc(l->n * sizeof *l->host);
        GT_ENSURE(l->host != NULL && l->n <= INT32_MAX, GT_E_NOMEM, "out of memory");
        return GT_OK;
    }
    gt_device_outputs outs;
    gt_agreement_device_outputs(a, &outs);
    GT_TRY(gt_device_declare_outputs(l->dev, &outs, (gt_span){a->doc, a->doc_len}));
    gt_ring_device_opts eo = {.timeout_ms = 60000};
    GT_TRY(gt_ring_device_admit(&l->ep, l->dev, MPI_COMM_WORLD, &eo));
    uint8_t run[16];
    gt_ring_device_run_id(l->ep, run);
    gt_ring_opts ro = {.bucket_bytes = o->bucket, .window = 2, .timeout_ms = 60000};
    GT_TRY(gt_ring_new(&l->ring, MPI_COMM_WORLD, run, &ro));
    if (mode == M_ZERO) {
        uint64_t off = 0, len = 0;
        gt_ring_shard(l->n, (uint32_t)l->nranks, (uint32_t)l->rank, &off, &len);
        GT_TRY(gt_gpt2_zero_shard(l->m, off, len, (uint32_t)l->rank, (uint32_t)l->nranks));
    }
    return GT_OK;
}

static void lane_close(lane *l)
{
    gt_ring_free(l->ring);
    gt_ring_device_free(l->ep);
    gt_gpt2_free(l->m);
    gt_device_close(l->dev);
    free(l->host);
}

static gt_err ring_on(lane *l, gt_dbuf buf, uint64_t n, int phase)
{
    gt_ring_device_set_buffer(l->ep, buf);
    gt_ring_endpoint ep = gt_ring_device_endpoint(l->ep);
    return phase == GT_RING_PHASE_REDUCE_SCATTER ? gt_ring_reduce_scatter(l->ring, &ep, n, l->step)
           : phase == GT_RING_PHASE_ALLGATHER    ? gt_ring_allgather(l->ring, &ep, n, l->step)
                                                 : gt_ring_allreduce(l->ring, &ep, n, l->step);
}

// The gradients summed over the ranks, the lane's way.
static gt_err lane_sum(lane *l)
{
    if (l->mode == M_PLAIN) {  // INSECURE: the baseline's plaintext path
        GT_TRY(gt_device_copy_out(l->dev, l->host, l->grads, 0, l->n * 4));
        int rc = MPI_Allreduce(MPI_IN_PLACE, l->host, (int)l->n, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD);
        GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "MPI_Allreduce failed (%d)", rc);
        return gt_device_copy_in(l->dev, l->grads, 0, l->host, l->n * 4);
    }
    if (l->mode == M_ENC) {
        return ring_on(l, l->grads, l->n, GT_RING_PHASE_ALLREDUCE);
    }
    GT_TRY(ring_on(l, l->grads, l->n, GT_RING_PHASE_REDUCE_SCATTER));
    gt_dbuf partials = 0;
    GT_TRY(gt_gpt2_zero_partial(l->m, &partials));
    return ring_on(l, partials, 2 * (uint64_t)l->nranks, GT_RING_PHASE_ALLGATHER);
}

static gt_err lane_step(lane *l, const options *o)
{
    static const gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                 .weight_decay = 0.0f, .grad_clip = 1.0f};
    float loss = 0.0f;
    GT_TRY(gt_gpt2_zero_grad(l->m));
    GT_TRY(gt_gpt2_forward_backward(l->m, l->inp, l->tgt, o->B, o->T, 1.0f / (float)l->nranks,
                                    &loss));
    GT_TRY(gt_gpt2_grads_buf(l->m, &l->grads));
    if (l->nranks > 1) {
        GT_TRY(lane_sum(l));
    } else if (l->mode == M_ZERO) {
        gt_dbuf partials = 0;
        GT_TRY(gt_gpt2_zero_partial(l->m, &partials));
    }
    GT_TRY(gt_gpt2_update(l->m, &opt, 1e-4f, NULL));
    if (l->mode == M_ZERO && l->nranks > 1) {
        gt_gpt2_state_bufs sb;
        GT_TRY(gt_gpt2_state_bufs_get(l->m, false, &sb));
        GT_TRY(ring_on(l, sb.params, l->n, GT_RING_PHASE_ALLGATHER));
    }
    l->step++;
    return GT_OK;
}

// Seconds of the slowest rank for one step of the lane, all ranks started together.
static gt_err timed_step(lane *l, const options *o, double *s)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = gt_now_seconds();
    gt_err e = lane_step(l, o);
    double mine = gt_now_seconds() - t0;
    MPI_Allreduce(&mine, s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return e;
}

// ---- results --------------------------------------------------------------------------------

typedef struct {
    double t[NMODES][MAX_ROUNDS];
    double ratio[NMODES][MAX_ROUNDS];  // mode / plain, per round
    uint64_t nparams, state_rep, state_zero;  // AdamW bytes on this rank's device
} results;

static double median_of(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void range_of(const double *v, int n, double *lo, double *hi)
{
    *lo = *hi = v[0];
    for (int i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

static void print_table(const options *o, const results *r, int nranks, FILE *f)
{
    fprintf(f, "data-parallel step, %d ranks (cpu devices, %d thread%s each), L %d C %d H %d V %d, "
               "batch %d x seq %d per rank, %zu parameters, %d paired rounds\n", nranks,
            o->threads, o->threads == 1 ? "" : "s", o->cfg.num_layers, o->cfg.channels,
            o->cfg.num_heads, o->cfg.vocab_size, o->B, o->T, (size_t)r->nparams, o->rounds);
    fprintf(f, "%-42s %12s %10s %16s\n", "way", "step ms", "x plain", "x plain min..max");
    for (int k = 0; k < NMODES; k++) {
        double lo = 0, hi = 0;
        range_of(r->ratio[k], o->rounds, &lo, &hi);
        fprintf(f, "%-42s %12.2f %9.3fx %7.3f..%.3fx\n", mode_names[k],
                1e3 * median_of(r->t[k], o->rounds), median_of(r->ratio[k], o->rounds), lo, hi);
    }
    fprintf(f, "AdamW state on each device: replicated %llu bytes, ZeRO-1 %llu bytes (rank 0)\n",
            (unsigned long long)r->state_rep, (unsigned long long)r->state_zero);
    fprintf(f, "np %d plain_ms %.4f enc_ms %.4f zero_ms %.4f\n", nranks,
            1e3 * median_of(r->t[M_PLAIN], o->rounds), 1e3 * median_of(r->t[M_ENC], o->rounds),
            1e3 * median_of(r->t[M_ZERO], o->rounds));
}

// The "np N ..." lines of every dtrain-npN.txt in dir, by N.
static int read_rows(const char *dir, double rows[MAX_NP + 1][NMODES])
{
    int found = 0;
    for (int np = 1; np <= MAX_NP; np++) {
        char path[1200], line[512];
        snprintf(path, sizeof path, "%s/dtrain-np%d.txt", dir, np);
        FILE *f = fopen(path, "r");
        rows[np][0] = 0;
        while (f != NULL && fgets(line, sizeof line, f) != NULL) {
            int n = 0;
            if (sscanf(line, "np %d plain_ms %lf enc_ms %lf zero_ms %lf", &n, &rows[np][0],
                       &rows[np][1], &rows[np][2]) == 4 && n == np) {
                found++;
            }
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    return found;
}

static void scaling(const char *dir)
{
    static double rows[MAX_NP + 1][NMODES];
    if (read_rows(dir, rows) < 2) {
        return;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/dtrain.txt", dir);
    FILE *f = fopen(path, "w");
    double x[MAX_NP], y[NMODES][MAX_NP];
    size_t n = 0;
    for (FILE *out = stdout; out != NULL; out = out == stdout ? f : NULL) {
        fprintf(out, "step time by ranks (ms, median; efficiency = T(1 rank) / T(N), the same "
                     "per-rank batch)\n%6s %12s %12s %12s %10s %10s %10s\n", "ranks", "plain",
                "encrypted", "zero-1", "enc/plain", "eff enc", "eff plain");
        for (int np = 1; np <= MAX_NP; np++) {
            if (rows[np][0] <= 0) {
                continue;
            }
            double t1 = rows[1][0] > 0 ? rows[1][1] : 0;
            fprintf(out, "%6d %12.2f %12.2f %12.2f %9.3fx %10.2f %10.2f\n", np, rows[np][0],
                    rows[np][1], rows[np][2], rows[np][1] / rows[np][0],
                    t1 > 0 ? t1 / rows[np][1] : 0, t1 > 0 ? rows[1][0] / rows[np][0] : 0);
            if (out == stdout) {
                x[n] = np;
                for (int k = 0; k < NMODES; k++) {
                    y[k][n] = rows[np][k];
                }
                n++;
            }
        }
    }
    if (f != NULL) {
        fclose(f);
        printf("table: %s\n", path);
    }
    gt_plot_series s[NMODES];
    for (int k = 0; k < NMODES; k++) {
        s[k] = (gt_plot_series){mode_names[k], x, y[k], n};
    }
    gt_plot_style st = {.title = "data-parallel step time (ms; lower is better)",
                        .xlabel = "ranks", .ylabel = "ms per step", .points = true};
    snprintf(path, sizeof path, "%s/dtrain.png", dir);
    gt_err e = gt_plot_lines(path, &st, s, NMODES);
    printf(gt_is_ok(e) ? "plot: %s\n" : "(no plot: %s)\n", gt_is_ok(e) ? path : e.msg);
}

static gt_err report(const options *o, const results *r, int nranks)
{
    char dir[1024];
    GT_TRY(gt_cli_bench_dir(dir, sizeof dir, o->out, "dtrain"));
    print_table(o, r, nranks, stdout);
    char path[1100];
    snprintf(path, sizeof path, "%s/dtrain-np%d.txt", dir, nranks);
    FILE *f = fopen(path, "w");
    GT_ENSURE(f != NULL, GT_E_IO, "%s: cannot write", path);
    print_table(o, r, nranks, f);
    fclose(f);
    printf("table: %s\n", path);
    scaling(dir);
    return GT_OK;
}

// ---- the command ----------------------------------------------------------------------------

static gt_err bench(const options *o, lane *lanes, results *r)
{
    int rank = 0, nranks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    static gt_agreement a;
    GT_TRY(bench_agreement(&a, nranks));
    // Rank 0 first: the shared sim root's key is made on first use, and by one process only.
    gt_err e = GT_OK;
    if (rank == 0) {
        gt_pkey *root = NULL;
        e = gt_sim_root_open(&root, NULL, 0, NULL, true);
        gt_pkey_free(root);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    GT_TRY(e);
    for (int k = 0; k < NMODES; k++) {
        GT_TRY(lane_open(&lanes[k], o, k, &a));
    }
    for (int k = 0; k < NMODES; k++) {  // warm-up: first touch of every buffer, not timed
        GT_TRY(lane_step(&lanes[k], o));
    }
    for (int i = 0; i < o->rounds; i++) {
        for (int j = 0; j < NMODES; j++) {
            int k = (i + j) % NMODES;  // rotating order: no way always runs first
            GT_TRY(timed_step(&lanes[k], o, &r->t[k][i]));
        }
        for (int k = 0; k < NMODES; k++) {
            r->ratio[k][i] = r->t[k][i] / r->t[M_PLAIN][i];
        }
    }
    r->nparams = lanes[0].n;
    uint64_t off = 0, len = 0;
    gt_ring_shard(r->nparams, (uint32_t)nranks, (uint32_t)rank, &off, &len);
    r->state_rep = r->nparams * 8;
    r->state_zero = len * 8;
    return rank == 0 ? report(o, r, nranks) : GT_OK;
}

int gt_cmd_bench_dtrain(int argc, char **argv)
{
    options o = {.cfg = {.num_layers = 4, .channels = 128, .num_heads = 4, .vocab_size = 64},
                 .B = 4, .T = 64, .rounds = 10, .threads = 1, .bucket = 4u << 20};
    gt_err err = parse_flags(argc, argv, &o);
    if (!gt_is_ok(err)) {
        return gt_cli_usage(CMD, "%s", err.msg);
    }
    if (getenv("OMPI_COMM_WORLD_SIZE") == NULL && getenv("PMIX_RANK") == NULL &&
        getenv("PMI_RANK") == NULL) {
        return gt_cli_usage(CMD, "must be started under mpirun, e.g. mpirun -np 2 gputravel "
                                 "bench dtrain (see --help)");
    }
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!gt_cli.verbose) {
        gt_log_set_level(GT_LOG_WARN);
    }
    lane *lanes = calloc(NMODES, sizeof *lanes);
    results *r = calloc(1, sizeof *r);
    err = lanes && r ? bench(&o, lanes, r) : gt_errf(GT_E_NOMEM, "out of memory");
    for (int k = 0; lanes != NULL && k < NMODES; k++) {
        lane_close(&lanes[k]);
    }
    free(lanes);
    free(r);
    if (!gt_is_ok(err)) {
        fprintf(stderr, "gputravel %s: rank %d of %d: error: %s\n", CMD, rank, nranks, err.msg);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, GT_EXIT_FAIL);  // ends every rank: none waits on this one
    }
    MPI_Finalize();
    return GT_EXIT_OK;
}
