// gputravel bench transfer: conventional transmission against GPU travelling, side by side, over
// loopback and over a shaped link between two network namespaces.
#include "cli.h"

#include <gputravel/holder.h>
#include <gputravel/orchestr.h>

#include "bench_world.h"
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define CMD "bench"
#define MAX_SIZES 8
#define MAX_RUNS 50
#define PATHS 6  // conventional, conventional-keyrelease, travel, decryption passes, TLS push
#define TLS_PUSH 4
#define DECRYPT_2CORE 5

static const char *const path_names[PATHS] = {"conventional", "conventional-keyrelease", "travel",
                                              "decrypt-pass", "tls-push", "decrypt-2core"};

static void usage(void)
{
    printf("usage: gputravel bench transfer [--sizes 64M,128M,256M,512M] [--link 10gbit]\n"
           "                                [--runs N] [--json] [--out DIR] [--no-link]\n"
           "       gputravel bench holder --help   (one holder under load and abuse)\n"
           "       gputravel bench allreduce --help   (encrypted ring vs MPI_Allreduce, mpirun)\n"
           "       gputravel bench dtrain --help      (data-parallel step: encrypted vs plain, mpirun)\n"
           "\n"
           "Times how a holder's sealed chunk reaches the device's protected memory, every path\n"
           "side by side in one run (median, min, max of N runs):\n"
           "  conventional             holder decrypts, TLS carries plaintext, the trainer copies\n"
           "                           it into the device (encrypted bounce buffers)\n"
           "  conventional-keyrelease  the sealed chunk crosses TLS, its key is released to the\n"
           "                           trainer's TEE, which decrypts once and copies it in\n"
           "  travel                   the device is lent to the holder, who loads the sealed\n"
           "                           chunk unchanged and releases only its key to the device\n"
           "  decrypt-pass             one AES-256-GCM decryption of the same bytes on one core\n"
           "                           (reference)\n"
           "  decrypt-2core            the same chunk opened on two threads (GTCHUNK2: its\n"
           "                           segments split in two; GTCHUNK1 cannot split: one core)\n"
           "  tls-push                 the peer a user would pick instead: the chunk file's\n"
           "                           bytes pushed over one TLS 1.3 connection, received into\n"
           "                           a reused buffer (no parsing, no device; reference)\n"
           "First over loopback, then (as root, unless --no-link) between two network namespaces\n"
           "joined by a veth pair shaped with tc to --link (set up and torn down here). The\n"
           "trainer, holder and device are simulated (insecure-simulation evidence).\n"
           "\n"
           "  --sizes LIST   chunk sizes (default 64M,128M,256M,512M)\n"
           "  --link RATE    shaped link rate, e.g. 10gbit, 1gbit, 500mbit (default 10gbit)\n"
           "  --runs N       runs per path and size (default 3)\n"
           "  --format N     chunk format the bench seals: 2 = GTCHUNK2, 4 MiB segments (default;\n"
           "                 devd opens it on two threads), 1 = GTCHUNK1 (one GCM message)\n"
           "  --json         one JSON object per (link, path, size) and the speedups, on stdout\n"
           "  --out DIR      work folder and plots (default: a new folder under /tmp); the\n"
           "                 loopback-*/link-* scratch folders of an earlier run there are\n"
           "                 replaced\n");
}

typedef struct {
    uint64_t sizes[MAX_SIZES];
    int nsizes, runs, format;
    uint64_t link_bps;
    bool json, no_link;
    const char *out;
} options;

static gt_err parse_rate(const char *s, uint64_t *bps)
{
    char *end = NULL;
    double v = strtod(s, &end);
    GT_ENSURE(end != s && v > 0, GT_E_ARG, "--link '%s': not a rate", s);
    double mult = strcasecmp(end, "gbit") == 0 ? 1e9 : strcasecmp(end, "mbit") == 0 ? 1e6
                  : strcasecmp(end, "kbit") == 0 ? 1e3 : 0;
    GT_ENSURE(mult > 0, GT_E_ARG, "--link '%s': use gbit, mbit or kbit", s);
    *bps = (uint64_t)(v * mult);
    return GT_OK;
}

