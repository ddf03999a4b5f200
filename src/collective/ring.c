// The encrypted ring all-reduce: reduce-scatter then all-gather, every hop a sealed chunk
// through the endpoint, pipelined over a window of buckets (docs/collective.md "The ring").
//
// Order is what makes sequence numbers work: within a window, round h seals bucket 0, 1, ...
// of hop h, and the receiver opens them in the same order one round later, so the chunks of a
// direction are sealed and opened in one sequence on both sides, whatever MPI's timing.
#include <gputravel/collective.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_VOTE 1  // end-of-collective word of each rank to every other: ok, or why not
#define TAG_SLOT0 16  // slot s's chunks travel on tag TAG_SLOT0 + s (in order per tag)
#define VOTE_BYTES 256  // collective index (8, LE) || reason text ("" = ok)
#define MAX_WINDOW 64
#define SPIN_SECONDS 0.0005

typedef struct {
    uint8_t *send[2];  // alternate by hop: one may still be in MPI while the next is sealed
    uint8_t *recv;
    MPI_Request sreq[2], rreq;
    gt_peer_hdr want;  // what the chunk now arriving in recv must be (nelem 0: none comes)
    int want_mode;
} slot;

struct gt_ring {
    MPI_Comm comm;
    int rank, nranks;
    uint8_t run[16];
    gt_ring_opts opts;
    uint64_t bucket_elems;
    size_t chunk_cap;
    slot *slots;
    MPI_Request vote_req;  // always posted: a failure anywhere reaches every wait
    uint8_t vote_in[VOTE_BYTES];
    uint64_t coll;   // collectives begun on this ring (the vote's index)
    int oks;         // ok votes counted for collective `coll`
    int oks_next;    // ... for `coll` + 1: a rank with only empty chunks finishes it early
    char what_send[48], what_recv[48];  // "chunk from rank 3", for timeouts
    struct gt_ring *next_dead;
    bool dead;
};

static int left_of(const gt_ring *r) { return (r->rank + r->nranks - 1) % r->nranks; }
static int right_of(const gt_ring *r) { return (r->rank + 1) % r->nranks; }

static void slot_free_all(gt_ring *r)
{
    for (uint32_t s = 0; r->slots != NULL && s < r->opts.window; s++) {
        free(r->slots[s].send[0]);
        free(r->slots[s].send[1]);
        free(r->slots[s].recv);
    }
    free(r->slots);
}

static gt_err opts_fill(gt_ring_opts *o, const gt_ring_opts *given, int nranks)
{
    *o = given ? *given : (gt_ring_opts){0};
    o->bucket_bytes = o->bucket_bytes ? o->bucket_bytes : 4u << 20;
    o->window = o->window ? o->window : 2;
    o->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
    GT_ENSURE(o->window <= MAX_WINDOW, GT_E_ARG, "ring: window %u (at most %d)", o->window,
              MAX_WINDOW);
    GT_ENSURE(o->bucket_bytes >= sizeof(float) * (uint64_t)nranks &&
                  o->bucket_bytes / sizeof(float) / (uint64_t)nranks < GT_PEER_MAX_CHUNK_ELEMS,
              GT_E_ARG, "ring: bucket of %llu bytes for %d ranks",
              (unsigned long long)o->bucket_bytes, nranks);
    GT_ENSURE(o->timeout_ms > 0, GT_E_ARG, "ring: timeout %d ms", o->timeout_ms);
    GT_ENSURE(nranks < 1 << (GT_RING_PHASE_SHIFT - 1), GT_E_ARG,
              "ring: %d ranks (the hop field holds hops below 2^%d)", nranks, GT_RING_PHASE_SHIFT);
    return GT_OK;
}

