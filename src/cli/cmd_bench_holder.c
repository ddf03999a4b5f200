// gputravel bench holder: one holder agent under N concurrent attested trainers, with and
// without a slowloris and a connection flood running against it; grant and handshake latency
// percentiles, grants per second, and the holder process's threads and descriptors before and
// after.
#include "cli.h"

#include <gputravel/holder.h>
#include <gputravel/orchestr.h>

#include "bench_world.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CMD "bench holder"
#define MAX_LEVELS 8
#define MAX_TRAINERS 256
#define MAX_SAMPLES 200000  // grant latencies kept per scenario
#define ABUSE_ADDRESSES 8   // slowloris and flood sources: 127.0.0.2 .. 127.0.0.9

void gt_cmd_bench_holder_usage(void)
{
    printf("usage: gputravel bench holder [--trainers 1,4,16,64] [--seconds S] [--chunk BYTES]\n"
           "                              [--slowloris N] [--soak SECONDS] [--json] [--out DIR]\n"
           "\n"
           "Drives one holder agent with N concurrent attested trainers (each its own TLS\n"
           "session, simulated TEE evidence and cpu device), first alone, then while a slowloris\n"
           "(N connections trickling a TLS record a byte a second) and a connect/close flood run\n"
           "against it from other loopback addresses. Each trainer connects once (the handshake\n"
           "is timed) and then fetches chunks with key release for S seconds (each fetch, from\n"
           "FETCH to the chunk decrypted in its device, is one grant). Prints, per N and abuse,\n"
           "handshake and grant latency p50/p99, grants/s, and the abused/clean p99 ratio (the\n"
           "goal: <= 2); then the holder's threads and descriptors before and after, and whether\n"
           "the ledger verifies. All parties are simulated (insecure-simulation).\n"
           "\n"
           "  --trainers LIST  concurrent trainers per scenario (default 1,4,16,64)\n"
           "  --seconds S      fetching time per scenario (default 3)\n"
           "  --chunk BYTES    chunk size (default 64K)\n"
           "  --slowloris N    slow connections during abuse (default 64)\n"
           "  --soak SECONDS   afterwards, 16 trainers and the abuse for this long, with the\n"
           "                   thread and descriptor counts checked at the end (default 0: none)\n"
           "  --json           one JSON object per scenario on stdout\n"
           "  --out DIR        work folder and plot (default: a new folder under /tmp)\n");
}

typedef struct {
    int levels[MAX_LEVELS], nlevels;
    double seconds, soak;
    uint64_t chunk;
    int slowloris;
    bool json;
    const char *out;
} options;

typedef struct {
    int trainers;
    bool abuse;
    double hs_p50, hs_p99, grant_p50, grant_p99, grants_per_s;
    uint64_t grants, connect_retries;
} scenario;

// ---- trainers ---------------------------------------------------------------------------------

typedef struct {
    world *w;
    int id;
    double until;  // gt_now_seconds() at which to stop fetching
    double handshake;
    double *lat;  // this trainer's grant latencies
    size_t nlat, cap;
    uint64_t retries;
    gt_err err;
} trainer_arg;