typedef struct {
    double median, min, max;
} stat3;

static stat3 stats(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return (stat3){n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1]};
}

// One decryption pass over the chunk file, in this process (the reference the travel path is
// held to).
static gt_err time_decrypt(world *w, int threads, double *secs)
{
    gt_manifest m;
    GT_TRY(gt_manifest_load(&m, w->ds));
    char path[2200];
    gt_buf file = {0}, pt = {0};
    uint8_t key[GT_AEAD_KEY_BYTES];
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_chunk_path(path, sizeof path, w->ds, 0), out);
    GT_TRY_GOTO(err, gt_file_read_all(path, gt_manifest_chunk_file_bytes(&m, 0), &file), out);
    GT_TRY_GOTO(err, gt_buf_reserve(&pt, m.chunks[0].plaintext_len), out);
    GT_TRY_GOTO(err, gt_chunk_key_derive(key, w->k.dataset_key, &m, 0), out);
    memset(pt.data, 0, m.chunks[0].plaintext_len);  // touched before timing, as device memory is
    double t0 = gt_now_seconds();
    GT_TRY_GOTO(err, gt_chunk_open_threads(pt.data, pt.cap, &pt.len, file.data, file.len, &m, 0,
                                           key, threads),
                out);
    *secs = gt_now_seconds() - t0;
out:
    gt_secure_zero(key, sizeof key);
    gt_buf_free(&pt);
    gt_buf_free_nowipe(&file);
    gt_manifest_free(&m);
    return err;
}

// ---- the TLS push: the holder's side sends the chunk file's bytes on request ------------------

typedef struct {
    world *w;
    gt_listener *l;
    char addr[64];
    gt_buf bytes;  // the chunk file, read once
    pthread_t th;
    gt_err err;
} push_server;

#define PUSH_WANT 1u
#define PUSH_DATA 2u

static void *push_main(void *p)
{
    push_server *ps = p;
    gt_tee_attestor mine = ps->w->holder_att;  // its own copy: this thread appraises with it
    gt_net_attestor na = gt_tee_attestor_bind(&mine);
    gt_channel *ch = NULL;
    ps->err = gt_listener_accept(ps->l, &na, 60000, &ch);
    gt_buf req = {0};
    while (gt_is_ok(ps->err)) {
        uint32_t type = 0;
        gt_err e = gt_channel_recv(ch, &type, &req, 16);
        if (!gt_is_ok(e) || type != PUSH_WANT) {
            break;  // the trainer's side left: done
        }
        ps->err = gt_channel_send(ch, PUSH_DATA, ps->bytes.data, ps->bytes.len);
    }
    gt_buf_free_nowipe(&req);
    gt_channel_close(ch);
    return NULL;
}

static gt_err push_start(push_server *ps, world *w, const char *host, int self_ns)
{
    ps->w = w;
    gt_manifest m;
    GT_TRY(gt_manifest_load(&m, w->ds));
    char path[2200];
    gt_err err = gt_chunk_path(path, sizeof path, w->ds, 0);
    if (gt_is_ok(err)) {
        err = gt_file_read_all(path, gt_manifest_chunk_file_bytes(&m, 0), &ps->bytes);
    }
    gt_manifest_free(&m);
    GT_TRY(err);
    GT_TRY(bench_world_listener(w, host, self_ns, &ps->l, ps->addr, sizeof ps->addr));
    GT_ENSURE(pthread_create(&ps->th, NULL, push_main, ps) == 0, GT_E_IO,
              "cannot start the TLS push thread");
    return GT_OK;
}

