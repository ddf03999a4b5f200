// The device endpoint: the rank's own device seals and opens every chunk of its gradient buffer
// (gt_device_peer_seal / _open), so plaintext gradients never leave it and this process relays
// ciphertext only. Admission is attested: every device's hello is allgathered, every device
// appraises every other one, and the ranks compare their verdicts and run ids before the ring
// starts, so a refusal or a replayed hello stops every rank with the same reason.
#include <gputravel/collective.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gt_ring_device {
    gt_device *dev;
    gt_dbuf buf;
    uint8_t run[16];
};

// MPI_Iallgather of n bytes per rank, polled against a deadline: a rank that never arrives
// cannot hang the admission.
static gt_err allgather_bytes(MPI_Comm comm, const void *mine, int n, void *all, int timeout_ms,
                              const char *what)
{
    MPI_Request req;
    int rc = MPI_Iallgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, comm, &req);
    GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "admission: MPI_Iallgather of %s failed (%d)", what,
              rc);
    double deadline = gt_now_seconds() + timeout_ms / 1000.0;
    for (;;) {
        int done = 0;
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "admission: exchange of %s failed (%d)", what,
                  rc);
        if (done) {
            return GT_OK;
        }
        GT_ENSURE(gt_now_seconds() < deadline, GT_E_TIMEOUT,
                  "admission: not every rank sent its %s within %d ms", what, timeout_ms);
        sched_yield();
    }
}

gt_err gt_ring_hello_slot_parse(gt_span slot, gt_span *hello)
{
    gt_reader r = gt_reader_init(slot.data, slot.len);
    uint32_t n = 0;
    GT_TRY(gt_reader_u32le(&r, &n));
    GT_ENSURE(n >= 1 && n <= GT_PEER_HELLO_MAX, GT_E_FORMAT, "hello slot: a hello of %u bytes",
              n);
    return gt_reader_span(&r, n, hello);
}