static gt_err slots_alloc(gt_ring *r)
{
    r->slots = calloc(r->opts.window, sizeof *r->slots);
    GT_ENSURE(r->slots != NULL, GT_E_NOMEM, "ring: out of memory");
    for (uint32_t s = 0; s < r->opts.window; s++) {  // MPI_REQUEST_NULL is not all zeros
        r->slots[s].sreq[0] = r->slots[s].sreq[1] = r->slots[s].rreq = MPI_REQUEST_NULL;
    }
    for (uint32_t s = 0; s < r->opts.window; s++) {
        slot *sl = &r->slots[s];
        sl->send[0] = malloc(r->chunk_cap);
        sl->send[1] = malloc(r->chunk_cap);
        sl->recv = malloc(r->chunk_cap);
        GT_ENSURE(sl->send[0] && sl->send[1] && sl->recv, GT_E_NOMEM, "ring: out of memory");
    }
    return GT_OK;
}

gt_err gt_ring_new(gt_ring **out, MPI_Comm comm, const uint8_t run[16], const gt_ring_opts *opts)
{
    *out = NULL;
    gt_ring *r = calloc(1, sizeof *r);
    GT_ENSURE(r != NULL, GT_E_NOMEM, "ring: out of memory");
    r->comm = MPI_COMM_NULL;
    r->vote_req = MPI_REQUEST_NULL;
    MPI_Comm_rank(comm, &r->rank);
    MPI_Comm_size(comm, &r->nranks);
    memcpy(r->run, run, sizeof r->run);
    snprintf(r->what_send, sizeof r->what_send, "send completed to rank %d", right_of(r));
    snprintf(r->what_recv, sizeof r->what_recv, "chunk from rank %d", left_of(r));
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, opts_fill(&r->opts, opts, r->nranks), fail);
    r->bucket_elems = r->opts.bucket_bytes / sizeof(float);
    r->chunk_cap = gt_peer_chunk_bytes((r->bucket_elems + (uint64_t)r->nranks - 1) /
                                       (uint64_t)r->nranks);
    GT_TRY_GOTO(err, slots_alloc(r), fail);
    // A private communicator: our tags meet nobody else's, and errors come back as codes.
    GT_ENSURE_GOTO(err, MPI_Comm_dup(comm, &r->comm) == MPI_SUCCESS, fail, GT_E_PEER,
                   "ring: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(r->comm, MPI_ERRORS_RETURN);
    GT_ENSURE_GOTO(err, MPI_Irecv(r->vote_in, VOTE_BYTES, MPI_BYTE, MPI_ANY_SOURCE, TAG_VOTE,
                                  r->comm, &r->vote_req) == MPI_SUCCESS,
                   fail, GT_E_PEER, "ring: MPI_Irecv failed");
    *out = r;
    return GT_OK;
fail:
    gt_ring_free(r);
    return err;
}

// Pending requests of a dead ring: receives are cancelled; sends are let go (MPI finishes or
// drops them with the communicator).
static void drop_request(MPI_Request *q, bool is_send)
{
    if (*q == MPI_REQUEST_NULL) {
        return;
    }
    if (is_send) {
        MPI_Request_free(q);
        return;
    }
    MPI_Cancel(q);
    MPI_Wait(q, MPI_STATUS_IGNORE);
}

static void drop_all(gt_ring *r)
{
    for (uint32_t s = 0; r->slots != NULL && s < r->opts.window; s++) {
        drop_request(&r->slots[s].rreq, false);
        drop_request(&r->slots[s].sreq[0], true);
        drop_request(&r->slots[s].sreq[1], true);
    }
}

// Dead rings (gt_ring_free below). One thread per rank drives MPI (MPI_THREAD_SINGLE).
static gt_ring *dead_rings;

