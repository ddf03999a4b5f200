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
//   mpirun -np N gt_dtrain_test zero         ZeRO-1 against replicated state on the same batches, 4
//                                            steps with clipping: the ranks' m and v shards
//                                            concatenated equal the replicated m and v, and the
//                                            parameters the replicated ones (within 1e-5 of the
//                                            largest magnitude: the sums run in other orders)
// Each rank prints "dtrain_test[r] CASE: ok" or why not; exit 0 only when all its checks held.
#include <gputravel/attest.h>
#include <gputravel/data.h>
#include <gputravel/device.h>
#include <gputravel/collective.h>
#include <gputravel/train.h>
#include <gputravel/travel.h>

#include <math.h>

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
             "\"identity_key\":\"11%062d\",\"endpoint\":\"127.0.0.1:1\",\"dataset_id\":\"%032d\","
             "\"token_budget\":100000,\"max_uses_per_chunk\":1}],\"trainer\":{"
             "\"accepted_measurements\":[\"%s\"],\"ranks\":%u},\"device\":{"
             "\"accepted_measurements\":[\"%s\"]},\"allow_simulation\":true,\"output\":{"
             "\"kind\":\"loss_only\"}}", 1, 0, hex, ranks, hex);
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

// ---- zero: ZeRO-1's shards against the replicated state -------------------------------------

typedef struct {
    gt_device *dev;
    gt_ring_device *ep;
    gt_ring *ring;
    gt_gpt2 *rep, *zero;  // the same initial weights
    gt_dbuf inp, tgt;
} zworld;

enum { ZB = 2, ZT = 8, ZSTEPS = 4 };

static gt_err zworld_open(zworld *z)
{
    memset(z, 0, sizeof *z);
    GT_TRY(open_dev(&z->dev, NULL));
    gt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 64, .padded_vocab_size = 64,
                          .num_layers = 1, .num_heads = 2, .channels = 16};
    GT_TRY(gt_gpt2_create(&z->rep, z->dev, &cfg));
    GT_TRY(gt_gpt2_create(&z->zero, z->dev, &cfg));
    GT_TRY(gt_gpt2_init_random(z->rep, 11));
    GT_TRY(gt_gpt2_init_random(z->zero, 11));
    GT_TRY(gt_device_alloc(z->dev, ZB * ZT * 4, 0, &z->inp));
    GT_TRY(gt_device_alloc(z->dev, ZB * ZT * 4, 0, &z->tgt));
    GT_TRY(gt_ring_device_admit(&z->ep, z->dev, MPI_COMM_WORLD, NULL));
    uint8_t run[16];
    gt_ring_device_run_id(z->ep, run);
    gt_ring_opts ro = {.bucket_bytes = 16u << 10, .window = 2, .timeout_ms = 10000};
    return gt_ring_new(&z->ring, MPI_COMM_WORLD, run, &ro);
}

static void zworld_close(zworld *z)
{
    gt_ring_free(z->ring);
    gt_ring_device_free(z->ep);
    gt_gpt2_free(z->rep);
    gt_gpt2_free(z->zero);
    gt_device_close(z->dev);
}

// This rank's batch of step s (its own tokens), forward and backward with the 1/N of the mean.
static gt_err zbatch(zworld *z, gt_gpt2 *m, int s)
{
    int32_t tok[ZB * ZT + 1];
    for (int i = 0; i <= ZB * ZT; i++) {
        tok[i] = (int32_t)((i * 5 + rank * 17 + s * 3) % 64);
    }
    GT_TRY(gt_device_copy_in(z->dev, z->inp, 0, tok, ZB * ZT * 4));
    GT_TRY(gt_device_copy_in(z->dev, z->tgt, 0, tok + 1, ZB * ZT * 4));
    float loss = 0.0f;
    GT_TRY(gt_gpt2_zero_grad(m));
    return gt_gpt2_forward_backward(m, z->inp, z->tgt, ZB, ZT, 1.0f / (float)nranks, &loss);
}