void gt_ring_verdict_encode(uint8_t out[GT_RING_VERDICT_BYTES], const gt_ring_verdict *v)
{
    memset(out, 0, GT_RING_VERDICT_BYTES);
    size_t n = v->ok ? 0 : strnlen(v->reason, GT_RING_REASON_MAX);
    out[0] = v->ok ? 1 : 0;
    memcpy(out + 1, v->run, 16);
    out[17] = (uint8_t)(n & 0xff);
    out[18] = (uint8_t)(n >> 8);
    uint8_t *text = out + 19;  // GT_RING_REASON_MAX bytes, n of them used
    memcpy(text, v->reason, n);
    for (size_t i = 0; i < n; i++) {  // only printable ASCII travels: the others print it
        text[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
    }
}

gt_err gt_ring_verdict_parse(gt_span in, gt_ring_verdict *v)
{
    memset(v, 0, sizeof *v);
    GT_ENSURE(in.len >= GT_RING_VERDICT_BYTES, GT_E_TRUNCATED, "verdict: %zu bytes, need %d",
              in.len, GT_RING_VERDICT_BYTES);
    gt_reader r = gt_reader_init(in.data, GT_RING_VERDICT_BYTES);
    uint8_t ok = 0;
    uint16_t n = 0;
    GT_TRY(gt_reader_u8(&r, &ok));
    GT_TRY(gt_reader_bytes(&r, v->run, 16));
    GT_TRY(gt_reader_u16le(&r, &n));
    GT_ENSURE(ok <= 1 && n <= GT_RING_REASON_MAX, GT_E_FORMAT, "verdict: ok %u, reason of %u bytes",
              ok, n);
    GT_TRY(gt_reader_bytes(&r, v->reason, n));
    for (uint16_t i = 0; i < n; i++) {
        GT_ENSURE(v->reason[i] >= 0x20 && v->reason[i] < 0x7f, GT_E_FORMAT,
                  "verdict: reason byte %u is not printable", i);
    }
    while (gt_reader_left(&r) > 0) {
        uint8_t pad = 0;
        GT_TRY(gt_reader_u8(&r, &pad));
        GT_ENSURE(pad == 0, GT_E_FORMAT, "verdict: padding is not zero");
    }
    v->ok = ok == 1;
    return GT_OK;
}

// This device admits every other rank's hello, then makes the run id. The first refusal is the
// verdict's reason.
static void admit_all(gt_device *dev, const uint8_t *slots, int rank, int nranks,
                      gt_ring_verdict *v)
{
    gt_err err = GT_OK;
    for (int p = 0; p < nranks && gt_is_ok(err); p++) {
        gt_span hello;
        if (p == rank) {
            continue;
        }
        err = gt_ring_hello_slot_parse(
            (gt_span){slots + (size_t)p * GT_RING_HELLO_SLOT, GT_RING_HELLO_SLOT}, &hello);
        if (gt_is_ok(err)) {
            err = gt_device_peer_admit(dev, (uint32_t)p, hello.data, hello.len);
        }
        if (!gt_is_ok(err)) {
            err = gt_err_wrap(err, "rank %d refused rank %d's hello", rank, p);
        }
    }
    if (gt_is_ok(err)) {
        err = gt_device_peer_run_id(dev, v->run);
    }
    v->ok = gt_is_ok(err);
    if (!v->ok) {
        snprintf(v->reason, sizeof v->reason, "%s: %s", gt_code_name(err.code), err.msg);
    }
}

// Every rank's verdict, judged alike on every rank: the first refusal, else a run id other than
// this device's (a hello replayed from another run is admitted by the device as a stranger, but
// gives another run id). The ring uses this device's own run id: a forged verdict can change
// only which error is printed, since the devices refuse chunks of another run.
static gt_err judge(const uint8_t *all, int rank, int nranks, const gt_ring_verdict *mine)
{
    gt_ring_verdict v;
    for (int p = 0; p < nranks; p++) {
        GT_TRY(gt_err_wrap(gt_ring_verdict_parse((gt_span){all + (size_t)p * GT_RING_VERDICT_BYTES,
                                                           GT_RING_VERDICT_BYTES}, &v),
                           "admission: rank %d's verdict", p));
        GT_ENSURE(v.ok, GT_E_AUTH, "admission failed: %s", v.reason);
    }
    for (int p = 0; p < nranks; p++) {
        GT_TRY(gt_ring_verdict_parse(
            (gt_span){all + (size_t)p * GT_RING_VERDICT_BYTES, GT_RING_VERDICT_BYTES}, &v));
        GT_ENSURE(memcmp(v.run, mine->run, 16) == 0, GT_E_AUTH,
                  "admission failed: rank %d's run id differs from rank %d's (a hello of another "
                  "run was admitted somewhere)", p, rank);
    }
    return GT_OK;
}

static gt_err exchange(gt_ring_device *d, MPI_Comm comm, const gt_ring_device_opts *o,
                       uint8_t *slots, int rank, int nranks)
{
    int timeout_ms = o != NULL && o->timeout_ms > 0 ? o->timeout_ms : 30000;
    uint8_t *mine = calloc(1, GT_RING_HELLO_SLOT), *all = calloc((size_t)nranks,
                                                                 GT_RING_VERDICT_BYTES);
    uint8_t enc[GT_RING_VERDICT_BYTES];
    gt_ring_verdict v = {0};
    gt_err err = mine && all ? GT_OK : gt_errf(GT_E_NOMEM, "admission: out of memory");
    size_t len = 0, cap = GT_PEER_HELLO_MAX;
    if (gt_is_ok(err)) {
        err = gt_device_peer_hello(d->dev, (uint32_t)rank, (uint32_t)nranks, mine + 4, cap, &len);
    }
    if (gt_is_ok(err) && o != NULL && o->hello_hook != NULL) {
        o->hello_hook(o->hook_ctx, mine + 4, cap, &len);  // tests: replay another run's
    }
    if (gt_is_ok(err)) {
        for (int i = 0; i < 4; i++) {
            mine[i] = (uint8_t)(len >> (8 * i));
        }
        err = allgather_bytes(comm, mine, GT_RING_HELLO_SLOT, slots, timeout_ms, "hello");
    }
    if (gt_is_ok(err)) {
        admit_all(d->dev, slots, rank, nranks, &v);
        gt_ring_verdict_encode(enc, &v);
        err = allgather_bytes(comm, enc, GT_RING_VERDICT_BYTES, all, timeout_ms, "verdict");
    }
    if (gt_is_ok(err)) {
        err = judge(all, rank, nranks, &v);
    }
    if (gt_is_ok(err)) {
        memcpy(d->run, v.run, 16);
    }
    free(mine);
    free(all);
    return err;
}

gt_err gt_ring_device_admit(gt_ring_device **out, gt_device *dev, MPI_Comm comm,
                            const gt_ring_device_opts *opts)
{
    *out = NULL;
    int rank = 0, nranks = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    gt_ring_device *d = calloc(1, sizeof *d);
    uint8_t *slots = calloc((size_t)nranks, GT_RING_HELLO_SLOT);
    gt_err err = d && slots ? GT_OK : gt_errf(GT_E_NOMEM, "admission: out of memory");
    if (gt_is_ok(err)) {
        d->dev = dev;
        err = exchange(d, comm, opts, slots, rank, nranks);
    }
    free(slots);
    if (!gt_is_ok(err)) {
        free(d);
        return err;
    }
    *out = d;
    return GT_OK;
}

void gt_ring_device_free(gt_ring_device *d) { free(d); }  // the keys are the device's

void gt_ring_device_set_buffer(gt_ring_device *d, gt_dbuf buf) { d->buf = buf; }

void gt_ring_device_run_id(const gt_ring_device *d, uint8_t run[16]) { memcpy(run, d->run, 16); }

static gt_err dev_seal(void *ctx, const gt_peer_hdr *h, uint8_t *out, size_t cap, size_t *len)
{
    gt_ring_device *d = ctx;
    return gt_device_peer_seal(d->dev, h, d->buf, out, cap, len);
}

static gt_err dev_open(void *ctx, const gt_peer_hdr *h, const uint8_t *in, size_t len, int mode)
{
    gt_ring_device *d = ctx;
    return gt_device_peer_open(d->dev, h, in, len, d->buf, mode);
}

gt_ring_endpoint gt_ring_device_endpoint(gt_ring_device *d)
{
    return (gt_ring_endpoint){.ctx = d, .seal = dev_seal, .open = dev_open};
}