// One trainer: connects (retrying while the holder turns it away at a limit), then fetches with
// key release until its time is up.
static void *trainer_main(void *p)
{
    trainer_arg *t = p;
    world *w = t->w;
    gt_tee_attestor att = {.collect = {.type = GT_TEE_SIM, .sim_root = w->sim_root},
                           .policy = w->policy, .roots = &w->root, .root_count = 1,
                           .agreement = &w->a, .peer_role = GT_PEER_HOLDER};
    gt_net_attestor na = gt_tee_attestor_bind(&att);
    uint8_t pub[GT_ED25519_PUBLIC_BYTES], sec[GT_ED25519_SECRET_BYTES];
    gt_device *dev = NULL;
    gt_holder_conn *c = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 1, .mem_limit = 16u << 20};
    t->err = gt_ed25519_keypair(pub, sec);
    gt_secure_zero(sec, sizeof sec);  // signs nothing here: no output
    if (gt_is_ok(t->err)) {
        t->err = gt_device_open(&dev, &dc);
    }
    char name[32];
    snprintf(name, sizeof name, "bench-trainer-%d", t->id);
    double t0 = gt_now_seconds();
    while (gt_is_ok(t->err)) {
        gt_err e = gt_holder_connect(&c, &w->a, 0, &na, name, pub);
        if (gt_is_ok(e)) {
            break;
        }
        if (gt_now_seconds() > t->until) {
            t->err = e;
            break;
        }
        t->retries++;
        usleep(20000);
    }
    t->handshake = gt_now_seconds() - t0;
    uint32_t chunks = c ? gt_holder_conn_manifest(c)->chunk_count : 0;
    for (uint32_t i = 0; gt_is_ok(t->err) && gt_now_seconds() < t->until; i++) {
        uint32_t chunk = (uint32_t)(t->id + i) % chunks;
        gt_dbuf buf = 0;
        uint64_t tokens = 0;
        double f0 = gt_now_seconds();
        t->err = gt_holder_fetch(c, chunk, GT_FETCH_KEYRELEASE, dev, GT_DBUF_NO_READBACK, &buf,
                                 &tokens);
        if (gt_is_ok(t->err) && t->nlat < t->cap) {
            t->lat[t->nlat++] = gt_now_seconds() - f0;
        }
        if (gt_is_ok(t->err)) {
            t->err = gt_device_free(dev, buf);
        }
        if (gt_is_ok(t->err)) {
            t->err = gt_holder_confirm_use(c, chunk, tokens);
        }
    }
    gt_holder_disconnect(c);
    gt_device_close(dev);
    return NULL;
}

// ---- abuse ------------------------------------------------------------------------------------

typedef struct {
    int port, slow;
    volatile int stop;
    uint64_t flood_connections, slow_connections;
    pthread_t slow_th, flood_th;
} abuse;

static int connect_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &a.sin_addr);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void abuse_source(char *out, size_t cap, uint64_t i)
{
    snprintf(out, cap, "127.0.0.%u", (unsigned)(2 + i % ABUSE_ADDRESSES));
}

// Keeps `slow` connections open, each sending a TLS record header and then a byte a second,
// reopening those the holder closes.
static void *slow_main(void *p)
{
    abuse *ab = p;
    int fds[MAX_TRAINERS];
    static const uint8_t record_header[] = {0x16, 0x03, 0x01, 0x02, 0x00};
    for (int i = 0; i < ab->slow; i++) {
        fds[i] = -1;
    }
    while (!ab->stop) {
        for (int i = 0; i < ab->slow && !ab->stop; i++) {
            uint8_t one = 0;
            if (fds[i] >= 0 && write(fds[i], &one, 1) != 1) {
                close(fds[i]);
                fds[i] = -1;
            }
            if (fds[i] < 0) {
                char src[32];
                abuse_source(src, sizeof src, (uint64_t)i);
                fds[i] = connect_from(src, ab->port);
                if (fds[i] >= 0 && write(fds[i], record_header, sizeof record_header) == 5) {
                    ab->slow_connections++;
                }
            }
        }
        for (int k = 0; k < 10 && !ab->stop; k++) {
            usleep(100000);
        }
    }
    for (int i = 0; i < ab->slow; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return NULL;
}

static void *flood_main(void *p)
{
    abuse *ab = p;
    while (!ab->stop) {
        char src[32];
        abuse_source(src, sizeof src, ab->flood_connections);
        int fd = connect_from(src, ab->port);
        if (fd >= 0) {
            close(fd);
            ab->flood_connections++;
        } else {
            usleep(1000);
        }
    }
    return NULL;
}

static void abuse_start(abuse *ab)
{
    ab->stop = 0;
    pthread_create(&ab->slow_th, NULL, slow_main, ab);
    pthread_create(&ab->flood_th, NULL, flood_main, ab);
}

static void abuse_stop(abuse *ab)
{
    ab->stop = 1;
    pthread_join(ab->slow_th, NULL);
    pthread_join(ab->flood_th, NULL);
}

// ---- scenarios --------------------------------------------------------------------------------

static double percentile(double *v, size_t n, double q)
{
    if (n == 0) {
        return 0;
    }
    qsort(v, n, sizeof *v, bench_cmp_double);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static gt_err run_scenario(world *w, const options *o, int n, bool with_abuse, double seconds,
                           scenario *out)
{
    memset(out, 0, sizeof *out);
    out->trainers = n;
    out->abuse = with_abuse;
    abuse ab = {.port = gt_listener_port(w->listener), .slow = o->slowloris};
    if (with_abuse) {
        abuse_start(&ab);
        usleep(300000);  // the slow connections are in place before the trainers come
    }
    trainer_arg *t = calloc((size_t)n, sizeof *t);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    size_t cap = MAX_SAMPLES / (size_t)n;
    double *lat = calloc((size_t)n * cap, sizeof *lat);
    double *hs = calloc((size_t)n, sizeof *hs);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, t && th && lat && hs, out, GT_E_NOMEM, "out of memory");
    double until = gt_now_seconds() + seconds;
    for (int i = 0; i < n; i++) {
        t[i] = (trainer_arg){.w = w, .id = i, .until = until, .lat = lat + (size_t)i * cap,
                             .cap = cap};
        pthread_create(&th[i], NULL, trainer_main, &t[i]);
    }
    size_t nlat = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (gt_is_ok(err) && !gt_is_ok(t[i].err)) {
            err = gt_err_wrap(t[i].err, "trainer %d", i);
        }
        memmove(lat + nlat, t[i].lat, t[i].nlat * sizeof *lat);
        nlat += t[i].nlat;
        hs[i] = t[i].handshake;
        out->connect_retries += t[i].retries;
    }
    out->grants = nlat;
    out->grants_per_s = (double)nlat / seconds;
    out->grant_p50 = percentile(lat, nlat, 0.50) * 1e3;
    out->grant_p99 = percentile(lat, nlat, 0.99) * 1e3;
    out->hs_p50 = percentile(hs, (size_t)n, 0.50) * 1e3;
    out->hs_p99 = percentile(hs, (size_t)n, 0.99) * 1e3;
out:
    if (with_abuse) {
        abuse_stop(&ab);
    }
    free(t);
    free(th);
    free(lat);
    free(hs);
    return err;
}