static gt_err zring(zworld *z, gt_dbuf buf, uint64_t n, uint64_t step, int phase)
{
    gt_ring_device_set_buffer(z->ep, buf);
    gt_ring_endpoint end = gt_ring_device_endpoint(z->ep);
    return phase == GT_RING_PHASE_REDUCE_SCATTER ? gt_ring_reduce_scatter(z->ring, &end, n, step)
           : phase == GT_RING_PHASE_ALLGATHER    ? gt_ring_allgather(z->ring, &end, n, step)
                                                 : gt_ring_allreduce(z->ring, &end, n, step);
}

// Both models through ZSTEPS steps: replicated (all-reduce, full update) and ZeRO-1
// (reduce-scatter, partial sums of squares all-gathered, shard update, parameter all-gather).
static gt_err zsteps(zworld *z, uint64_t off, uint64_t len)
{
    gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                    .grad_clip = 0.5f};
    uint64_t n = gt_gpt2_num_params(z->rep);
    gt_dbuf grads = 0, partials = 0;
    gt_gpt2_state_bufs sb;
    GT_TRY(gt_gpt2_zero_shard(z->zero, off, len, (uint32_t)rank, (uint32_t)nranks));
    for (int s = 0; s < ZSTEPS; s++) {
        float norm_rep = 0.0f, norm_zero = 0.0f;
        GT_TRY(zbatch(z, z->rep, s));
        GT_TRY(gt_gpt2_grads_buf(z->rep, &grads));
        GT_TRY(zring(z, grads, n, (uint64_t)s, GT_RING_PHASE_ALLREDUCE));
        GT_TRY(gt_gpt2_update(z->rep, &opt, 1e-2f, &norm_rep));
        GT_TRY(zbatch(z, z->zero, s));
        GT_TRY(gt_gpt2_grads_buf(z->zero, &grads));
        GT_TRY(zring(z, grads, n, (uint64_t)s, GT_RING_PHASE_REDUCE_SCATTER));
        GT_TRY(gt_gpt2_zero_partial(z->zero, &partials));
        GT_TRY(zring(z, partials, 2 * (uint64_t)nranks, (uint64_t)s, GT_RING_PHASE_ALLGATHER));
        GT_TRY(gt_gpt2_update(z->zero, &opt, 1e-2f, &norm_zero));
        GT_TRY(gt_gpt2_state_bufs_get(z->zero, false, &sb));
        GT_TRY(zring(z, sb.params, n, (uint64_t)s, GT_RING_PHASE_ALLGATHER));
        GT_ENSURE(fabsf(norm_rep - norm_zero) <= 1e-5f * norm_rep && norm_rep > 0.5f, GT_E_STATE,
                  "step %d: norm %.9g replicated, %.9g ZeRO-1 (clipping must bite: > 0.5)", s,
                  norm_rep, norm_zero);
    }
    return GT_OK;
}

// Largest |a - b| over n, against the largest |a|.
static double zdiff(const float *a, const float *b, size_t n, double *mag)
{
    double d = 0.0;
    *mag = 0.0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        *mag = fmax(*mag, fabs((double)a[i]));
    }
    return d;
}

// Rank 0 receives every rank's shard of m and v (test only: MPI carries plaintext here, on an
// unlabelled toy model) and lays them end to end.
static gt_err zgather(float *mine_m, float *mine_v, uint64_t len, float *all_m, float *all_v,
                      uint64_t n)
{
    int *counts = calloc((size_t)nranks, sizeof *counts), *displs = calloc((size_t)nranks, sizeof *displs);
    GT_ENSURE(counts && displs, GT_E_NOMEM, "out of memory");
    for (int r = 0; r < nranks; r++) {
        uint64_t o = 0, l = 0;
        gt_ring_shard(n, (uint32_t)nranks, (uint32_t)r, &o, &l);
        counts[r] = (int)l;
        displs[r] = (int)o;
    }
    int rc = MPI_Gatherv(mine_m, (int)len, MPI_FLOAT, all_m, counts, displs, MPI_FLOAT, 0,
                         MPI_COMM_WORLD);
    rc |= MPI_Gatherv(mine_v, (int)len, MPI_FLOAT, all_v, counts, displs, MPI_FLOAT, 0,
                      MPI_COMM_WORLD);
    free(counts);
    free(displs);
    GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "MPI_Gatherv failed");
    return GT_OK;
}