static void push_stop(push_server *ps)
{
    if (ps->l != NULL) {
        pthread_join(ps->th, NULL);
        gt_listener_close(ps->l);
    }
    gt_buf_free_nowipe(&ps->bytes);
}

// One push: ask, then receive the whole frame into buf (allocated and touched once).
static gt_err push_once(gt_channel *ch, gt_buf *buf, double *secs)
{
    double t0 = gt_now_seconds();
    GT_TRY(gt_channel_send(ch, PUSH_WANT, NULL, 0));
    uint32_t type = 0;
    uint64_t len = 0;
    GT_TRY(gt_channel_recv_begin(ch, &type, &len));
    GT_ENSURE(type == PUSH_DATA && len <= buf->cap, GT_E_FORMAT, "tls push: unexpected frame");
    GT_TRY(gt_channel_read(ch, buf->data, (size_t)len));
    *secs = gt_now_seconds() - t0;
    return GT_OK;
}

// Runs every path `runs` times for one world; times[path][run] in seconds.
static gt_err measure(world *w, gt_device *dev, const char *socket, int runs,
                      const char *push_addr, uint64_t push_bytes, double times[PATHS][MAX_RUNS])
{
    gt_tee_attestor att = {.collect = {.type = GT_TEE_SIM, .sim_root = w->sim_root},
                           .policy = w->policy, .roots = &w->root, .root_count = 1,
                           .agreement = &w->a, .peer_role = GT_PEER_HOLDER};
    gt_net_attestor na = gt_tee_attestor_bind(&att);
    gt_holder_conn *c = NULL;
    uint8_t signing_pub[GT_ED25519_PUBLIC_BYTES], signing_sec[GT_ED25519_SECRET_BYTES];
    GT_TRY(gt_ed25519_keypair(signing_pub, signing_sec));  // signs nothing here: no output
    gt_secure_zero(signing_sec, sizeof signing_sec);
    GT_TRY(gt_holder_connect(&c, &w->a, 0, &na, "bench-trainer", signing_pub));
    gt_err err = GT_OK;
    gt_channel *push = NULL;
    gt_buf pushed = {0};
    err = gt_channel_connect(&push, push_addr, &na);
    if (gt_is_ok(err)) {
        err = gt_buf_reserve(&pushed, push_bytes ? push_bytes : 1);
    }
    if (gt_is_ok(err)) {
        memset(pushed.data, 0, pushed.cap);  // touched before timing, as device memory is
    }
    for (int r = 0; r < runs && gt_is_ok(err); r++) {
        for (int p = 0; p < PATHS && gt_is_ok(err); p++) {
            gt_dbuf buf = 0;
            uint64_t tokens = 0;
            double t0 = gt_now_seconds();
            if (p == TLS_PUSH) {
                err = push_once(push, &pushed, &times[p][r]);
                continue;
            }
            if (p == 0 || p == 1) {
                err = gt_holder_fetch(c, 0, p == 0 ? GT_FETCH_PLAIN : GT_FETCH_KEYRELEASE, dev,
                                      GT_DBUF_NO_READBACK, &buf, &tokens);
            } else if (p == 2) {
                err = gt_holder_travel(c, 0, dev, socket, 120000, &buf, &tokens);
            } else {
                err = time_decrypt(w, p == DECRYPT_2CORE ? 2 : 1, &times[p][r]);
                continue;
            }
            times[p][r] = gt_now_seconds() - t0;
            if (gt_is_ok(err)) {
                err = gt_device_free(dev, buf);
            }
            if (gt_is_ok(err)) {
                err = gt_holder_confirm_use(c, 0, tokens);
            }
        }
    }
    gt_channel_close(push);  // the push thread sees the channel close and ends
    gt_buf_free_nowipe(&pushed);
    gt_holder_disconnect(c);
    return err;
}