// Entries of /proc/self/<what> ("task": threads, "fd": descriptors; this one's own included).
static int proc_entries(const char *what)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/%s", what);
    DIR *d = opendir(path);
    if (d == NULL) {
        return -1;
    }
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

static void print_scenarios(const options *o, const scenario *sc, int nsc)
{
    if (o->json) {
        for (int i = 0; i < nsc; i++) {
            printf("{\"trainers\":%d,\"abuse\":%s,\"handshake_p50_ms\":%.3f,"
                   "\"handshake_p99_ms\":%.3f,\"grant_p50_ms\":%.3f,\"grant_p99_ms\":%.3f,"
                   "\"grants_per_s\":%.1f,\"grants\":%llu,\"connect_retries\":%llu}\n",
                   sc[i].trainers, sc[i].abuse ? "true" : "false", sc[i].hs_p50, sc[i].hs_p99,
                   sc[i].grant_p50, sc[i].grant_p99, sc[i].grants_per_s,
                   (unsigned long long)sc[i].grants, (unsigned long long)sc[i].connect_retries);
        }
        return;
    }
    printf("\none holder, %s chunks, %.0f s per scenario; abuse = %d slowloris connections + a "
           "connect/close flood from %d other addresses\n",
           "key-release", o->seconds, o->slowloris, ABUSE_ADDRESSES);
    printf("%8s %6s %14s %14s %12s %12s %10s %12s\n", "trainers", "abuse", "handshake p50",
           "handshake p99", "grant p50", "grant p99", "grants/s", "p99 abused/");
    printf("%8s %6s %14s %14s %12s %12s %10s %12s\n", "", "", "(ms)", "(ms)", "(ms)", "(ms)", "",
           "clean");
    for (int i = 0; i < nsc; i++) {
        char ratio[32] = "";
        if (sc[i].abuse && i > 0 && sc[i - 1].grant_p99 > 0) {
            snprintf(ratio, sizeof ratio, "%.2fx", sc[i].grant_p99 / sc[i - 1].grant_p99);
        }
        printf("%8d %6s %14.2f %14.2f %12.3f %12.3f %10.0f %12s\n", sc[i].trainers,
               sc[i].abuse ? "yes" : "no", sc[i].hs_p50, sc[i].hs_p99, sc[i].grant_p50,
               sc[i].grant_p99, sc[i].grants_per_s, ratio);
    }
}