static gt_err zcompare(zworld *z, uint64_t off, uint64_t len, double worst[3])
{
    size_t n = gt_gpt2_num_params(z->rep);
    float *buf = calloc(7 * n, sizeof *buf);
    GT_ENSURE(buf != NULL, GT_E_NOMEM, "out of memory");
    float *rm = buf, *rv = buf + n, *zm = buf + 2 * n, *zv = buf + 3 * n, *am = buf + 4 * n,
          *av = buf + 5 * n, *p = buf + 6 * n;
    gt_gpt2_state_bufs sb;
    gt_err e = gt_gpt2_state_bufs_get(z->rep, false, &sb);
    if (gt_is_ok(e)) {
        e = gt_device_copy_out(z->dev, rm, sb.m, 0, n * 4);
    }
    if (gt_is_ok(e)) {
        e = gt_device_copy_out(z->dev, rv, sb.v, 0, n * 4);
    }
    if (gt_is_ok(e)) {
        e = gt_gpt2_zero_moments_read(z->zero, zm, zv, len);
    }
    if (gt_is_ok(e)) {
        e = zgather(zm, zv, len, am, av, n);
    }
    double mag = 0.0;
    for (int i = 0; i < 3; i++) {
        worst[i] = 0.0;
    }
    if (gt_is_ok(e) && rank == 0) {  // the shards end to end against the replicated state
        worst[0] = zdiff(rm, am, n, &mag) / mag;
        worst[1] = zdiff(rv, av, n, &mag) / mag;
    }
    if (gt_is_ok(e)) {  // and every rank's parameters against its replicated ones
        e = gt_gpt2_params_read(z->rep, rm, n);
    }
    if (gt_is_ok(e)) {
        e = gt_gpt2_params_read(z->zero, p, n);
    }
    if (gt_is_ok(e)) {
        worst[2] = zdiff(rm, p, n, &mag) / mag;
    }
    (void)off;
    free(buf);
    return e;
}

static int zero_case(void)
{
    const char *c = "zero";
    zworld z;
    gt_err e = zworld_open(&z);
    uint64_t off = 0, len = 0;
    if (gt_is_ok(e)) {
        gt_ring_shard(gt_gpt2_num_params(z.rep), (uint32_t)nranks, (uint32_t)rank, &off, &len);
        e = zsteps(&z, off, len);
    }
    double worst[3] = {0};
    if (gt_is_ok(e)) {
        e = zcompare(&z, off, len, worst);
    }
    // A model whose AdamW state is sharded has no full moments to save or export.
    gt_gpt2_state_bufs sb;
    gt_err full = gt_is_ok(e) ? gt_gpt2_state_bufs_get(z.zero, true, &sb) : GT_OK;
    zworld_close(&z);
    if (!gt_is_ok(e)) {
        return fail(c, "the two runs", e);
    }
    if (full.code != GT_E_STATE) {
        return fail(c, "a sharded model's full moments were not refused", full);
    }
    if (worst[0] > 1e-5 || worst[1] > 1e-5 || worst[2] > 1e-5) {
        printf("dtrain_test[%d] %s: FAIL: m %.3g, v %.3g, params %.3g of the largest (1e-5)\n",
               rank, c, worst[0], worst[1], worst[2]);
        return 1;
    }
    if (rank == 0) {
        printf("dtrain_test[0] %s: ok: every rank's m and v shard end to end within %.2g, %.2g "
               "of the replicated m and v's largest magnitude (1e-5)\n", c, worst[0], worst[1]);
    }
    printf("dtrain_test[%d] %s: ok: shard [%llu, +%llu); parameters within %.2g of the "
           "replicated ones' largest magnitude (1e-5)\n", rank, c, (unsigned long long)off,
           (unsigned long long)len, worst[2]);
    return 0;
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
              : strcmp(c, "zero") == 0    ? zero_case()
                                          : fail(c, "unknown case", GT_OK);
    fflush(stdout);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
