// gputravel bench allreduce: the encrypted ring all-reduce (collective layer, host endpoint) against
// Open MPI's own MPI_Allreduce on the same bytes, paired run by run, under mpirun.
#include "cli.h"

#include <gputravel/collective.h>

#include "bench_world.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CMD "bench allreduce"
#define MAX_SIZES 16
#define MAX_RUNS 50

void gt_cmd_bench_allreduce_usage(void)
{
    printf("usage: mpirun -np N gputravel bench allreduce [--sizes LIST] [--max-size SIZE]\n"
           "                                              [--runs R] [--bucket SIZE]\n"
           "                                              [--window W] [--link TEXT]\n"
           "                                              [--out DIR]\n"
           "\n"
           "Must be started under mpirun (Open MPI), N >= 2 ranks. Times, side by side in one\n"
           "run, the sum of the same floats over all ranks by\n"
           "  plain      Open MPI's MPI_Allreduce (no encryption: MPI traffic is plaintext)\n"
           "  encrypted  the ring all-reduce of the collective layer: reduce-scatter + all-gather over\n"
           "             MPI point-to-point, every hop an AES-256-GCM sealed chunk (host\n"
           "             endpoint; keys from an X25519 exchange, admission INSECURE SIMULATION)\n"
           "each run pairs one of each (plain first), and prints per size the median time of\n"
           "each (the slowest rank's), the median of the paired ratios encrypted/plain and their\n"
           "range. Paired ratios, because a shared machine's load changes between runs.\n"
           "On one machine over loopback, e.g.\n"
           "  mpirun --oversubscribe -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo \\\n"
           "         gputravel bench allreduce --max-size 256M\n"
           "Across network namespaces joined by shaped veth links (one emulated host per rank):\n"
           "  scripts/netns_mpirun.sh run --rate 10gbit 2 -- gputravel bench allreduce\n"
           "\n"
           "  --sizes LIST     buffer sizes per rank (default 1M,4M,16M,64M,128M,256M,512M)\n"
           "  --max-size SIZE  leave out the sizes above SIZE\n"
           "  --runs R         pairs per size (default 3)\n"
           "  --bucket SIZE    the ring's pipeline bucket, like NCCL_BUFFSIZE (default 4M)\n"
           "  --window W       buckets in flight (default 2)\n"
           "  --link TEXT      what connects the ranks, for the table and plots (default:\n"
           "                   $GT_NETNS_LINK, which netns_mpirun.sh sets, else \"not named\")\n"
           "  --out DIR        where the table and plots go (default: a new folder under /tmp)\n");
}

typedef struct {
    uint64_t sizes[MAX_SIZES];
    int nsizes, runs;
    gt_ring_opts ring;
    const char *out, *link;
} options;

static gt_err parse_sizes(options *o, const char *list)
{
    char buf[512];
    GT_ENSURE(strlen(list) < sizeof buf, GT_E_ARG, "--sizes: too long");
    strcpy(buf, list);
    o->nsizes = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        GT_ENSURE(o->nsizes < MAX_SIZES, GT_E_ARG, "--sizes: at most %d", MAX_SIZES);
        uint64_t v = 0;
        GT_TRY(gt_parse_size(t, &v));
        GT_ENSURE(v >= 4096 && v % sizeof(float) == 0, GT_E_ARG,
                  "--sizes '%s': at least 4K, a whole number of floats", t);
        o->sizes[o->nsizes++] = v;
    }
    GT_ENSURE(o->nsizes > 0, GT_E_ARG, "--sizes: empty");
    return GT_OK;
}

static gt_err parse_flags(int argc, char **argv, options *o)
{
    static const struct option longs[] = {
        {"sizes", required_argument, NULL, 's'}, {"max-size", required_argument, NULL, 'm'},
        {"runs", required_argument, NULL, 'r'},  {"bucket", required_argument, NULL, 'b'},
        {"window", required_argument, NULL, 'w'}, {"out", required_argument, NULL, 'o'},
        {"link", required_argument, NULL, 'l'},   {NULL, 0, NULL, 0}};
    uint64_t max = UINT64_MAX;
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        uint32_t u = 0;
        switch (c) {
        case 's': GT_TRY(parse_sizes(o, optarg)); break;
        case 'm': GT_TRY(gt_parse_size(optarg, &max)); break;
        case 'r': GT_TRY(gt_cli_parse_int("--runs", optarg, 1, MAX_RUNS, &o->runs)); break;
        case 'b': GT_TRY(gt_parse_size(optarg, &o->ring.bucket_bytes)); break;
        case 'w': GT_TRY(gt_cli_parse_u32("--window", optarg, 1, 64, &u)); o->ring.window = u; break;
        case 'o': o->out = optarg; break;
        case 'l': o->link = optarg; break;
        default: return gt_errf(GT_E_ARG, "unknown option (see --help)");
        }
    }
    GT_ENSURE(optind == argc, GT_E_ARG, "unexpected argument '%s'", argv[optind]);
    int kept = 0;
    for (int i = 0; i < o->nsizes; i++) {
        if (o->sizes[i] <= max) {
            o->sizes[kept++] = o->sizes[i];
        }
    }
    o->nsizes = kept;
    GT_ENSURE(kept > 0, GT_E_ARG, "--max-size leaves no size");
    return GT_OK;
}