static gt_err start_devd(gt_proc *devd, const char *socket, uint64_t mem, const char *log)
{
    char self[4096], memarg[32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    GT_ENSURE(n > 0, GT_E_IO, "cannot find this executable: %s", strerror(errno));
    self[n] = '\0';
    snprintf(memarg, sizeof memarg, "%llu", (unsigned long long)mem);
    char *argv[] = {self, "devd", "--socket", (char *)socket, "--mem-limit", memarg, NULL};
    gt_proc_spec spec = {.argv = argv, .log_path = log};
    unlink(socket);  // a stale socket of an earlier run would look ready
    GT_TRY(gt_proc_spawn(devd, &spec));
    gt_proc_ready r = {.kind = GT_PROC_READY_SOCKET, .path = socket, .timeout_ms = 30000,
                       .what = "devd"};
    gt_err e = gt_proc_wait_ready(devd, &r);
    GT_ENSURE(gt_is_ok(e), GT_E_PEER, "devd did not start (%s): see %s", e.msg, log);
    return GT_OK;
}

// What one bench run measured, per link (loopback, shaped link) and size.
// first_trip: each size's first travel run, which includes the holder's attested attach to devd
// (its later trips reattach the session it kept).
// ratios: per size, the median over runs of each run's conventional, keyrelease and decryption
// pass time over its travel time: a run times the paths back to back, so pairing them cancels the
// machine's drift between runs.
typedef struct {
    char dir[1024];
    int nlinks;
    double times[2][MAX_SIZES][PATHS][MAX_RUNS];
    stat3 st[2][MAX_SIZES][PATHS];
    double first_trip[2][MAX_SIZES];
    double ratios[2][MAX_SIZES][5];  // paired: conventional, keyrelease, decrypt, TLS push,
                                     // two-core decrypt, each over travel
} results;

static const char *const link_names[2] = {"loopback", "link"};

static void link_title(const options *o, int L, char *title, size_t cap)
{
    if (L == 0) {
        snprintf(title, cap, "loopback");
    } else {
        snprintf(title, cap, "veth shaped to %.3g Gbit/s", (double)o->link_bps / 1e9);
    }
}

static void print_json(const options *o, const results *res, int L, int s)
{
    const stat3 *st = res->st[L][s];
    for (int p = 0; p < PATHS; p++) {
        printf("{\"link\":\"%s\",\"path\":\"%s\",\"size\":%llu,\"median_s\":%.6f,"
               "\"min_s\":%.6f,\"max_s\":%.6f}\n",
               link_names[L], path_names[p], (unsigned long long)o->sizes[s], st[p].median,
               st[p].min, st[p].max);
    }
    printf("{\"link\":\"%s\",\"size\":%llu,\"speedup_travel_vs_conventional\":%.3f,"
           "\"speedup_travel_vs_keyrelease\":%.3f,\"travel_vs_decrypt_pass\":%.3f,"
           "\"speedup_travel_vs_tls_push\":%.3f,\"travel_vs_decrypt_2core\":%.3f,"
           "\"chunk_format\":%d,\"travel_first_s\":%.6f}\n",
           link_names[L], (unsigned long long)o->sizes[s], res->ratios[L][s][0],
           res->ratios[L][s][1], res->ratios[L][s][2], res->ratios[L][s][3],
           res->ratios[L][s][4], o->format, res->first_trip[L][s]);
}

// What bounds travel/tls on a shaped link, from this run's own numbers: the TLS push cannot beat
// the link's line rate, and travel (which does not cross the link) cannot beat one decryption
// pass, which is one AES-256-GCM message per chunk and so one core. The ceiling of travel/tls on
// this machine is therefore the push's time over the decryption pass's.
static void print_link_bound(const options *o, const results *res, const char *const *labels)
{
    printf("bound:");
    for (int s = 0; s < o->nsizes; s++) {
        double floor_s = (double)o->sizes[s] * 8.0 / (double)o->link_bps;
        double tls = res->st[1][s][TLS_PUSH].median, dec = res->st[1][s][3].median;
        double dec2 = res->st[1][s][DECRYPT_2CORE].median;
        printf("%s %s tls-push at %.0f%% of line rate (floor %.3f s), travel/tls ceiling at one "
               "decryption pass %.2fx, at the two-core pass %.2fx", s ? ";" : "", labels[s],
               100.0 * floor_s / tls, floor_s, dec > 0 ? tls / dec : 0.0,
               dec2 > 0 ? tls / dec2 : 0.0);
    }
    printf("\n");
}

static void print_table(const options *o, const results *res, int L, const char *title,
                        const char *const *labels)
{
    printf("\n%s (seconds per chunk into device memory; median [min, max] of %d; chunks %s)\n",
           title, o->runs, o->format == 2 ? "GTCHUNK2, 4 MiB segments" : "GTCHUNK1");
    printf("%-10s", "size");
    for (int p = 0; p < PATHS; p++) {
        printf(" %26s", path_names[p]);
    }
    printf(" %12s %12s %12s %12s\n", "travel/conv", "travel/dec", "travel/dec2", "travel/tls");
    for (int s = 0; s < o->nsizes; s++) {
        printf("%-10s", labels[s]);
        for (int p = 0; p < PATHS; p++) {
            const stat3 *st = &res->st[L][s][p];
            char cell[64];
            snprintf(cell, sizeof cell, "%.3f [%.3f, %.3f]", st->median, st->min, st->max);
            printf(" %26s", cell);
        }
        printf(" %11.2fx %11.2fx %11.2fx %11.2fx\n", res->ratios[L][s][0], res->ratios[L][s][2],
               res->ratios[L][s][4], res->ratios[L][s][3]);
    }
    if (L == 1) {
        print_link_bound(o, res, labels);
    }
    printf("first trip (with the holder's attested attach to devd; later trips reuse "
           "its session):");
    for (int s = 0; s < o->nsizes; s++) {
        printf("%s %s %.3f s", s ? "," : "", labels[s], res->first_trip[L][s]);
    }
    printf("\n");
}

static void plot_link(const options *o, const results *res, int L, const char *title,
                      const char *const *labels)
{
    double med[PATHS * MAX_SIZES], lo[PATHS * MAX_SIZES], hi[PATHS * MAX_SIZES];
    for (int s = 0; s < o->nsizes; s++) {
        for (int p = 0; p < PATHS; p++) {
            med[p * o->nsizes + s] = res->st[L][s][p].median;
            lo[p * o->nsizes + s] = res->st[L][s][p].min;
            hi[p * o->nsizes + s] = res->st[L][s][p].max;
        }
    }
    char png[2200], ptitle[160];
    snprintf(png, sizeof png, "%s/transfer-%s.png", res->dir, link_names[L]);
    snprintf(ptitle, sizeof ptitle, "one chunk into device memory, %s (lower is better)", title);
    gt_plot_style ps = {.title = ptitle, .xlabel = "chunk size", .ylabel = "seconds"};
    gt_err perr = gt_plot_bars(png, &ps, labels, (size_t)o->nsizes, path_names, PATHS, med, lo,
                               hi);
    if (!o->json) {
        printf(gt_is_ok(perr) ? "plot: %s\n" : "(no plot: %s)\n",
               gt_is_ok(perr) ? png : perr.msg);
    }
}

static void print_results(const options *o, const results *res)
{
    for (int L = 0; L < res->nlinks; L++) {
        char title[96], label_buf[MAX_SIZES][32];
        const char *labels[MAX_SIZES];
        link_title(o, L, title, sizeof title);
        for (int s = 0; s < o->nsizes; s++) {
            gt_format_size(label_buf[s], sizeof label_buf[s], o->sizes[s]);
            labels[s] = label_buf[s];
            if (o->json) {
                print_json(o, res, L, s);
            }
        }
        if (!o->json) {
            print_table(o, res, L, title, labels);
        }
        plot_link(o, res, L, title, labels);
    }
    if (!o->json) {
        printf("\ntravel/conv: conventional (plain) time over travel time; travel/dec: one\n"
               "AES-256-GCM decryption pass's time over travel time (>= 0.7 is the target);\n"
               "travel/dec2: the two-core pass's. All are the median over runs of each run's\n"
               "ratio: a run times the paths back to back.\n"
               "All parties are simulated (insecure-simulation); work folder %s\n", res->dir);
    }
}

// 0 and o filled, or the exit status of a usage error (already printed).
static int parse(int argc, char **argv, options *o)
{
    static const struct option opts[] = {
        {"sizes", required_argument, NULL, 's'}, {"link", required_argument, NULL, 'l'},
        {"runs", required_argument, NULL, 'r'},  {"json", no_argument, NULL, 'j'},
        {"out", required_argument, NULL, 'o'},   {"no-link", no_argument, NULL, 'n'},
        {"format", required_argument, NULL, 'F'}, {0}};
    *o = (options){.runs = 3, .link_bps = 10000000000ull, .format = 2};
    const char *sizes = "64M,128M,256M,512M";
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': sizes = optarg; break;
        case 'l':
            if (!gt_is_ok(parse_rate(optarg, &o->link_bps))) {
                return gt_cli_usage(CMD, "--link: a rate such as 10gbit");
            }
            break;
        case 'r':
            if (!gt_is_ok(gt_cli_parse_int("--runs", optarg, 1, MAX_RUNS, &o->runs))) {
                return gt_cli_usage(CMD, "--runs must be 1..%d", MAX_RUNS);
            }
            break;
        case 'j': o->json = true; break;
        case 'o': o->out = optarg; break;
        case 'n': o->no_link = true; break;
        case 'F':
            if (!gt_is_ok(gt_cli_parse_int("--format", optarg, 1, 2, &o->format))) {
                return gt_cli_usage(CMD, "--format: 1 (GTCHUNK1) or 2 (GTCHUNK2)");
            }
            break;
        default: return gt_cli_usage(CMD, "unknown option");
        }
    }
    char list[256];
    snprintf(list, sizeof list, "%s", sizes);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES || !gt_is_ok(gt_parse_size(t, &o->sizes[o->nsizes])) ||
            o->sizes[o->nsizes] < 4096 || o->sizes[o->nsizes] % 2 ||
            o->sizes[o->nsizes] > (4ull << 30)) {
            return gt_cli_usage(CMD, "--sizes: up to %d even sizes, 4K..4G", MAX_SIZES);
        }
        o->nsizes++;
    }
    if (o->out != NULL && strlen(o->out) >= sizeof ((results *)0)->dir) {
        return gt_cli_usage(CMD, "--out: path too long");
    }
    return GT_EXIT_OK;
}

