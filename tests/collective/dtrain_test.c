// The device endpoint under mpirun (docs/collective.md "Training across ranks"). One cpu device per
// rank, declared with an agreement for N ranks that accepts this executable; GT_SIM_ROOT is
// shared (made by `fixture` first). Usage:
//   gt_dtrain_test fixture DIR RANKS EXE     DIR/train.bin (a token shard), DIR/peers.json (an
//                                            agreement for RANKS ranks accepting EXE), the sim
//                                            root (GT_SIM_ROOT)
//   mpirun -np N gt_dtrain_test labelled     a labelled buffer summed by the devices: exact sum,
//                                            labels kept, copy_out still refused on every rank
//   mpirun -np N gt_dtrain_test refused      the last rank's trainer is another executable: every
//                                            rank stops naming the refused rank and the reason
//   mpirun -np N gt_dtrain_test replay       rank 0 sends its hello of an earlier run: every
//                                            rank's device admits what it gets, but the run ids
//                                            differ and every rank stops saying so
// Each rank prints "dtrain_test[r] CASE: ok" or why not; exit 0 only when all its checks held.
#include <gputravel/attest.h>
#include <gputravel/data.h>
#include <gputravel/device.h>
#include <gputravel/collective.h>
#include <gputravel/travel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NELEM 100003  // several buckets' worth at 64 KiB buckets, not a multiple of N
static const uint8_t DATASET[GT_LABEL_ID_BYTES] = {0xd7, 0x7a, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
                                                   0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};

static int rank, nranks;

static int fail(const char *c, const char *why, gt_err e)
{
    printf("dtrain_test[%d] %s: FAIL: %s (%s)\n", rank, c, why, e.msg);
    return 1;
}

// The agreement for `ranks` ranks whose trainer (and, on cpu, device) is exe.
static gt_err agreement_doc(char *doc, size_t cap, uint32_t ranks, const char *exe)
{
    uint8_t m[GT_MEASUREMENT_BYTES];
    GT_TRY(gt_sim_measure_exe(m, exe));
    char hex[2 * GT_MEASUREMENT_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, m, sizeof m);
    int n = snprintf(doc, cap,
             "{\"version\":1,\"name\":\"dtrain\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":64,\"max_seq\":16,\"init_seed\":5},\"training\":{\"steps\":"
             "100,\"batch\":2,\"seq\":8,\"learning_rate\":0.001},\"holders\":[{\"name\":\"h0\","
             "\"identity_key\":\"%064d\",\"endpoint\":\"127.0.0.1:1\",\"dataset_id\":\"%032d\","
             "\"token_budget\":100000,\"max_uses_per_chunk\":1}],\"trainer\":{"
             "\"accepted_measurements\":[\"%s\"],\"ranks\":%u},\"device\":{"
             "\"accepted_measurements\":[\"%s\"]},\"allow_simulation\":true,\"output\":{"
             "\"kind\":\"loss_only\"}}", 0, 0, hex, ranks, hex);
    GT_ENSURE(n > 0 && (size_t)n < cap, GT_E_LIMIT, "agreement too long");
    return GT_OK;
}

static int fixture(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: gt_dtrain_test fixture DIR RANKS EXE\n");
        return 2;
    }
    char doc[4096], path[4096];
    gt_err e = agreement_doc(doc, sizeof doc, (uint32_t)atoi(argv[3]), argv[4]);
    snprintf(path, sizeof path, "%s/peers.json", argv[2]);
    if (gt_is_ok(e)) {
        e = gt_file_write_atomic(path, doc, strlen(doc), 0644);
    }
    uint16_t tok[4000];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < 4000; i++) {  // xorshift: a fixed pseudo-random stream below V = 64
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        tok[i] = (uint16_t)(x % 64);
    }
    snprintf(path, sizeof path, "%s/train.bin", argv[2]);
    if (gt_is_ok(e)) {
        e = gt_shard_write(path, tok, 4000);
    }
    if (gt_is_ok(e) && getenv("GT_SIM_ROOT") != NULL) {
        e = gt_sim_root_set(getenv("GT_SIM_ROOT"));  // made once, before the ranks share it
    }
    if (!gt_is_ok(e)) {
        fprintf(stderr, "fixture: %s\n", e.msg);
        return 1;
    }
    return 0;
}