void gt_ring_free(gt_ring *r)
{
    if (r == NULL) {
        return;
    }
    drop_all(r);
    drop_request(&r->vote_req, false);
    // A dead ring keeps its communicator until MPI_Finalize: chunks of the dead run may still
    // be on their way, and a freed communicator's context id is reused by the next one, which
    // would receive them (they would be rejected, but would kill that run too). It keeps its
    // send buffers as well: MPI may still be reading sends that were let go. (Ciphertext only;
    // the job is about to end.)
    if (r->dead) {
        r->next_dead = dead_rings;  // kept, and reachable, until the process ends
        dead_rings = r;
        return;
    }
    if (r->comm != MPI_COMM_NULL) {
        MPI_Comm_free(&r->comm);
    }
    slot_free_all(r);
    free(r);
}

void gt_ring_segment(uint64_t bucket_off, uint64_t bucket_len, uint32_t nranks, uint32_t k,
                     uint64_t *off, uint64_t *len)
{
    uint64_t base = bucket_len / nranks, rem = bucket_len % nranks;
    *off = bucket_off + k * base + (k < rem ? k : rem);
    *len = base + (k < rem ? 1 : 0);
}

// ---- waiting, with a deadline and an ear for aborts ------------------------------------------

// Reads the votes that have arrived: ok votes of this collective are counted, a failure ends
// the wait with the failed rank's reason. The vote is untrusted bytes like any other.
static gt_err check_votes(gt_ring *r)
{
    for (;;) {
        int got = 0;
        MPI_Status st;
        if (MPI_Test(&r->vote_req, &got, &st) != MPI_SUCCESS || !got) {
            return GT_OK;
        }
        int len = 0;
        MPI_Get_count(&st, MPI_BYTE, &len);
        gt_reader rd = gt_reader_init(r->vote_in, len > 0 ? (size_t)len : 0);
        uint64_t coll = 0;
        bool parsed = gt_is_ok(gt_reader_u64le(&rd, &coll));
        char reason[VOTE_BYTES];
        size_t n = gt_reader_left(&rd) < sizeof reason - 1 ? gt_reader_left(&rd)
                                                             : sizeof reason - 1;
        memcpy(reason, r->vote_in + rd.pos, n);
        reason[n] = '\0';
        int rc = MPI_Irecv(r->vote_in, VOTE_BYTES, MPI_BYTE, MPI_ANY_SOURCE, TAG_VOTE, r->comm,
                           &r->vote_req);
        GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "ring: MPI_Irecv failed (%d)", rc);
        GT_ENSURE(parsed, GT_E_PEER, "rank %d sent a malformed vote", st.MPI_SOURCE);
        GT_ENSURE(reason[0] == '\0', GT_E_PEER, "rank %d aborted the collective: %s",
                  st.MPI_SOURCE, reason);
        r->oks += coll == r->coll ? 1 : 0;
        r->oks_next += coll == r->coll + 1 ? 1 : 0;  // kept, not lost: it is never sent again
    }
}

// what: "chunk from rank 3", for the message.
static gt_err wait_one(gt_ring *r, MPI_Request *q, MPI_Status *st, const char *what)
{
    double start = gt_now_seconds(), deadline = start + r->opts.timeout_ms / 1000.0;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(q, &done, st);
        GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "MPI failed on the %s (code %d)", what, rc);
        if (done) {
            return GT_OK;
        }
        GT_TRY(check_votes(r));
        double now = gt_now_seconds();
        GT_ENSURE(now < deadline, GT_E_TIMEOUT,
                  "rank %d: no %s within %d ms (a rank dead or stuck?)", r->rank, what,
                  r->opts.timeout_ms);
        // Spin for short waits (as MPI does); past SPIN_SECONDS, yield: two ranks may share a
        // core, and the one we wait for may need it.
        if (now - start > SPIN_SECONDS) {
            sched_yield();
        }
    }
}

// ---- one window of buckets -------------------------------------------------------------------

typedef struct {
    gt_ring *r;
    const gt_ring_endpoint *ep;
    uint64_t n, step, first_bucket;
    uint32_t count;  // buckets in this window
    uint32_t phase;  // GT_RING_PHASE_*: which hops run, and the buffer's layout
} window;