// The world of one (link, size): its scratch folder, dataset, agreement and serving holder.
static gt_err world_open(world *w, const results *res, const char *sim_root, int L,
                         uint64_t size, const gt_netns_pair *pair, int self_ns, int format)
{
    snprintf(w->dir, sizeof w->dir, "%s/%s-%llu", res->dir, L ? "link" : "loopback",
             (unsigned long long)size);
    snprintf(w->ds, sizeof w->ds, "%s/ds", w->dir);
    snprintf(w->keys, sizeof w->keys, "%s/keys", w->dir);
    snprintf(w->ledger, sizeof w->ledger, "%s/ledger.log", w->dir);
    snprintf(w->agreement, sizeof w->agreement, "%s/agreement.json", w->dir);
    snprintf(w->sim_root, sizeof w->sim_root, "%s", sim_root);
    snprintf(w->root_pub, sizeof w->root_pub, "%s/root-pub.pem", sim_root);
    w->netns = L ? pair->ns[0] : NULL;
    w->chunk_format = format;
    GT_TRY(bench_scratch_fresh(w->dir, res->dir));
    GT_TRY(bench_world_listen(w, L ? GT_NETNS_ADDR_A : "127.0.0.1", self_ns));
    GT_TRY(bench_world_dataset(w, size, size));
    // The holder's policy says what it allows: simulated TEEs, never a debug one.
    static const char policy[] = "{\"allow_simulation\":true,\"allow_debug\":false}";
    GT_TRY(gt_policy_parse(&w->policy, policy, sizeof policy - 1));
    GT_TRY(gt_file_read_all(w->root_pub, 1 << 16, &w->root_bytes));
    w->root = (gt_attest_file){w->root_pub, gt_buf_span(&w->root_bytes)};
    return bench_world_start(w, NULL);
}