// ---- timing ---------------------------------------------------------------------------------

typedef struct {
    double plain[MAX_RUNS], enc[MAX_RUNS], ratio[MAX_RUNS];
} size_result;

// Seconds of the slowest rank for one call, all ranks started together.
static double slowest(double mine)
{
    double worst = 0;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static gt_err time_pair(gt_ring *ring, const gt_ring_endpoint *ep, float *data, uint64_t n,
                        uint64_t step, double *plain, double *enc)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = gt_now_seconds();
    int rc = MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    *plain = slowest(gt_now_seconds() - t0);
    GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "MPI_Allreduce failed (%d)", rc);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = gt_now_seconds();
    gt_err e = gt_ring_allreduce(ring, ep, n, step);
    *enc = slowest(gt_now_seconds() - t0);
    return e;
}

static gt_err bench_size(const options *o, gt_ring_host *host, gt_ring *ring, uint64_t bytes,
                         uint64_t *step, size_result *res)
{
    uint64_t n = bytes / sizeof(float);
    GT_ENSURE(n <= INT32_MAX, GT_E_ARG, "size %llu: too many floats for MPI_Allreduce's int",
              (unsigned long long)bytes);
    float *data = malloc(n * sizeof(float));
    GT_ENSURE(data != NULL, GT_E_NOMEM, "out of memory for %llu bytes",
              (unsigned long long)bytes);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (uint64_t i = 0; i < n; i++) {
        data[i] = (float)((i * 2654435761u + (uint64_t)rank) % 1000) / 1000.0f;
    }
    gt_ring_host_set_buffer(host, data, n);
    gt_ring_endpoint ep = gt_ring_host_endpoint(host);
    gt_err err = GT_OK;
    for (int i = 0; i < o->runs && gt_is_ok(err); i++) {
        err = time_pair(ring, &ep, data, n, (*step)++, &res->plain[i], &res->enc[i]);
        res->ratio[i] = res->enc[i] / res->plain[i];
    }
    gt_ring_host_set_buffer(host, NULL, 0);
    free(data);
    return err;
}

// ---- output ---------------------------------------------------------------------------------