// Sim evidence of another executable: a trainer the agreement does not list.
static gt_err produce_other(void *ctx, const uint8_t rd[GT_REPORT_DATA_BYTES], gt_buf *evidence)
{
    (void)ctx;
    gt_collect_params p = {.type = GT_TEE_SIM, .sim_exe = "/bin/sh"};
    gt_evidence ev;
    GT_TRY(gt_attest_collect(&ev, &p, rd));
    gt_err err = gt_evidence_encode(&ev, evidence);
    gt_evidence_free(&ev);
    return err;
}
static const gt_device_attester other_trainer = {.produce = produce_other};

static gt_err open_dev(gt_device **dev, const gt_device_attester *att)
{
    if (getenv("GT_SIM_ROOT") != NULL) {
        GT_TRY(gt_sim_root_set(getenv("GT_SIM_ROOT")));
    }
    static char doc[4096];
    static gt_agreement a;
    GT_TRY(agreement_doc(doc, sizeof doc, (uint32_t)nranks, NULL));
    GT_TRY(gt_agreement_parse(&a, (const uint8_t *)doc, strlen(doc)));
    gt_device_config cfg = {.kind = GT_DEVICE_CPU, .threads = 1, .attester = att};
    GT_TRY(gt_device_open(dev, &cfg));
    gt_device_outputs o;
    gt_agreement_device_outputs(&a, &o);
    return gt_device_declare_outputs(*dev, &o, (gt_span){a.doc, a.doc_len});
}

// Rank r's value at i: small integers, so that every order of summation is exact.
static float value(int r, uint64_t i) { return (float)((r + 1) * (int)(i % 7) - 3); }

static int labelled(void)
{
    const char *c = "labelled";
    gt_device *dev = NULL;
    gt_err e = open_dev(&dev, NULL);
    gt_dbuf buf = 0;
    float *host = malloc(NELEM * sizeof *host);
    if (gt_is_ok(e) && host == NULL) {
        e = gt_errf(GT_E_NOMEM, "out of memory");
    }
    for (uint64_t i = 0; gt_is_ok(e) && i < NELEM; i++) {
        host[i] = value(rank, i);
    }
    if (gt_is_ok(e)) {
        e = gt_device_alloc(dev, NELEM * 4, 0, &buf);
    }
    if (gt_is_ok(e)) {
        e = gt_device_copy_in(dev, buf, 0, host, NELEM * 4);
    }
    if (gt_is_ok(e) && rank == 0) {
        e = gt_device_label_add(dev, buf, DATASET);  // rank 0's gradients are holder data
    }
    gt_ring_device *ep = NULL;
    gt_ring *ring = NULL;
    if (gt_is_ok(e)) {
        e = gt_ring_device_admit(&ep, dev, MPI_COMM_WORLD, NULL);
    }
    if (gt_is_ok(e)) {
        uint8_t run[16];
        gt_ring_device_set_buffer(ep, buf);
        gt_ring_device_run_id(ep, run);
        gt_ring_opts ro = {.bucket_bytes = 64u << 10, .window = 2, .timeout_ms = 10000};
        e = gt_ring_new(&ring, MPI_COMM_WORLD, run, &ro);
    }
    if (gt_is_ok(e)) {
        gt_ring_endpoint end = gt_ring_device_endpoint(ep);
        e = gt_ring_allreduce(ring, &end, NELEM, 3);
    }
    int bad = gt_is_ok(e) ? 0 : fail(c, "the device all-reduce failed", e);
    // The sum carries rank 0's label on every rank now: the trainer cannot read it back.
    gt_err out = bad ? GT_OK : gt_device_copy_out(dev, host, buf, 0, 4);
    if (!bad && (out.code != GT_E_POLICY || strstr(out.msg, "d77a1122") == NULL)) {
        bad = fail(c, "copy_out of the summed gradients was not refused naming the label", out);
    }
    // Checked inside the trusted base (cpu: the trainer's process is the device).
    if (!bad) {
        e = gt_device_inproc_read(dev, host, buf, 0, NELEM * 4);
        bad = gt_is_ok(e) ? 0 : fail(c, "inproc_read", e);
    }
    for (uint64_t i = 0; !bad && i < NELEM; i++) {
        float want = 0.0f;
        for (int r = 0; r < nranks; r++) {
            want += value(r, i);
        }
        if (host[i] != want) {
            printf("dtrain_test[%d] %s: FAIL: element %llu is %g, expected %g\n", rank, c,
                   (unsigned long long)i, host[i], want);
            bad = 1;
        }
    }
    gt_ring_free(ring);
    gt_ring_device_free(ep);
    gt_device_close(dev);
    free(host);
    if (!bad) {
        printf("dtrain_test[%d] %s: ok: %d floats summed by the devices, exact; copy_out "
               "refused (%s)\n", rank, c, NELEM, out.msg);
    }
    return bad;
}