static void world_free(world *w)
{
    bench_world_stop(w);
    gt_policy_free(w->policy);
    gt_buf_free_nowipe(&w->root_bytes);
    gt_holder_keys_wipe(&w->k);
    free(w);
}

// Times every path for size s on link L (the trainer on its side of the link), then sums up.
static gt_err measure_size(const options *o, results *res, int L, int s, const char *sim_root,
                           const char *socket, const gt_netns_pair *pair, int self_ns)
{
    world *w = calloc(1, sizeof *w);
    GT_ENSURE(w != NULL, GT_E_NOMEM, "out of memory");
    gt_err err = world_open(w, res, sim_root, L, o->sizes[s], pair, self_ns, o->format);
    push_server push = {0};
    if (gt_is_ok(err)) {
        err = push_start(&push, w, L ? GT_NETNS_ADDR_A : "127.0.0.1", self_ns);
    }
    gt_device *dev = NULL;
    if (gt_is_ok(err) && L == 1) {
        err = gt_netns_enter(pair->ns[1]);  // the trainer's side of the link
    }
    if (gt_is_ok(err)) {
        gt_device_config dc = {.kind = GT_DEVICE_SIM, .socket_path = socket};
        gt_device_sim_options so = {.timeout_ms = 0};
        memcpy(so.agreement_hash, w->a.hash, sizeof so.agreement_hash);
        err = gt_device_open_sim(&dev, &dc, &so);
    }
    if (gt_is_ok(err)) {
        if (!o->json) {
            char sz[32];
            gt_format_size(sz, sizeof sz, o->sizes[s]);
            fprintf(stderr, "bench: %s, %s: %d run(s) of each path...\n",
                    L ? "shaped link" : "loopback", sz, o->runs);
        }
        err = measure(w, dev, socket, o->runs, push.addr, push.bytes.len, res->times[L][s]);
    }
    gt_device_close(dev);
    if (L == 1 && self_ns >= 0) {
        setns(self_ns, CLONE_NEWNET);
    }
    push_stop(&push);
    world_free(w);
    GT_TRY(err);
    double (*t)[MAX_RUNS] = res->times[L][s];
    res->first_trip[L][s] = t[2][0];  // before stats() sorts the runs
    static const int over_travel[5] = {0, 1, 3, TLS_PUSH, DECRYPT_2CORE};  // each ratio's path
    for (int q = 0; q < 5; q++) {
        double per_run[MAX_RUNS];
        for (int r = 0; r < o->runs; r++) {
            per_run[r] = t[over_travel[q]][r] / t[2][r];
        }
        res->ratios[L][s][q] = stats(per_run, o->runs).median;
    }
    for (int p = 0; p < PATHS; p++) {
        res->st[L][s][p] = stats(t[p], o->runs);
    }
    return GT_OK;
}