static void plot_scenarios(const options *o, const scenario *sc, int nsc, const char *dir)
{
    char labels_buf[MAX_LEVELS][16];
    const char *labels[MAX_LEVELS];
    double values[2 * MAX_LEVELS];
    int ng = nsc / 2;
    for (int g = 0; g < ng; g++) {
        snprintf(labels_buf[g], sizeof labels_buf[g], "%d", sc[2 * g].trainers);
        labels[g] = labels_buf[g];
        values[g] = sc[2 * g].grant_p99;
        values[ng + g] = sc[2 * g + 1].grant_p99;
    }
    static const char *const series[] = {"no abuse", "slowloris + flood"};
    char png[2200];
    snprintf(png, sizeof png, "%s/holder-grant-p99.png", dir);
    gt_plot_style ps = {.title = "holder grant latency p99 (lower is better)",
                        .xlabel = "concurrent trainers", .ylabel = "milliseconds"};
    gt_err e = gt_plot_bars(png, &ps, labels, (size_t)ng, series, 2, values, NULL, NULL);
    if (!o->json) {
        printf(gt_is_ok(e) ? "plot: %s\n" : "(no plot: %s)\n", gt_is_ok(e) ? png : e.msg);
    }
}

// ---- the run ----------------------------------------------------------------------------------

static int parse(int argc, char **argv, options *o)
{
    static const struct option opts[] = {
        {"trainers", required_argument, NULL, 't'}, {"seconds", required_argument, NULL, 's'},
        {"chunk", required_argument, NULL, 'c'},    {"slowloris", required_argument, NULL, 'l'},
        {"soak", required_argument, NULL, 'k'},     {"json", no_argument, NULL, 'j'},
        {"out", required_argument, NULL, 'o'},      {0}};
    *o = (options){.levels = {1, 4, 16, 64}, .nlevels = 4, .seconds = 3, .chunk = 64u << 10,
                   .slowloris = 64};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 't':
            o->nlevels = 0;
            for (char *p = optarg; *p != '\0' && o->nlevels < MAX_LEVELS;) {
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > MAX_TRAINERS || (*end != ',' && *end != '\0')) {
                    return gt_cli_usage(CMD, "--trainers: numbers 1..%d, comma-separated",
                                        MAX_TRAINERS);
                }
                o->levels[o->nlevels++] = (int)v;
                p = *end == ',' ? end + 1 : end;
            }
            break;
        case 's':
        case 'k': {
            double v = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || v < (c == 's' ? 0.1 : 0) || v > 3600) {
                return gt_cli_usage(CMD, "--%s: seconds, up to 3600",
                                    c == 's' ? "seconds" : "soak");
            }
            *(c == 's' ? &o->seconds : &o->soak) = v;
            break;
        }
        case 'c':
            if (!gt_is_ok(gt_parse_size(optarg, &o->chunk)) || o->chunk < 64 ||
                o->chunk > (64u << 20)) {
                return gt_cli_usage(CMD, "--chunk: a size from 64 bytes to 64M");
            }
            break;
        case 'l': {
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || v < 0 || v > MAX_TRAINERS) {
                return gt_cli_usage(CMD, "--slowloris: 0..%d", MAX_TRAINERS);
            }
            o->slowloris = (int)v;
            break;
        }
        case 'j':
            o->json = true;
            break;
        case 'o':
            o->out = optarg;
            break;
        default:
            return gt_cli_usage(CMD, "unknown option");
        }
    }
    if (optind != argc) {
        return gt_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    }
    return GT_EXIT_OK;
}