// An admission that must fail on every rank with `want` in its message.
static int admission_fails(const char *c, gt_device *dev, const gt_ring_device_opts *o,
                           const char *want)
{
    gt_ring_device *ep = NULL;
    gt_err e = gt_ring_device_admit(&ep, dev, MPI_COMM_WORLD, o);
    gt_ring_device_free(ep);
    if (gt_is_ok(e)) {
        return fail(c, "admission succeeded", e);
    }
    if (strstr(e.msg, want) == NULL) {
        return fail(c, want, e);
    }
    printf("dtrain_test[%d] %s: ok: %s\n", rank, c, e.msg);
    return 0;
}

static int refused(void)
{
    gt_device *dev = NULL;
    gt_err e = open_dev(&dev, rank == nranks - 1 ? &other_trainer : NULL);
    if (!gt_is_ok(e)) {
        return fail("refused", "open", e);
    }
    char want[64];
    snprintf(want, sizeof want, "refused rank %d's hello", nranks - 1);
    int bad = admission_fails("refused", dev, NULL, want);
    gt_device_close(dev);
    return bad;
}

typedef struct {
    uint8_t old[GT_PEER_HELLO_MAX];
    size_t old_len;
    bool replace;
} replay_ctx;

// The first admission keeps rank 0's hello; the second sends that one instead of the new.
static void replay_hook(void *ctx, uint8_t *hello, size_t cap, size_t *len)
{
    replay_ctx *r = ctx;
    if (!r->replace && *len <= sizeof r->old) {
        memcpy(r->old, hello, *len);
        r->old_len = *len;
    } else if (r->replace && r->old_len <= cap) {
        memcpy(hello, r->old, r->old_len);
        *len = r->old_len;
    }
}

static int replay(void)
{
    gt_device *dev = NULL;
    gt_err e = open_dev(&dev, NULL);
    static replay_ctx rc;
    gt_ring_device_opts o = {.timeout_ms = 10000, .hello_hook = rank == 0 ? replay_hook : NULL,
                             .hook_ctx = &rc};
    gt_ring_device *ep = NULL;
    if (gt_is_ok(e)) {
        e = gt_ring_device_admit(&ep, dev, MPI_COMM_WORLD, &o);  // run 1: honest
    }
    gt_ring_device_free(ep);
    if (!gt_is_ok(e)) {
        gt_device_close(dev);
        return fail("replay", "the honest admission failed", e);
    }
    rc.replace = true;  // run 2: rank 0 sends run 1's hello
    int bad = admission_fails("replay", dev, &o, "run id differs");
    gt_device_close(dev);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "fixture") == 0) {
        return fixture(argc, argv);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *c = argc == 2 ? argv[1] : "";
    int bad = strcmp(c, "labelled") == 0  ? labelled()
              : strcmp(c, "refused") == 0 ? refused()
              : strcmp(c, "replay") == 0  ? replay()
                                          : fail(c, "unknown case", GT_OK);
    fflush(stdout);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