// Every link and size, with one devd for them all (sized for the biggest chunk twice over).
static gt_err run_links(const options *o, results *res, const char *sim_root, const char *socket)
{
    gt_netns_pair pair = {0};
    int self_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    gt_err err = GT_OK;
    for (int L = 0; L < res->nlinks && gt_is_ok(err); L++) {
        if (L == 1) {
            char tag[9];
            snprintf(tag, sizeof tag, "b%d", (int)(getpid() % 1000000));  // concurrent benches
            err = gt_netns_pair_create(&pair, tag, o->link_bps);
        }
        for (int s = 0; s < o->nsizes && gt_is_ok(err); s++) {
            err = measure_size(o, res, L, s, sim_root, socket, &pair, self_ns);
        }
    }
    gt_netns_pair_destroy(&pair);  // only what was created
    if (self_ns >= 0) {
        close(self_ns);
    }
    return err;
}

static gt_err run(const options *o, results *res)
{
    GT_TRY(gt_cli_bench_dir(res->dir, sizeof res->dir, o->out, "transfer"));
    char sim_root[2100], socket[2100], devd_log[2100];
    snprintf(sim_root, sizeof sim_root, "%s/sim-root", res->dir);
    snprintf(socket, sizeof socket, "%s/devd.sock", res->dir);
    snprintf(devd_log, sizeof devd_log, "%s/devd.log", res->dir);
    GT_TRY(gt_cli_sim_root_use(sim_root));
    gt_pkey *root = NULL;
    GT_TRY(gt_sim_root_open(&root, NULL, 0, sim_root, true));
    gt_pkey_free(root);
    uint64_t biggest = 0;
    for (int i = 0; i < o->nsizes; i++) {
        biggest = o->sizes[i] > biggest ? o->sizes[i] : biggest;
    }
    gt_proc devd;
    gt_err err = start_devd(&devd, socket, 2 * biggest + (64u << 20), devd_log);
    if (gt_is_ok(err)) {
        err = run_links(o, res, sim_root, socket);
    }
    gt_proc_stop(&devd, 10000);
    return err;
}