void gt_ring_shard(uint64_t n, uint32_t nranks, uint32_t rank, uint64_t *off, uint64_t *len)
{
    gt_ring_segment(0, n, nranks, rank, off, len);
}

// The sharded layout (reduce-scatter and all-gather alone): segment k of bucket b is the b-th
// slice of `per` floats of shard k, so that everything a rank owns is one contiguous range.
static void sharded_segment(const window *w, uint32_t b, uint32_t k, uint64_t *off, uint64_t *len)
{
    uint32_t N = (uint32_t)w->r->nranks;
    uint64_t per = w->r->bucket_elems / N, soff = 0, slen = 0, at = (uint64_t)b * per;
    gt_ring_shard(w->n, N, k, &soff, &slen);
    *off = soff + (at < slen ? at : slen);
    *len = at < slen ? (slen - at < per ? slen - at : per) : 0;
}

// The header of the chunk that `from` sends at hop h of bucket b (h within the ring pass:
// 0..N-2 reduce-scatter, N-1..2N-3 all-gather; segment indices as in the summation order of
// collective.h). The sharded layout shifts the segments by one, so that rank r ends the
// reduce-scatter owning shard r (and sends shard r first in the all-gather).
static gt_peer_hdr hop_hdr(const window *w, uint32_t b, uint32_t h, int from, int *mode)
{
    const gt_ring *r = w->r;
    uint32_t N = (uint32_t)r->nranks;
    bool rs = h < N - 1, sharded = w->phase != GT_RING_PHASE_ALLREDUCE;
    uint32_t s = rs ? h : h - (N - 1);
    uint32_t seg = rs ? ((uint32_t)from + 2 * N - s) % N : ((uint32_t)from + 1 + 2 * N - s) % N;
    gt_peer_hdr hd = {.step = w->step, .bucket = b, .hop = w->phase << GT_RING_PHASE_SHIFT | h,
                      .src = (uint32_t)from, .dst = ((uint32_t)from + 1) % N};
    memcpy(hd.run, r->run, sizeof hd.run);
    if (sharded) {
        sharded_segment(w, b, (seg + N - 1) % N, &hd.elem_off, &hd.nelem);
    } else {
        uint64_t boff = b * r->bucket_elems;
        uint64_t blen = w->n - boff < r->bucket_elems ? w->n - boff : r->bucket_elems;
        gt_ring_segment(boff, blen, N, seg, &hd.elem_off, &hd.nelem);
    }
    *mode = rs ? GT_PEER_ADD : GT_PEER_COPY;
    return hd;
}

static gt_err post_recv(const window *w, uint32_t s, uint32_t h)
{
    gt_ring *r = w->r;
    slot *sl = &r->slots[s];
    sl->want = hop_hdr(w, (uint32_t)w->first_bucket + s, h, left_of(r), &sl->want_mode);
    if (sl->want.nelem == 0) {
        return GT_OK;  // an empty segment (a bucket of fewer floats than ranks): no chunk
    }
    int rc = MPI_Irecv(sl->recv, (int)r->chunk_cap, MPI_BYTE, left_of(r), TAG_SLOT0 + (int)s,
                       r->comm, &sl->rreq);
    GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "MPI_Irecv from rank %d failed (%d)", left_of(r),
              rc);
    return GT_OK;
}

static gt_err seal_send(const window *w, uint32_t s, uint32_t h)
{
    gt_ring *r = w->r;
    slot *sl = &r->slots[s];
    MPI_Request *q = &sl->sreq[h % 2];
    GT_TRY(wait_one(r, q, MPI_STATUS_IGNORE, r->what_send));  // hop h-2's is done
    int mode;
    gt_peer_hdr hd = hop_hdr(w, (uint32_t)w->first_bucket + s, h, r->rank, &mode);
    if (hd.nelem == 0) {
        return GT_OK;  // the receiver expects nothing either
    }
    size_t len = 0;
    GT_TRY(w->ep->seal(w->ep->ctx, &hd, sl->send[h % 2], r->chunk_cap, &len));
    if (r->opts.hook != NULL && r->opts.hook->sent != NULL) {
        r->opts.hook->sent(r->opts.hook->ctx, &hd, sl->send[h % 2], len);
    }
    int rc = MPI_Isend(sl->send[h % 2], (int)len, MPI_BYTE, right_of(r), TAG_SLOT0 + (int)s,
                       r->comm, q);
    GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "MPI_Isend to rank %d failed (%d)", right_of(r), rc);
    return GT_OK;
}