static gt_err world_make(world *w, const options *o, const char *dir)
{
    GT_ENSURE(strlen(dir) < 1900, GT_E_LIMIT, "--out: path too long");
    snprintf(w->dir, sizeof w->dir, "%.1900s/holder", dir);
    snprintf(w->ds, sizeof w->ds, "%s/ds", w->dir);
    snprintf(w->keys, sizeof w->keys, "%s/keys", w->dir);
    snprintf(w->ledger, sizeof w->ledger, "%s/ledger.log", w->dir);
    snprintf(w->agreement, sizeof w->agreement, "%s/agreement.json", w->dir);
    snprintf(w->sim_root, sizeof w->sim_root, "%.1900s/sim-root", dir);
    snprintf(w->root_pub, sizeof w->root_pub, "%s/root-pub.pem", w->sim_root);
    GT_TRY(bench_scratch_fresh(w->dir, dir));
    GT_TRY(gt_cli_sim_root_use(w->sim_root));
    gt_pkey *root = NULL;
    GT_TRY(gt_sim_root_open(&root, NULL, 0, w->sim_root, true));
    gt_pkey_free(root);
    GT_TRY(bench_world_listen(w, "127.0.0.1", -1));
    GT_TRY(bench_world_dataset(w, 16 * o->chunk, o->chunk));  // 16 chunks
    static const char policy[] = "{\"allow_simulation\":true,\"allow_debug\":false}";
    GT_TRY(gt_policy_parse(&w->policy, policy, sizeof policy - 1));
    GT_TRY(gt_file_read_all(w->root_pub, 1 << 16, &w->root_bytes));
    w->root = (gt_attest_file){w->root_pub, gt_buf_span(&w->root_bytes)};
    // The legitimate trainers all come from 127.0.0.1: its per-address handshake limit must hold
    // the largest level connecting at once (the abuse comes from other addresses).
    int most = 1;
    for (int i = 0; i < o->nlevels; i++) {
        most = o->levels[i] > most ? o->levels[i] : most;
    }
    gt_holder_agent_config limits = {.max_handshakes = (unsigned)(most + 32),
                                     .max_handshakes_per_address = (unsigned)most};
    return bench_world_start(w, &limits);
}

static gt_err run(const options *o, char *dir, size_t dir_cap)
{
    GT_TRY(gt_cli_bench_dir(dir, dir_cap, o->out, "holder"));
    world *w = calloc(1, sizeof *w);
    GT_ENSURE(w != NULL, GT_E_NOMEM, "out of memory");
    scenario sc[2 * MAX_LEVELS];
    int nsc = 0;
    gt_err err = world_make(w, o, dir);
    usleep(200000);
    int threads0 = proc_entries("task"), fds0 = proc_entries("fd");
    for (int i = 0; i < o->nlevels && gt_is_ok(err); i++) {
        for (int abused = 0; abused < 2 && gt_is_ok(err); abused++) {
            if (!o->json) {
                fprintf(stderr, "bench holder: %d trainer(s)%s...\n", o->levels[i],
                        abused ? " under abuse" : "");
            }
            err = run_scenario(w, o, o->levels[i], abused, o->seconds, &sc[nsc]);
            nsc += gt_is_ok(err);
        }
    }
    scenario soak = {0};
    if (gt_is_ok(err) && o->soak > 0) {
        if (!o->json) {
            fprintf(stderr, "bench holder: soak, 16 trainers under abuse for %.0f s...\n",
                    o->soak);
        }
        err = run_scenario(w, o, 16, true, o->soak, &soak);
    }
    // Every connection of the attack has met its handshake deadline (10 s) once this is over.
    if (gt_is_ok(err)) {
        sleep(11);
    }
    int threads1 = proc_entries("task"), fds1 = proc_entries("fd");
    gt_holder_agent_stats st = {0};
    if (w->agent != NULL) {
        gt_holder_agent_get_stats(w->agent, &st);
    }
    bench_world_stop(w);
    gt_ledger_summary sum = {0};
    gt_err verified = gt_ledger_verify_file(w->ledger, w->k.holder_pub, NULL, &sum);
    if (gt_is_ok(err)) {
        print_scenarios(o, sc, nsc);
        if (o->soak > 0) {
            print_scenarios(o, &soak, 1);
        }
        plot_scenarios(o, sc, nsc, dir);
        printf("%sholder process: threads %d -> %d, descriptors %d -> %d; %llu grants, %llu "
               "connections refused before attesting; ledger: %llu entries, %s%s\n",
               o->json ? "# " : "\n", threads0, threads1, fds0, fds1,
               (unsigned long long)st.grants, (unsigned long long)st.handshake_failures,
               (unsigned long long)sum.entries, gt_is_ok(verified) ? "verifies" : verified.msg,
               o->json ? "" : "\n(all parties simulated: insecure-simulation)");
    }
    gt_policy_free(w->policy);
    gt_buf_free_nowipe(&w->root_bytes);
    gt_holder_keys_wipe(&w->k);
    free(w);
    return gt_is_ok(err) ? verified : err;
}

int gt_cmd_bench_holder(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    signal(SIGPIPE, SIG_IGN);
    if (!gt_cli.verbose) {
        gt_log_set_level(GT_LOG_ERROR);
    }
    char dir[2048];
    gt_err err = run(&o, dir, sizeof dir);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail(CMD, err);
}
