// One gradient chunk from one device to a peer device (device.h "peers"; issue 16): seal on rank
// 0, open and add on rank 1, for (a) two cpu devices in this process, (b) two devd processes
// (the sim device: each chunk crosses both sessions' bounce slots: PEER_SEAL + copy_out + free,
// then alloc + copy_in + PEER_OPEN + free), against (c) one gt_aead_seal + one gt_aead_open of
// the same bytes here: what any encrypted hop costs at least. Plaintext MB/s (10^6 B/s), median
// of 5 after one warm-up; ratios side by side from one run. No target: the ring's own benchmark
// (bench allreduce) sets it; this says what the device hop costs within it.
//
//   bench_peer [MiB ...]   (chunk sizes, default 1 4 16; each at most 64)
#include "bench_common.h"

#include <gputravel/travel.h>

#define RUNS 5

static void check(const char *what, gt_err e)
{
    if (!gt_is_ok(e)) {
        fprintf(stderr, "bench_peer: %s: %s\n", what, e.msg);
        exit(1);
    }
}

// An agreement of 2 ranks accepting this executable as trainer and device (devd forked from it
// measures the same file).
static void agreement(gt_agreement *a)
{
    uint8_t m[GT_MEASUREMENT_BYTES];
    check("measure", gt_sim_measure_exe(m, NULL));
    char hex[97], doc[2048];
    gt_hex_encode(hex, sizeof hex, m, sizeof m);
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"bench-peer\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":64,\"max_seq\":8,\"init_seed\":5},\"training\":{\"steps\":4,"
             "\"batch\":2,\"seq\":8,\"learning_rate\":0.001},\"holders\":[{\"name\":\"h0\","
             "\"identity_key\":\"11%062d\",\"endpoint\":\"127.0.0.1:1\",\"dataset_id\":\"%032d\","
             "\"token_budget\":1,\"max_uses_per_chunk\":1}],\"trainer\":{\"accepted_measurements\""
             ":[\"%s\"],\"ranks\":2},\"device\":{\"accepted_measurements\":[\"%s\"]},"
             "\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}}", 0, 0, hex, hex);
    check("agreement", gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

static gt_device *open_dev(gt_device_kind kind, const char *sock, const gt_agreement *a)
{
    gt_device_config cfg = {.kind = kind, .socket_path = sock, .mem_limit = 1u << 30};
    gt_device *dev = NULL;
    if (kind == GT_DEVICE_SIM) {
        gt_device_sim_options opt;
        memset(&opt, 0, sizeof opt);
        memcpy(opt.agreement_hash, a->hash, sizeof a->hash);
        check("open sim", gt_device_open_sim(&dev, &cfg, &opt));
    } else {
        check("open cpu", gt_device_open(&dev, &cfg));
    }
    gt_device_outputs o;
    gt_agreement_device_outputs(a, &o);
    check("declare", gt_device_declare_outputs(dev, &o, (gt_span){a->doc, a->doc_len}));
    return dev;
}

static void admit(gt_device *d[2], uint8_t run[16])
{
    static uint8_t h[2][GT_PEER_HELLO_MAX];
    size_t n[2];
    for (int i = 0; i < 2; i++) {
        check("hello", gt_device_peer_hello(d[i], (uint32_t)i, 2, h[i], sizeof h[i], &n[i]));
    }
    check("admit", gt_device_peer_admit(d[0], 1, h[1], n[1]));
    check("admit", gt_device_peer_admit(d[1], 0, h[0], n[0]));
    check("run id", gt_device_peer_run_id(d[0], run));
}

// Median seconds of one seal on d[0] + open (add) on d[1] of `bytes`.
static double hop(gt_device *d[2], const uint8_t run[16], size_t bytes, uint8_t *wire)
{
    gt_dbuf g0 = 0, g1 = 0;
    check("alloc", gt_device_alloc(d[0], bytes, 0, &g0));
    check("alloc", gt_device_alloc(d[1], bytes, 0, &g1));
    gt_peer_hdr h = {.src = 0, .dst = 1, .nelem = bytes / 4};
    memcpy(h.run, run, 16);
    double t[RUNS + 1];
    for (int r = 0; r <= RUNS; r++) {
        h.step = (uint64_t)r;
        size_t len = 0;
        double t0 = gt_now_seconds();
        check("seal", gt_device_peer_seal(d[0], &h, g0, wire, gt_peer_chunk_bytes(h.nelem), &len));
        check("open", gt_device_peer_open(d[1], &h, wire, len, g1, GT_PEER_ADD));
        t[r] = gt_now_seconds() - t0;
    }
    check("free", gt_device_free(d[0], g0));
    check("free", gt_device_free(d[1], g1));
    return bench_median(t + 1, RUNS);  // the first is the warm-up
}

static double raw(size_t bytes, uint8_t *wire)
{
    uint8_t *pt = calloc(1, bytes), key[32] = {1}, iv[12] = {0}, aad[64] = {0};
    double t[RUNS + 1];
    for (int r = 0; r <= RUNS; r++) {
        size_t n = 0;
        iv[11] = (uint8_t)r;
        double t0 = gt_now_seconds();
        check("seal", gt_aead_seal(wire, bytes + 16, &n, pt, bytes, aad, sizeof aad, iv, key));
        check("open", gt_aead_open(pt, bytes, &n, wire, bytes + 16, aad, sizeof aad, iv, key));
        t[r] = gt_now_seconds() - t0;
    }
    free(pt);
    return bench_median(t + 1, RUNS);
}

// A second devd in the first one's folder, sharing its sim root (the vendor root both devices'
// identities are certified by, as one vendor's GPUs are).
static int second_devd(const bench_devd *first, bench_devd *d)
{
    *d = *first;
    snprintf(d->sock, sizeof d->sock, "%s/devd2.sock", first->dir);
    d->pid = fork();
    if (d->pid < 0) {
        return -1;
    }
    if (d->pid == 0) {
        char id[300];
        snprintf(id, sizeof id, "%s/identity2", first->dir);
        gt_devd_config cfg = {.socket_path = d->sock, .mem_limit = 1u << 30, .identity_dir = id};
        _exit(gt_is_ok(gt_devd_run(&cfg)) ? 0 : 1);
    }
    gt_proc child = {.pid = d->pid};
    gt_proc_ready r = {.kind = GT_PROC_READY_SOCKET, .path = d->sock, .timeout_ms = 600000,
                       .what = "devd"};
    return gt_is_ok(gt_proc_wait_ready(&child, &r)) ? 0 : -1;
}

int main(int argc, char **argv)
{
    size_t sizes[16];
    int nsizes = 0;
    static const char *const defaults[] = {"bench_peer", "1", "4", "16"};
    if (argc == 1) {
        argc = 4;
        argv = (char **)defaults;
    }
    size_t max = bench_sizes_mib(argc, argv, sizes, 16, &nsizes) << 20;
    if (max > (size_t)GT_PEER_MAX_CHUNK_ELEMS * 4) {
        fprintf(stderr, "bench_peer: a chunk is at most 64 MiB\n");
        return 64;
    }
    gt_log_set_level(GT_LOG_ERROR);
    bench_devd d1, d2;
    if (bench_devd_start(&d1, "bench-peer", (gt_devd_config){.mem_limit = 1u << 30}) != 0 ||
        second_devd(&d1, &d2) != 0) {
        return 1;
    }
    gt_agreement *a = calloc(1, sizeof *a);
    uint8_t *wire = malloc(gt_peer_chunk_bytes(max / 4));
    if (a == NULL || wire == NULL) {
        return 1;
    }
    agreement(a);
    gt_device *cpu[2] = {open_dev(GT_DEVICE_CPU, NULL, a), open_dev(GT_DEVICE_CPU, NULL, a)};
    gt_device *sim[2] = {open_dev(GT_DEVICE_SIM, d1.sock, a), open_dev(GT_DEVICE_SIM, d2.sock, a)};
    uint8_t run_cpu[16], run_sim[16];
    admit(cpu, run_cpu);
    admit(sim, run_sim);
    printf("| chunk | seal+open here (MB/s) | cpu peers | sim peers (devd) | cpu / here | "
           "sim / here |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < nsizes; i++) {
        size_t bytes = sizes[i] << 20;
        double r = raw(bytes, wire), c = hop(cpu, run_cpu, bytes, wire);
        double s = hop(sim, run_sim, bytes, wire);
        printf("| %zu MiB | %.0f | %.0f | %.0f | %.2fx | %.2fx |\n", sizes[i], bytes / r / 1e6,
               bytes / c / 1e6, bytes / s / 1e6, r / c, r / s);
    }
    for (int i = 0; i < 2; i++) {
        gt_device_close(cpu[i]);
        gt_device_close(sim[i]);
    }
    gt_proc second = {.pid = d2.pid};  // its folder is the first one's
    gt_proc_stop(&second, 10000);
    bench_devd_stop(&d1, true);
    free(a);
    free(wire);
    return 0;
}