// Waits for every slot's chunk of the round, lets the test hook see them, opens them in order.
static gt_err open_round(const window *w)
{
    gt_ring *r = w->r;
    gt_ring_arrival arr[MAX_WINDOW];
    slot *of[MAX_WINDOW];
    size_t n = 0;
    for (uint32_t s = 0; s < w->count; s++) {
        slot *sl = &r->slots[s];
        if (sl->want.nelem == 0) {
            continue;
        }
        MPI_Status st;
        GT_TRY(wait_one(r, &sl->rreq, &st, r->what_recv));
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        of[n] = sl;
        arr[n++] = (gt_ring_arrival){sl->want, sl->recv, count > 0 ? (size_t)count : 0,
                                     r->chunk_cap};
    }
    if (r->opts.hook != NULL && r->opts.hook->arrived != NULL) {
        r->opts.hook->arrived(r->opts.hook->ctx, arr, n);
    }
    for (size_t i = 0; i < n; i++) {
        slot *sl = of[i];
        size_t len = arr[i].len <= r->chunk_cap ? arr[i].len : r->chunk_cap;
        gt_err e = w->ep->open(w->ep->ctx, &sl->want, sl->recv, len, sl->want_mode);
        if (!gt_is_ok(e)) {
            return gt_err_wrap(e, "rank %d, step %llu, bucket %u, hop %u", r->rank,
                               (unsigned long long)w->step, sl->want.bucket, sl->want.hop);
        }
    }
    return GT_OK;
}

// The hops of the phase: [*first, *first + *count) of the ring pass.
static void phase_hops(uint32_t phase, uint32_t N, uint32_t *first, uint32_t *count)
{
    *first = phase == GT_RING_PHASE_ALLGATHER ? N - 1 : 0;
    *count = phase == GT_RING_PHASE_ALLREDUCE ? 2 * (N - 1) : N - 1;
}

static gt_err run_window(const window *w)
{
    uint32_t h0 = 0, hops = 0;
    phase_hops(w->phase, (uint32_t)w->r->nranks, &h0, &hops);
    for (uint32_t s = 0; s < w->count; s++) {
        GT_TRY(post_recv(w, s, h0));
        GT_TRY(seal_send(w, s, h0));
    }
    for (uint32_t h = 1; h <= hops; h++) {
        GT_TRY(open_round(w));
        for (uint32_t s = 0; h < hops && s < w->count; s++) {
            GT_TRY(post_recv(w, s, h0 + h));
            GT_TRY(seal_send(w, s, h0 + h));
        }
    }
    return GT_OK;
}

static gt_err drain_sends(gt_ring *r)
{
    for (uint32_t s = 0; s < r->opts.window; s++) {
        for (int i = 0; i < 2; i++) {
            GT_TRY(wait_one(r, &r->slots[s].sreq[i], MPI_STATUS_IGNORE, r->what_send));
        }
    }
    return GT_OK;
}