static double median(const double *v, int n)
{
    double s[MAX_RUNS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void print_table(const options *o, const size_result *res, int nranks, FILE *f)
{
    fprintf(f, "encrypted ring all-reduce vs MPI_Allreduce, %d ranks, bucket %llu KiB, window "
               "%u, %d paired runs (median; ratio = median of encrypted/plain per pair)\n"
               "link: %s\n",
            nranks, (unsigned long long)(o->ring.bucket_bytes >> 10), o->ring.window, o->runs,
            o->link);
    fprintf(f, "%10s %12s %10s %12s %10s %8s %16s\n", "size", "plain s", "plain GB/s",
            "encrypted s", "enc GB/s", "ratio", "ratio min..max");
    for (int i = 0; i < o->nsizes; i++) {
        const size_result *r = &res[i];
        double p = median(r->plain, o->runs), e = median(r->enc, o->runs);
        double lo = r->ratio[0], hi = r->ratio[0];
        for (int k = 1; k < o->runs; k++) {
            lo = r->ratio[k] < lo ? r->ratio[k] : lo;
            hi = r->ratio[k] > hi ? r->ratio[k] : hi;
        }
        char sz[32];
        gt_format_size(sz, sizeof sz, o->sizes[i]);
        fprintf(f, "%10s %12.4f %10.2f %12.4f %10.2f %7.2fx %7.2f..%.2fx\n", sz, p,
                (double)o->sizes[i] / p / 1e9, e, (double)o->sizes[i] / e / 1e9,
                median(r->ratio, o->runs), lo, hi);
    }
}

static void plot(const options *o, const size_result *res, const char *dir, int nranks)
{
    double x[MAX_SIZES], yp[MAX_SIZES], ye[MAX_SIZES], yr[MAX_SIZES];
    for (int i = 0; i < o->nsizes; i++) {
        x[i] = (double)o->sizes[i] / (1 << 20);
        yp[i] = median(res[i].plain, o->runs);
        ye[i] = median(res[i].enc, o->runs);
        yr[i] = median(res[i].ratio, o->runs);
    }
    char title[256], png[1200];
    snprintf(title, sizeof title, "all-reduce, %d ranks, %.60s (seconds, lower is better)",
             nranks, o->link);
    gt_plot_series s[2] = {{"MPI_Allreduce (plain)", x, yp, (size_t)o->nsizes},
                           {"encrypted ring", x, ye, (size_t)o->nsizes}};
    gt_plot_style st = {.title = title, .xlabel = "MiB per rank", .ylabel = "seconds",
                        .log_y = true, .points = true};
    snprintf(png, sizeof png, "%s/allreduce-np%d.png", dir, nranks);
    gt_err e = gt_plot_lines(png, &st, s, 2);
    printf(gt_is_ok(e) ? "plot: %s\n" : "(no plot: %s)\n", gt_is_ok(e) ? png : e.msg);
    gt_plot_series r = {"encrypted / plain (median of pairs)", x, yr, (size_t)o->nsizes};
    snprintf(title, sizeof title, "encrypted / plain, %d ranks, %.60s", nranks,
             o->link);
    st = (gt_plot_style){.title = title, .xlabel = "MiB per rank",
                         .ylabel = "ratio", .points = true};
    snprintf(png, sizeof png, "%s/allreduce-ratio-np%d.png", dir, nranks);
    e = gt_plot_lines(png, &st, &r, 1);
    printf(gt_is_ok(e) ? "plot: %s\n" : "(no plot: %s)\n", gt_is_ok(e) ? png : e.msg);
}

static gt_err report(const options *o, const size_result *res, int nranks)
{
    char dir[1024];
    GT_TRY(gt_cli_bench_dir(dir, sizeof dir, o->out, "allreduce"));
    print_table(o, res, nranks, stdout);
    char path[1100];
    snprintf(path, sizeof path, "%s/allreduce-np%d.txt", dir, nranks);
    FILE *f = fopen(path, "w");
    GT_ENSURE(f != NULL, GT_E_IO, "%s: cannot write", path);
    print_table(o, res, nranks, f);
    fclose(f);
    printf("table: %s\n", path);
    plot(o, res, dir, nranks);
    return GT_OK;
}

// ---- the command ----------------------------------------------------------------------------

static gt_err run(const options *o, int rank, int nranks, size_result *res)
{
    gt_ring_host *host = NULL;
    gt_ring *ring = NULL;
    GT_TRY(gt_ring_host_admit(&host, MPI_COMM_WORLD, o->ring.timeout_ms));
    uint8_t run_id[16];
    gt_ring_host_run_id(host, run_id);
    gt_err err = gt_ring_new(&ring, MPI_COMM_WORLD, run_id, &o->ring);
    uint64_t step = 0;
    if (gt_is_ok(err)) {  // warm-up: first-touch of MPI's and the ring's buffers, not timed
        size_result warm;
        options w = *o;
        w.runs = 1;
        err = bench_size(&w, host, ring, 4u << 20, &step, &warm);
    }
    for (int i = 0; i < o->nsizes && gt_is_ok(err); i++) {
        err = bench_size(o, host, ring, o->sizes[i], &step, &res[i]);
        if (rank == 0 && gt_is_ok(err) && !gt_cli.quiet) {
            fprintf(stderr, "  %llu bytes done\n", (unsigned long long)o->sizes[i]);
        }
    }
    gt_ring_free(ring);
    gt_ring_host_free(host);
    if (gt_is_ok(err) && rank == 0) {
        err = report(o, res, nranks);
    }
    return err;
}

static bool under_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
           getenv("PMI_RANK") != NULL;
}

int gt_cmd_bench_allreduce(int argc, char **argv)
{
    options o = {.runs = 3, .ring = {.bucket_bytes = 4u << 20, .window = 2, .timeout_ms = 60000}};
    gt_err err = parse_sizes(&o, "1M,4M,16M,64M,128M,256M,512M");
    if (gt_is_ok(err)) {
        err = parse_flags(argc, argv, &o);
    }
    if (!gt_is_ok(err)) {
        return gt_cli_usage(CMD, "%s", err.msg);
    }
    if (o.link == NULL) {
        o.link = getenv("GT_NETNS_LINK") != NULL ? getenv("GT_NETNS_LINK") : "not named (--link)";
    }
    if (!under_mpirun()) {
        return gt_cli_usage(CMD, "must be started under mpirun, e.g. mpirun -np 2 gputravel "
                                 "bench allreduce (see --help)");
    }
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!gt_cli.verbose) {
        gt_log_set_level(rank == 0 ? GT_LOG_INFO : GT_LOG_WARN);  // rank 0 says: simulation
    }
    size_result *res = calloc(MAX_SIZES, sizeof *res);
    err = nranks >= 2 ? GT_OK : gt_errf(GT_E_ARG, "needs at least 2 ranks (mpirun -np 2)");
    if (gt_is_ok(err)) {
        err = res != NULL ? run(&o, rank, nranks, res) : gt_errf(GT_E_NOMEM, "out of memory");
    }
    free(res);
    if (!gt_is_ok(err)) {
        fprintf(stderr, "gputravel %s: rank %d of %d: error: %s\n", CMD, rank, nranks, err.msg);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, GT_EXIT_FAIL);  // ends every rank: none waits on this one
    }
    MPI_Finalize();
    return GT_EXIT_OK;
}