static int bench_transfer(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    results *res = calloc(1, sizeof *res);
    if (res == NULL) {
        return gt_cli_fail(CMD, gt_errf(GT_E_NOMEM, "out of memory"));
    }
    bool link = !o.no_link && geteuid() == 0;
    if (!o.no_link && !link) {
        fprintf(stderr, "gputravel bench: not root: the shaped-link pass is skipped\n");
    }
    res->nlinks = link ? 2 : 1;
    signal(SIGPIPE, SIG_IGN);
    if (!gt_cli.verbose) {
        gt_log_set_level(GT_LOG_ERROR);
    }
    gt_err err = run(&o, res);
    if (gt_is_ok(err)) {
        print_results(&o, res);
    } else {
        rc = gt_cli_fail(CMD, err);
    }
    free(res);
    return rc;
}

int gt_cmd_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage();
        return argc < 2 ? GT_EXIT_USAGE : GT_EXIT_OK;
    }
    if (strcmp(argv[1], "holder") == 0) {
        if (gt_cli_wants_help(argc, argv)) {
            gt_cmd_bench_holder_usage();
            return GT_EXIT_OK;
        }
        optind = 2;
        return gt_cmd_bench_holder(argc, argv);
    }
    if (strcmp(argv[1], "allreduce") == 0) {
        if (gt_cli_wants_help(argc, argv)) {
            gt_cmd_bench_allreduce_usage();
            return GT_EXIT_OK;
        }
        optind = 2;
        return gt_cmd_bench_allreduce(argc, argv);
    }
    if (strcmp(argv[1], "dtrain") == 0) {
        if (gt_cli_wants_help(argc, argv)) {
            gt_cmd_bench_dtrain_usage();
            return GT_EXIT_OK;
        }
        optind = 2;
        return gt_cmd_bench_dtrain(argc, argv);
    }
    if (strcmp(argv[1], "transfer") != 0) {
        return gt_cli_usage(CMD, "unknown benchmark '%s' (transfer, holder, allreduce, dtrain)",
                            argv[1]);
    }
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    optind = 2;
    return bench_transfer(argc, argv);
}