// Tells every other rank how this collective ended for this one (small eager messages, let go
// at once: a failed rank must not wait on anyone).
static void send_votes(gt_ring *r, const gt_err *e)
{
    uint8_t msg[VOTE_BYTES];
    for (int i = 0; i < 8; i++) {
        msg[i] = (uint8_t)(r->coll >> (8 * i));
    }
    int len = 8;
    if (!gt_is_ok(*e)) {
        len += snprintf((char *)msg + 8, sizeof msg - 8, "%s: %s", gt_code_name(e->code), e->msg);
        len = len < VOTE_BYTES ? len : VOTE_BYTES - 1;
    }
    for (int p = 0; p < r->nranks; p++) {
        MPI_Request q;
        if (p != r->rank &&
            MPI_Isend(msg, len, MPI_BYTE, p, TAG_VOTE, r->comm, &q) == MPI_SUCCESS) {
            MPI_Request_free(&q);
        }
    }
}

// Every rank learns whether all succeeded: a rank whose chunks were all fine may be done while
// its neighbour rejected the last hop. A rank that failed says why and leaves; a rank that
// succeeded waits for every other rank's ok (or the first failure, with its reason).
static gt_err agree(gt_ring *r, gt_err mine)
{
    if (!gt_is_ok(mine)) {
        if (mine.code != GT_E_PEER) {  // a told rank need not tell: the teller told everyone
            send_votes(r, &mine);
        }
        return mine;
    }
    send_votes(r, &mine);
    double deadline = gt_now_seconds() + r->opts.timeout_ms / 1000.0;
    while (r->oks < r->nranks - 1) {
        GT_TRY(check_votes(r));
        GT_ENSURE(r->oks == r->nranks - 1 || gt_now_seconds() < deadline, GT_E_TIMEOUT,
                  "rank %d: %d of %d ranks confirmed the collective within %d ms", r->rank,
                  r->oks + 1, r->nranks, r->opts.timeout_ms);
        sched_yield();
    }
    return GT_OK;
}

static gt_err collective(gt_ring *r, const gt_ring_endpoint *ep, uint64_t n, uint64_t step,
                         uint32_t phase)
{
    GT_ENSURE(!r->dead, GT_E_STATE, "ring: an earlier collective failed; admit a new run");
    if (r->nranks == 1) {
        return GT_OK;
    }
    // The sharded layout's buckets hold `per` floats of every shard; shard 0 is the longest.
    uint64_t per = r->bucket_elems / (uint64_t)r->nranks, off0 = 0, len0 = 0;
    gt_ring_shard(n, (uint32_t)r->nranks, 0, &off0, &len0);
    uint64_t nbuckets = phase == GT_RING_PHASE_ALLREDUCE
                            ? (n + r->bucket_elems - 1) / r->bucket_elems
                            : (len0 + per - 1) / per;
    GT_ENSURE(nbuckets <= UINT32_MAX, GT_E_ARG, "ring: %llu buckets (a larger bucket, please)",
              (unsigned long long)nbuckets);
    gt_err err = GT_OK;
    for (uint64_t b = 0; b < nbuckets && gt_is_ok(err); b += r->opts.window) {
        uint64_t left = nbuckets - b;
        window w = {r, ep, n, step, b, (uint32_t)(left < r->opts.window ? left : r->opts.window),
                    phase};
        err = run_window(&w);
    }
    if (gt_is_ok(err)) {
        err = drain_sends(r);
    }
    err = agree(r, err);
    r->coll++;
    r->oks = r->oks_next;
    r->oks_next = 0;
    if (!gt_is_ok(err)) {
        r->dead = true;
        drop_all(r);
    }
    return err;
}

gt_err gt_ring_allreduce(gt_ring *r, const gt_ring_endpoint *ep, uint64_t n, uint64_t step)
{
    return collective(r, ep, n, step, GT_RING_PHASE_ALLREDUCE);
}

gt_err gt_ring_reduce_scatter(gt_ring *r, const gt_ring_endpoint *ep, uint64_t n, uint64_t step)
{
    return collective(r, ep, n, step, GT_RING_PHASE_REDUCE_SCATTER);
}

gt_err gt_ring_allgather(gt_ring *r, const gt_ring_endpoint *ep, uint64_t n, uint64_t step)
{
    return collective(r, ep, n, step, GT_RING_PHASE_ALLGATHER);
}
