// gputravel devd: the emulated confidential GPU. A separate process that owns all device memory
// (one arena, reserved and touched once at start, docs/design.md §4), attests itself with a device
// identity key certified by a simulated vendor root, and serves one attested session at a time
// over a Unix socket (protocol: devproto.h). Bulk data arrives encrypted in shared bounce slots
// and is decrypted only into the arena; launched ops run on arena memory with devd's own OpenMP
// threads. Any authentication or protocol failure ends the session, and a session's end (or its
// client's death) zeroizes every buffer it owned.
#include <gputravel/devd.h>
#include <gputravel/kernels.h>
#include <gputravel/devproto.h>

#include <assert.h>

#include <gputravel/seal.h>
#include <gputravel/travel.h>
#include <errno.h>

#include "devd_export.h"
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define DEVD_MAX_BUFFERS 65536u
#define DEVD_STAGE_BYTES (256u * 1024)
#define DEVD_DEFAULT_SLOTS 4u
#define DEVD_DEFAULT_SLOT_BYTES (4u << 20)
#define DEVD_SEND_TIMEOUT_S 30
#define DEVD_HELLO_TIMEOUT_MS 10000
#define DEVD_MAX_PARKED 8          // holders' sessions kept between trips (RETURN_STAY)
#define DEVD_PARK_MAX_S 600.0      // a parked session older than this is ended (fresh handshake)

// Where one buffer lies in the arena: [off, off + span).
typedef struct {
    uint64_t off, span;
} devd_extent;

typedef struct devd_session devd_session;

// The one trip the device can be on (docs/device-sim.md "Travelling").
typedef struct {
    gt_trip_state state;  // changed only by trip_step (the trip state machine)
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    double lease_end;         // gt_now_seconds()
    uint64_t trainer;         // the lending session
    uint64_t holder;          // the attached holder session (0: none)
    devd_session *tsess;      // the lending session, while the trip runs
    bool trainer_gone;        // the lender's socket failed while a holder was attached
    uint32_t fail_code;       // FAILED: why (gt_code)
    size_t nloaded;
    struct {
        uint64_t handle, bytes;
    } loaded[GT_SIM_MAX_TRIP_BUFFERS];
} devd_trip;

typedef struct {
    const gt_devd_config *cfg;
    gt_err (*produce)(void *ctx, const uint8_t *rd, gt_buf *evidence);
    void *produce_ctx;
    gt_err (*appraise)(void *ctx, gt_span evidence, const uint8_t *rd);
    void *appraise_ctx;
    gt_sim_identity *identity;
    gt_sim_admission *admission;
    uint8_t *arena;
    uint64_t arena_bytes;
    // Buffers: handles, owners (session ids), sizes and the limit (the arena) in the shared
    // table (device.h); entries' at.offset into the arena, ext.devd the trip fields. Holder
    // buffers on a trip are owned by the lending trainer with ext.devd.trip = the holder.
    gt_buftab *tab;
    gt_pager *pg;  // --paging-store: the arena is the pager's, at most arena_bytes resident
    devd_extent *extents;  // every live buffer's place, sorted by off (first-fit placement)
    size_t nextents, cap_extents;
    uint64_t sessions;
    uint64_t bytes_wiped;
    int listen_fd;
    uint32_t slot_count, slot_bytes;
    uint8_t *stage;  // ciphertext is copied here before it is decrypted (no double fetch)
    uint8_t *rx;     // one frame
    devd_trip trip;
    // Attested holder sessions parked between trips (RETURN_STAY): the next trip of that holder
    // starts with ATTACH on the same session. Read only while the device is lent (lend_run) or
    // idle (the accept loop); anything else a parked session sends ends it.
    devd_session *parked[DEVD_MAX_PARKED];
    size_t nparked;
} devd;

struct devd_session {
    devd *d;
    int fd;
    uint64_t id;
    bool holder;     // attached with a ticket: may only alloc, load_sealed, free, return
    uint8_t agreement[GT_SHA256_BYTES];  // from its hello (appraised evidence binds it)
    gt_sim_keys keys;
    uint8_t *bounce;
    size_t bounce_bytes;
    bool bounce_used;  // a bulk transfer touched the slots (only then are they wiped)
    int bounce_fd;
    gt_sim_watch watch;
    double attested_at;  // gt_now_seconds() at the end of its handshake
    gt_release_state rel;    // the outputs it declared, and what is left of their budgets
    gt_agreement *declared;  // the agreement it declared (parsed here from its own bytes)
    gt_buf client_hello;     // its CLIENT_HELLO body: its peer hellos carry it (issue 16)
    gt_peer_core *peer;      // its data-parallel run: key, admitted peers, counters
};

// ---- memory -----------------------------------------------------------------------------------

// What a session sees: its own buffers; a holder only those it allocated on this trip (owned by
// the lending trainer). Anything else is GT_E_NOTFOUND, as an unknown handle is.
static gt_err buf_find(devd_session *s, uint64_t handle, gt_buftab_entry **out)
{
    devd *d = s->d;
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_find(d->tab, handle, s->holder ? d->trip.trainer : s->id, &e));
    if (s->holder && e->ext.devd.trip != s->id) {
        return gt_buftab_notfound(handle);
    }
    *out = e;
    return GT_OK;
}

static gt_err buf_access(devd_session *s, uint64_t handle, uint64_t off, uint64_t len,
                         const char *what, gt_buftab_entry **out)
{
    gt_buftab_entry *e = NULL;
    GT_TRY(buf_find(s, handle, &e));
    GT_TRY(gt_buftab_range(e, handle, off, len, what));
    *out = e;
    return GT_OK;
}

// First fit: the lowest hole of span bytes between the extents, else GT_E_LIMIT.
static gt_err arena_place(devd *d, uint64_t span, uint64_t *off)
{
    uint64_t prev_end = 0;
    size_t at = d->nextents;
    for (size_t i = 0; i < d->nextents; i++) {
        if (d->extents[i].off - prev_end >= span) {
            at = i;
            break;
        }
        prev_end = d->extents[i].off + d->extents[i].span;
    }
    if (at == d->nextents) {
        char want[32], used[32], limit[32];
        gt_format_size(want, sizeof want, span);
        gt_format_size(used, sizeof used, gt_buftab_used(d->tab));
        gt_format_size(limit, sizeof limit, d->arena_bytes);
        GT_ENSURE(d->arena_bytes - prev_end >= span, GT_E_LIMIT,
                  "device memory exhausted: no hole of %s left, %s of %s in use "
                  "(raise devd --mem-limit, or page beyond it: --paging-store DIR)", want, used, limit);
    }
    if (d->nextents == d->cap_extents) {
        size_t cap = d->cap_extents ? 2 * d->cap_extents : 64;
        devd_extent *ne = realloc(d->extents, cap * sizeof *ne);
        GT_ENSURE(ne != NULL, GT_E_NOMEM, "devd: out of memory for the arena's extents");
        d->extents = ne;
        d->cap_extents = cap;
    }
    memmove(&d->extents[at + 1], &d->extents[at], (d->nextents - at) * sizeof *d->extents);
    d->extents[at] = (devd_extent){.off = prev_end, .span = span};
    d->nextents++;
    *off = prev_end;
    return GT_OK;
}

static void arena_unplace(devd *d, uint64_t off)
{
    size_t lo = 0, hi = d->nextents;
    while (lo < hi) {  // the first extent at or after off
        size_t mid = lo + (hi - lo) / 2;
        if (d->extents[mid].off < off) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    assert(lo < d->nextents && d->extents[lo].off == off);
    memmove(&d->extents[lo], &d->extents[lo + 1], (d->nextents - lo - 1) * sizeof *d->extents);
    d->nextents--;
}

static gt_err buf_alloc(devd_session *s, uint64_t bytes, uint32_t flags, uint64_t *handle)
{
    devd *d = s->d;
    gt_buftab_entry *e = NULL;
    gt_dbuf h = 0;
    // holder data never goes back to any CPU
    uint32_t f = s->holder && (flags & ~(uint32_t)GT_DBUF_NO_READBACK) == 0
                     ? flags | GT_DBUF_NO_READBACK
                     : flags;
    GT_TRY(gt_buftab_alloc(d->tab, bytes, f, s->holder ? d->trip.trainer : s->id, &h, &e));
    gt_err err = GT_OK;
    if (s->holder) {
        size_t mine = 0, cursor = 0;
        gt_dbuf x = 0;
        for (gt_buftab_entry *o; (o = gt_buftab_next(d->tab, &cursor, &x)) != NULL;) {
            mine += o->ext.devd.trip == s->id;
        }
        GT_ENSURE_GOTO(err, mine < GT_SIM_MAX_TRIP_BUFFERS, fail, GT_E_LIMIT,
                       "device: %u buffers already allocated on this trip",
                       GT_SIM_MAX_TRIP_BUFFERS);
        e->ext.devd.trip = s->id;
    }
    if (d->pg != NULL) {
        GT_TRY_GOTO(err, gt_pager_place(d->pg, h, e->owner, bytes, &e->at.offset), fail);
    } else {
        GT_TRY_GOTO(err, arena_place(d, e->span, &e->at.offset), fail);
    }
    *handle = h;
    return GT_OK;
fail:
    gt_buftab_release(d->tab, h);  // nothing was placed, nothing written
    return err;
}

// Zeroizes and releases a buffer. The arena's free space is therefore always zero.
static void buf_release(devd *d, gt_dbuf h, gt_buftab_entry *e)
{
    if (d->pg != NULL) {
        gt_pager_release(d->pg, e->at.offset);  // resident pages wiped, sealed ones dropped
    } else {
        gt_secure_zero(d->arena + e->at.offset, e->span);
        arena_unplace(d, e->at.offset);
    }
    d->bytes_wiped += e->span;
    gt_buftab_release(d->tab, h);
}

// ---- paged arena access (docs/paging.md): without a pager, the arena is simply there ---------

// [off, off + len) of the arena resident until the next access (GT_E_LIMIT past the cap).
static gt_err arena_hold(devd *d, uint64_t off, uint64_t len, bool write)
{
    return d->pg != NULL ? gt_pager_hold(d->pg, off, len, write) : GT_OK;
}

// The longest piece from off on that one hold covers: when paging, to the end of a run of
// pages (gt_pager_run_bytes from its page's start), which the pager faults in and maps as one.
static uint64_t arena_piece(const devd *d, uint64_t off, uint64_t len)
{
    if (d->pg == NULL) {
        return len;
    }
    gt_pager_stats st;
    gt_pager_stats_get(d->pg, &st);
    uint64_t n = gt_pager_run_bytes(d->pg) - off % st.page_bytes;
    return n < len ? n : len;
}

// AEAD stream update from in into the arena at off (in != NULL), or from the arena at off into
// out, a run of pages at a time when paging.
static gt_err arena_crypt(devd *d, gt_aead_stream *as, uint64_t off, const uint8_t *in,
                          uint8_t *out, uint64_t len)
{
    for (uint64_t done = 0; done < len;) {
        uint64_t n = arena_piece(d, off + done, len - done);
        n = n < (1u << 30) ? n : (1u << 30);
        GT_TRY(arena_hold(d, off + done, n, in != NULL));
        uint8_t *a = d->arena + off + done;
        GT_TRY(in != NULL ? gt_aead_stream_update(as, a, in + done, (size_t)n)
                          : gt_aead_stream_update(as, out + done, a, (size_t)n));
        done += n;
    }
    return GT_OK;
}

static gt_err arena_fill(devd *d, uint64_t off, int value, uint64_t len)
{
    if (d->pg != NULL && value == 0) {  // whole pages: dropped, not opened and resealed
        return gt_pager_zero(d->pg, off, len);
    }
    for (uint64_t done = 0; done < len;) {
        uint64_t n = arena_piece(d, off + done, len - done);
        GT_TRY(arena_hold(d, off + done, n, true));
        memset(d->arena + off + done, value, (size_t)n);
        done += n;
    }
    return GT_OK;
}

// Plain copies between the arena at off and memory (in != NULL: into the arena), a run of pages
// at a time when paging.
static gt_err arena_copy(devd *d, uint64_t off, const uint8_t *in, uint8_t *out, uint64_t len)
{
    for (uint64_t done = 0; done < len;) {
        uint64_t n = arena_piece(d, off + done, len - done);
        GT_TRY(arena_hold(d, off + done, n, in != NULL));
        if (in != NULL) {
            memcpy(d->arena + off + done, in + done, (size_t)n);
        } else {
            memcpy(out + done, d->arena + off + done, (size_t)n);
        }
        done += n;
    }
    return GT_OK;
}

// The same for a buffer found before a long transfer, looked up again: a failed load releases
// it only if it is still there.
static void buf_release_again(devd *d, gt_dbuf h, uint64_t owner)
{
    gt_buftab_entry *e = NULL;
    if (gt_is_ok(gt_buftab_find(d->tab, h, owner, &e))) {
        buf_release(d, h, e);
    }
}

static gt_err buf_free(devd_session *s, uint64_t handle)
{
    gt_buftab_entry *e = NULL;
    GT_TRY(buf_find(s, handle, &e));
    buf_release(s->d, handle, e);
    return GT_OK;
}

static gt_err resolve_ref(void *ctx, gt_dref ref, uint64_t bytes, void **ptr)
{
    devd_session *s = ctx;
    gt_buftab_entry *e = NULL;
    GT_TRY(buf_access(s, ref.buf, ref.offset, bytes, "op operand", &e));
    *ptr = s->d->arena + e->at.offset + ref.offset;
    return GT_OK;
}

static gt_sim_stat stat_of(const devd *d)
{
    gt_pager_stats p = {0};
    if (d->pg != NULL) {
        gt_pager_stats_get(d->pg, &p);
    }
    return (gt_sim_stat){.sessions = d->sessions, .bytes_in_use = gt_buftab_used(d->tab),
                         .bytes_wiped = d->bytes_wiped, .buffers_live = gt_buftab_live(d->tab),
                         .mem_limit = d->arena_bytes, .page_bytes = p.page_bytes,
                         .paging_cap = p.cap, .resident = p.resident_bytes,
                         .peak_resident = p.peak_resident, .evicted = p.evicted_bytes,
                         .page_outs = p.page_outs, .fault_ins = p.fault_ins,
                         .clean_drops = p.clean_drops, .prefetch = p.prefetch,
                         .demand_faults = p.demand_faults, .prefetch_issued = p.prefetch_issued,
                         .prefetch_hits = p.prefetch_hits, .prefetch_wasted = p.prefetch_wasted,
                         .assist_faults = p.assist_faults, .pre_evictions = p.pre_evictions,
                         .mispredicts = p.mispredicts, .map_calls = p.map_calls,
                         .ops_in_parts = p.ops_in_parts, .discards = p.discards};
}

// ---- records ----------------------------------------------------------------------------------

static gt_err send_msg(devd_session *s, const gt_sim_msg *m)
{
    return gt_sim_msg_send(s->fd, &s->keys, m, -1);
}

static gt_err send_status(devd_session *s, gt_err e)
{
    gt_sim_msg m;
    gt_sim_msg_status(&m, e);
    return send_msg(s, &m);
}

// recv_fd: NULL (attached descriptors are closed) or where one goes (-1 if none; the caller
// closes it, also on failure).
static gt_err recv_msg_fd(devd_session *s, gt_sim_msg *m, int *recv_fd)
{
    return gt_sim_msg_recv(s->fd, &s->keys, s->d->rx, GT_SIM_MAX_FRAME, recv_fd, &s->watch, m);
}

static gt_err recv_msg(devd_session *s, gt_sim_msg *m)
{
    return recv_msg_fd(s, m, NULL);
}

// ---- bulk transfers ---------------------------------------------------------------------------

static uint64_t chunk_count(uint64_t len, uint64_t chunk)
{
    return len / chunk + (len % chunk != 0);
}

// Decrypts one chunk from the bounce slot into dst: the ciphertext is first copied, piece by
// piece, out of shared memory, so what is authenticated is exactly what is decrypted.
static gt_err open_chunk(devd_session *s, uint64_t dst, const uint8_t *ct, uint32_t len,
                         uint64_t handle, uint64_t offset)
{
    devd *d = s->d;
    uint8_t aad[GT_SIM_BULK_AAD_BYTES], iv[GT_AEAD_IV_BYTES], tag[GT_AEAD_TAG_BYTES];
    gt_sim_bulk_aad(aad, handle, offset, len);
    gt_aead_stream *st = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_sim_iv_next(&s->keys, GT_SIM_STREAM_BULK_C2S, iv), out);
    GT_TRY_GOTO(err, gt_aead_stream_new(&st, false, aad, sizeof aad, iv,
                                        gt_sim_stream_key(&s->keys, GT_SIM_STREAM_BULK_C2S)),
                out);
    for (uint32_t pos = 0; pos < len;) {
        uint32_t n = len - pos < DEVD_STAGE_BYTES ? len - pos : DEVD_STAGE_BYTES;
        memcpy(d->stage, ct + pos, n);
        GT_TRY_GOTO(err, arena_crypt(d, st, dst + pos, d->stage, NULL, n), out);
        pos += n;
    }
    memcpy(tag, ct + len, sizeof tag);
    GT_TRY_GOTO(err, gt_aead_stream_final(st, tag), out);
out:
    gt_aead_stream_free(st);
    gt_secure_zero(d->stage, DEVD_STAGE_BYTES);
    if (!gt_is_ok(err)) {
        (void)arena_fill(d, dst, 0, len);  // nothing unauthenticated stays in device memory
        return d->pg != NULL && gt_pager_failed(d->pg)
                   ? err
                   : gt_errf(GT_E_AUTH, "devd: bounce-buffer chunk authentication failed");
    }
    return GT_OK;
}

// Returns a fatal error (the session ends) or GT_OK; request errors go back as STATUS.
static gt_err do_copy_in(devd_session *s, const gt_sim_msg *req)
{
    devd *d = s->d;
    gt_buftab_entry *b = NULL;
    gt_err st = buf_access(s, req->handle, req->offset, req->len, "copy_in", &b);
    GT_TRY(send_status(s, st));
    if (!gt_is_ok(st)) {
        return GT_OK;
    }
    uint64_t chunk = GT_SIM_BULK_CHUNK(d->slot_bytes);
    s->bounce_used = true;
    uint64_t n = chunk_count(req->len, chunk);
    uint64_t dst = b->at.offset + req->offset;
    for (uint64_t i = 0; i < n; i++) {
        gt_sim_msg m;
        GT_TRY(recv_msg(s, &m));
        uint64_t want = req->len - i * chunk < chunk ? req->len - i * chunk : chunk;
        uint32_t slot = (uint32_t)(i % d->slot_count);
        GT_ENSURE(m.type == GT_SIM_MSG_CHUNK, GT_E_STATE,
                  "devd: %s during copy_in (expected chunk)", gt_sim_msg_name(m.type));
        GT_ENSURE(m.slot == slot && m.len == want, GT_E_FORMAT,
                  "devd: chunk %llu in slot %u of %llu bytes (expected slot %u, %llu bytes)",
                  (unsigned long long)i, m.slot, (unsigned long long)m.len, slot,
                  (unsigned long long)want);
        GT_TRY(open_chunk(s, dst + i * chunk, s->bounce + (size_t)slot * d->slot_bytes,
                          (uint32_t)want, req->handle, req->offset + i * chunk));
        if (i + d->slot_count < n) {
            gt_sim_msg f = {.type = GT_SIM_MSG_SLOT_FREE, .slot = slot};
            GT_TRY(send_msg(s, &f));
        }
    }
    return send_status(s, GT_OK);
}

// copy_out's seal of want arena bytes at src into out (ciphertext || tag), a page at a time:
// the same bytes gt_aead_seal gives, without the whole range resident at once.
static gt_err seal_paged(devd *d, uint8_t *out, uint64_t src, uint64_t want,
                         const uint8_t *aad, const uint8_t *iv, const uint8_t *key)
{
    gt_aead_stream *as = NULL;
    GT_TRY(gt_aead_stream_new(&as, true, aad, GT_SIM_BULK_AAD_BYTES, iv, key));
    gt_err err = arena_crypt(d, as, src, NULL, out, want);
    if (gt_is_ok(err)) {
        err = gt_aead_stream_final(as, out + want);
    }
    gt_aead_stream_free(as);
    return err;
}

static gt_err do_copy_out(devd_session *s, const gt_sim_msg *req)
{
    devd *d = s->d;
    gt_buftab_entry *b = NULL;
    gt_err st = buf_find(s, req->handle, &b);
    if (gt_is_ok(st)) {  // the door out: NO_READBACK refused whatever the range
        st = gt_buftab_read_out(d->tab, req->handle, b->owner, req->offset, req->len, &b);
    }
    GT_TRY(send_status(s, st));
    if (!gt_is_ok(st)) {
        return GT_OK;
    }
    uint64_t chunk = GT_SIM_BULK_CHUNK(d->slot_bytes);
    s->bounce_used = true;
    uint64_t n = chunk_count(req->len, chunk);
    uint64_t src = b->at.offset + req->offset;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t slot = (uint32_t)(i % d->slot_count);
        if (i >= d->slot_count) {
            gt_sim_msg m;
            GT_TRY(recv_msg(s, &m));
            GT_ENSURE(m.type == GT_SIM_MSG_SLOT_FREE && m.slot == slot, GT_E_STATE,
                      "devd: %s during copy_out (expected slot_free %u)",
                      gt_sim_msg_name(m.type), slot);
        }
        uint64_t want = req->len - i * chunk < chunk ? req->len - i * chunk : chunk;
        uint8_t aad[GT_SIM_BULK_AAD_BYTES], iv[GT_AEAD_IV_BYTES];
        size_t ct_len = 0;
        gt_sim_bulk_aad(aad, req->handle, req->offset + i * chunk, (uint32_t)want);
        GT_TRY(gt_sim_iv_next(&s->keys, GT_SIM_STREAM_BULK_S2C, iv));
        uint8_t *out = s->bounce + (size_t)slot * d->slot_bytes;
        if (d->pg == NULL) {
            GT_TRY(gt_aead_seal(out, d->slot_bytes, &ct_len, d->arena + src + i * chunk,
                                (size_t)want, aad, sizeof aad, iv,
                                gt_sim_stream_key(&s->keys, GT_SIM_STREAM_BULK_S2C)));
        } else {
            GT_TRY(seal_paged(d, out, src + i * chunk, want, aad, iv,
                              gt_sim_stream_key(&s->keys, GT_SIM_STREAM_BULK_S2C)));
        }
        gt_sim_msg c = {.type = GT_SIM_MSG_CHUNK, .slot = slot, .len = want};
        GT_TRY(send_msg(s, &c));
    }
    return GT_OK;
}

// ---- labels and declared outputs (device.h; issue 13) -----------------------------------------

// Labels first (the rules every backend shares, on a copy whose release precision devd sets),
// then the kernel on arena memory.
static gt_err launch_where(void *ctx, gt_dbuf h, uint64_t *off)
{
    gt_buftab_entry *e = NULL;
    GT_TRY(buf_find(ctx, h, &e));
    *off = e->at.offset;
    return GT_OK;
}

static gt_err launch_run(void *ctx, const gt_op *op, const gt_op_part *part)
{
    return gt_ops_cpu_run_part(op, part, resolve_ref, ctx);
}

static gt_err do_launch(devd_session *s, const gt_op *op)
{
    gt_op run = *op;
    GT_TRY(gt_buftab_launch_labels(s->d->tab, s->id, &run, &s->rel));
    if (s->d->pg != NULL) {  // residency by op: exactly what its refs cover
        return gt_buftab_launch_done(&s->rel, gt_pager_launch(s->d->pg, &run, launch_where,
                                                              launch_run, s));
    }
    return gt_buftab_launch_done(&s->rel, gt_ops_cpu_run(&run, resolve_ref, s));
}

// DECLARE: the agreement's bytes, which the client copied into buffer `handle`. devd hashes and
// parses them itself: the rules come from the document the session was attested with, never
// from the client's reading of it.
static gt_err declare(devd_session *s, uint64_t handle, uint64_t len)
{
    devd *d = s->d;
    GT_ENSURE(!s->rel.declared, GT_E_STATE, "device: outputs are declared once per session");
    gt_buftab_entry *b = NULL;
    GT_TRY(buf_access(s, handle, 0, len, "declare", &b));
    GT_TRY(arena_hold(d, b->at.offset, len, false));
    const uint8_t *doc = d->arena + b->at.offset;
    uint8_t hash[GT_SHA256_BYTES];
    GT_TRY(gt_hash(GT_HASH_SHA256, hash, doc, (size_t)len));
    GT_ENSURE(gt_ct_equal(hash, s->agreement, GT_SHA256_BYTES), GT_E_POLICY,
              "device: the declared agreement is not the one this session was attested with");
    gt_agreement *a = calloc(1, sizeof *a);
    GT_ENSURE(a != NULL, GT_E_NOMEM, "devd: out of memory");
    gt_err e = gt_agreement_parse(a, doc, (size_t)len);
    gt_device_outputs rules;
    if (gt_is_ok(e)) {
        gt_agreement_device_outputs(a, &rules);
        e = gt_device_outputs_check(&rules);
    }
    if (!gt_is_ok(e)) {
        free(a);
        return e;
    }
    s->declared = a;
    gt_release_state_free(&s->rel);
    s->rel = (gt_release_state){.declared = true, .rules = rules};
    gt_log_info("devd: session %llu declared the outputs of agreement '%s' (loss %s, %llu "
                "releases)", (unsigned long long)s->id, a->name, rules.loss ? "yes" : "no",
                (unsigned long long)rules.loss_budget);
    return GT_OK;
}

static gt_err do_label_request(devd_session *s, const gt_sim_msg *m)
{
    devd *d = s->d;
    gt_buftab_entry *b = NULL;
    gt_sim_msg r;
    memset(&r, 0, sizeof r);
    switch (m->type) {
    case GT_SIM_REQ_LABEL_ADD: {
        gt_err e = buf_find(s, m->handle, &b);
        return send_status(s, gt_is_ok(e) ? gt_buftab_label_add(d->tab, m->handle,
                                                                m->label_ids[0])
                                          : e);
    }
    case GT_SIM_REQ_LABEL_GET: {
        gt_err e = buf_find(s, m->handle, &b);
        if (!gt_is_ok(e)) {
            return send_status(s, e);
        }
        r.type = GT_SIM_REP_LABEL;
        r.count = (uint32_t)gt_buftab_label_ids(d->tab, b->label, r.label_ids, GT_SIM_LABEL_IDS);
        r.label_n = r.count < GT_SIM_LABEL_IDS ? r.count : GT_SIM_LABEL_IDS;
        return send_msg(s, &r);
    }
    case GT_SIM_REQ_DECLARE:
        return send_status(s, declare(s, m->handle, m->len));
    case GT_SIM_REQ_PIN: {
        gt_err e = buf_access(s, m->handle, 0, m->len, "pin", &b);
        if (gt_is_ok(e)) {
            e = arena_hold(d, b->at.offset, m->len, false);
        }
        return send_status(s, gt_is_ok(e) ? gt_release_pin(&s->rel, (gt_span){d->arena +
                                                                   b->at.offset, m->len})
                                          : e);
    }
    default: {  // OUTPUTS
        if (!s->rel.declared) {
            return send_status(s, gt_errf(GT_E_NOTFOUND, "device: no outputs declared"));
        }
        const gt_device_outputs *o = &s->rel.rules;
        r.type = GT_SIM_REP_OUTPUTS;
        r.outputs = (gt_sim_outputs){.loss = o->loss, .loss_bits = o->loss_mantissa_bits,
                                     .loss_budget = o->loss_budget, .grad_norm = o->grad_norm,
                                     .grad_norm_budget = o->grad_norm_budget,
                                     .checkpoint = o->checkpoint, .resume = o->resume};
        return send_msg(s, &r);
    }
    }
}

// ---- device-sealed exports (devd_export.c) ----------------------------------------------------

static gt_err export_access(void *ctx, uint64_t h, uint64_t off, uint64_t len, const char *what,
                            gt_buftab_entry **e)
{
    return buf_access(ctx, h, off, len, what, e);
}

static gt_err export_alloc(void *ctx, uint64_t bytes, uint64_t *h)
{
    return buf_alloc(ctx, bytes, 0, h);
}

static gt_err export_free(void *ctx, uint64_t h) { return buf_free(ctx, h); }

static gt_err export_read(void *ctx, uint64_t at, uint8_t *out, uint64_t n)
{
    devd_session *s = ctx;
    return arena_copy(s->d, at, NULL, out, n);
}

static gt_err export_write(void *ctx, uint64_t at, const uint8_t *in, uint64_t n)
{
    devd_session *s = ctx;
    return arena_copy(s->d, at, in, NULL, n);
}

static gt_err export_fill(void *ctx, uint64_t at, int value, uint64_t n)
{
    devd_session *s = ctx;
    return arena_fill(s->d, at, value, n);
}

static gt_err unexpected(const gt_sim_msg *m)
{
    return gt_errf(GT_E_STATE, "devd: unexpected %s message", gt_sim_msg_name(m->type));
}

static gt_err do_export(devd_session *s, const gt_sim_msg *m)
{
    devd *d = s->d;
    devd_export_env env = {.tab = d->tab, .identity = d->identity,
                           .agreement_hash = s->agreement, .declared = s->declared,
                           .rules = s->rel.declared ? &s->rel.rules : NULL, .ctx = s,
                           .access = export_access, .alloc = export_alloc, .free = export_free,
                           .read = export_read, .write = export_write, .fill = export_fill};
    gt_sim_msg r;
    gt_err e = devd_export_serve(&env, m, &r);
    if (!gt_is_ok(e)) {
        return send_status(s, e);
    }
    gt_log_info("devd: session %llu: %s", (unsigned long long)s->id, gt_sim_msg_name(m->type));
    return send_msg(s, &r);
}

// ---- peers (device.h "peers", docs/device-sim.md "Peers"; issue 16) --------------------------
// devd makes the run's X25519 key, appraises each peer's hello itself against the rules it
// derived from its own parse of the declared agreement, keeps the pairwise keys, and seals and
// opens chunks between arena buffers. The client only moves hellos and ciphertext.

static gt_err peer_core(devd_session *s, gt_peer_core **pc)
{
    GT_ENSURE(s->rel.declared, GT_E_STATE, "device: declare the agreement's outputs before "
              "peers (its rules say which peers to admit)");
    if (s->peer == NULL) {
        GT_TRY(gt_peer_core_new(&s->peer));
    }
    *pc = s->peer;
    return GT_OK;
}

// bytes [0, len) into a new unlabelled buffer of the session: the reply's handle.
static gt_err peer_reply_buffer(devd_session *s, const uint8_t *p, size_t len, gt_sim_msg *r)
{
    GT_TRY(buf_alloc(s, len, 0, &r->handle));
    gt_buftab_entry *b = NULL;
    GT_TRY(buf_find(s, r->handle, &b));
    GT_TRY(arena_copy(s->d, b->at.offset, p, NULL, len));
    r->type = GT_SIM_REP_EXPORTED;
    r->len = len;
    return GT_OK;
}

static gt_err peer_hello(devd_session *s, const gt_sim_msg *m, gt_sim_msg *r)
{
    gt_peer_core *pc = NULL;
    GT_TRY(peer_core(s, &pc));
    devd *d = s->d;
    gt_peer_identity id = {.kind = GT_PEER_KIND_DEVD, .trainer = gt_buf_span(&s->client_hello),
                           .produce = d->produce, .produce_ctx = d->produce_ctx};
    uint8_t *hello = malloc(GT_PEER_HELLO_MAX);
    GT_ENSURE(hello != NULL, GT_E_NOMEM, "devd: out of memory");
    size_t len = 0;
    gt_err e = gt_peer_core_hello(pc, &s->rel.rules.peers, &id, m->peer.rank, m->peer.nranks,
                                  hello, GT_PEER_HELLO_MAX, &len);
    if (gt_is_ok(e)) {
        e = peer_reply_buffer(s, hello, len, r);
    }
    free(hello);
    return e;
}

static gt_peer_hdr peer_hdr_of(const gt_sim_peer *p)
{
    gt_peer_hdr h = {.step = p->step, .bucket = p->bucket, .hop = p->hop, .src = p->src,
                     .dst = p->dst, .elem_off = p->elem_off, .nelem = p->nelem};
    memcpy(h.run, p->run, sizeof h.run);
    return h;
}

static gt_err peer_seal(devd_session *s, const gt_sim_msg *m, gt_sim_msg *r)
{
    gt_peer_core *pc = NULL;
    GT_TRY(peer_core(s, &pc));
    devd *d = s->d;
    gt_peer_hdr h = peer_hdr_of(&m->peer);
    uint64_t off = 0, n = 0;
    GT_TRY(gt_peer_hdr_bytes(&h, &off, &n));
    gt_buftab_entry *src = NULL, *out = NULL;
    GT_TRY(buf_access(s, m->handle, off, n, "peer_seal", &src));
    gt_label label = src->label;
    uint64_t src_at = src->at.offset + off;  // entries move when the table grows
    size_t cap = gt_peer_chunk_bytes(h.nelem), len = 0;
    GT_TRY(buf_alloc(s, cap, 0, &r->handle));
    GT_TRY(buf_find(s, r->handle, &out));
    uint64_t out_at = out->at.offset;
    // Paging: only the source range is held resident (at most the cap); the chunk is sealed into
    // devd's own memory (it is ciphertext from then on) and copied in a page at a time.
    uint8_t *stage = d->pg != NULL ? malloc(cap) : NULL;
    gt_err e = d->pg != NULL && stage == NULL
                   ? gt_errf(GT_E_NOMEM, "devd: out of memory (chunk staging)")
                   : arena_hold(d, src_at, n, false);
    if (gt_is_ok(e)) {
        e = gt_peer_core_seal(pc, d->tab, label, &h, d->arena + src_at,
                              stage != NULL ? stage : d->arena + out_at, cap, &len);
    }
    if (gt_is_ok(e) && stage != NULL) {
        e = arena_copy(d, out_at, stage, NULL, len);
    }
    free(stage);
    if (!gt_is_ok(e)) {
        gt_err f = buf_free(s, r->handle);
        (void)f;
        r->handle = 0;
        return e;
    }
    r->type = GT_SIM_REP_EXPORTED;
    r->len = len;
    return GT_OK;
}

static gt_err peer_open(devd_session *s, const gt_sim_msg *m)
{
    gt_peer_core *pc = NULL;
    GT_TRY(peer_core(s, &pc));
    devd *d = s->d;
    gt_peer_hdr h = peer_hdr_of(&m->peer);
    uint64_t off = 0, n = 0;
    GT_TRY(gt_peer_hdr_bytes(&h, &off, &n));
    gt_buftab_entry *chunk = NULL, *dst = NULL;
    GT_TRY(buf_access(s, m->peer.chunk, 0, m->peer.chunk_len, "peer_open chunk", &chunk));
    uint64_t chunk_at = chunk->at.offset;
    GT_TRY(buf_access(s, m->handle, off, n, "peer_open", &dst));
    GT_ENSURE(m->handle != m->peer.chunk, GT_E_ARG, "device: a chunk opened over itself");
    uint64_t dst_at = dst->at.offset + off;
    if (d->pg == NULL) {
        return gt_peer_core_open(pc, d->tab, m->handle, &h,
                                 (gt_span){d->arena + chunk_at, (size_t)m->peer.chunk_len},
                                 d->arena + dst_at, (int)m->peer.mode);
    }
    // Paging: the chunk (ciphertext) is copied out into devd's own memory a page at a time,
    // then only the destination range is held resident (at most the cap) while it opens.
    uint8_t *stage = malloc((size_t)m->peer.chunk_len);
    GT_ENSURE(stage != NULL, GT_E_NOMEM, "devd: out of memory (chunk staging)");
    gt_err e = arena_copy(d, chunk_at, NULL, stage, m->peer.chunk_len);
    if (gt_is_ok(e)) {
        e = arena_hold(d, dst_at, n, true);
    }
    if (gt_is_ok(e)) {
        e = gt_peer_core_open(pc, d->tab, m->handle, &h,
                              (gt_span){stage, (size_t)m->peer.chunk_len}, d->arena + dst_at,
                              (int)m->peer.mode);
    }
    free(stage);
    return e;
}

// A peer's hello out of the arena (copied, a page at a time when paging) and admitted.
static gt_err peer_admit(devd_session *s, const gt_sim_msg *m)
{
    gt_peer_core *pc = NULL;
    gt_buftab_entry *b = NULL;
    GT_TRY(peer_core(s, &pc));
    GT_TRY(buf_access(s, m->handle, 0, m->len, "peer_admit", &b));
    uint8_t *hello = malloc(m->len ? (size_t)m->len : 1);
    GT_ENSURE(hello != NULL, GT_E_NOMEM, "devd: out of memory");
    gt_err e = arena_copy(s->d, b->at.offset, NULL, hello, m->len);
    if (gt_is_ok(e)) {
        e = gt_peer_core_admit(pc, m->peer.rank, (gt_span){hello, (size_t)m->len});
    }
    free(hello);
    return e;
}

static gt_err do_peer(devd_session *s, const gt_sim_msg *m)
{
    gt_sim_msg r;
    memset(&r, 0, sizeof r);
    gt_peer_core *pc = NULL;
    gt_err e = GT_OK;
    switch (m->type) {
    case GT_SIM_REQ_PEER_HELLO:
        e = peer_hello(s, m, &r);
        break;
    case GT_SIM_REQ_PEER_ADMIT:
        return send_status(s, peer_admit(s, m));
    case GT_SIM_REQ_PEER_RUN_ID:
        e = peer_core(s, &pc);
        if (gt_is_ok(e)) {
            e = gt_peer_core_run_id(pc, r.peer.run);
        }
        r.type = GT_SIM_REP_PEER_RUN;
        break;
    case GT_SIM_REQ_PEER_SEAL:
        e = peer_seal(s, m, &r);
        break;
    default:  // PEER_OPEN
        return send_status(s, peer_open(s, m));
    }
    return gt_is_ok(e) ? send_msg(s, &r) : send_status(s, e);
}

// ---- one request ------------------------------------------------------------------------------

static gt_err do_lend(devd_session *t, const gt_sim_msg *req);
static gt_err send_trip(devd_session *t);

// ALLOC (a HANDLE reply) and SIZE (a SIZE reply), or the refusal as a status.
static gt_err do_alloc_or_size(devd_session *s, const gt_sim_msg *m)
{
    gt_sim_msg r;
    memset(&r, 0, sizeof r);
    gt_err e = GT_OK;
    if (m->type == GT_SIM_REQ_ALLOC) {
        r.type = GT_SIM_REP_HANDLE;
        e = buf_alloc(s, m->len, m->flags, &r.handle);
    } else {
        gt_buftab_entry *b = NULL;
        r.type = GT_SIM_REP_SIZE;
        e = buf_find(s, m->handle, &b);
        r.len = gt_is_ok(e) ? b->bytes : 0;
    }
    return gt_is_ok(e) ? send_msg(s, &r) : send_status(s, e);
}

// Serves one request. Returns a fatal error (protocol, authentication, I/O) or OK; *bye is set
// when the client ends the session.
static gt_err serve_one(devd_session *s, bool *bye)
{
    devd *d = s->d;
    gt_sim_msg m, r;
    GT_TRY(recv_msg(s, &m));
    memset(&r, 0, sizeof r);
    switch (m.type) {
    case GT_SIM_REQ_ALLOC:
    case GT_SIM_REQ_SIZE:
        return do_alloc_or_size(s, &m);
    case GT_SIM_REQ_FREE:
        return send_status(s, buf_free(s, m.handle));
    case GT_SIM_REQ_MEMSET: {
        gt_buftab_entry *b = NULL;
        gt_err e = buf_access(s, m.handle, m.offset, m.len, "memset", &b);
        if (gt_is_ok(e)) {
            e = arena_fill(d, b->at.offset + m.offset, (int)m.value, m.len);
        }
        return send_status(s, e);
    }
    case GT_SIM_REQ_COPY_IN:
        return do_copy_in(s, &m);
    case GT_SIM_REQ_COPY_OUT:
        return do_copy_out(s, &m);
    case GT_SIM_REQ_LAUNCH:
        return send_status(s, do_launch(s, &m.op));
    case GT_SIM_REQ_LABEL_ADD:
    case GT_SIM_REQ_LABEL_GET:
    case GT_SIM_REQ_DECLARE:
    case GT_SIM_REQ_OUTPUTS:
    case GT_SIM_REQ_PIN:
        return do_label_request(s, &m);
    case GT_SIM_REQ_SYNC:
        return send_status(s, GT_OK);
    case GT_SIM_REQ_STAT:
        r.type = GT_SIM_REP_STAT;
        r.stat = stat_of(d);
        return send_msg(s, &r);
    case GT_SIM_REQ_BYE:
        *bye = true;
        return GT_OK;
    case GT_SIM_REQ_LEND:
        return do_lend(s, &m);
    case GT_SIM_REQ_TRIP_STATUS:
        return send_trip(s);
    case GT_SIM_REQ_RECALL: {  // here the device is at the trainer: the machine refuses
        gt_trip_state to;
        unsigned fx;
        gt_err e = gt_trip_step(d->trip.state, GT_TRIP_EV_RECALL, &to, &fx);
        return send_status(s, gt_is_ok(e) ? gt_errf(GT_E_STATE, "device: not lent")
                                          : gt_err_wrap(e, "device: not lent"));
    }
    case GT_SIM_REQ_ATTACH:
    case GT_SIM_REQ_LOAD_SEALED:
    case GT_SIM_REQ_LOAD_SEALED_FD:
    case GT_SIM_REQ_RETURN:
    case GT_SIM_REQ_RETURN_STAY:
        gt_secure_zero(&m, sizeof m);
        return send_status(s, gt_errf(GT_E_STATE, "devd: %s: this session is not a holder "
                                      "attached with a ticket (is the device lent?)",
                                      gt_sim_msg_name(m.type)));
    case GT_SIM_REQ_PEER_HELLO:
    case GT_SIM_REQ_PEER_ADMIT:
    case GT_SIM_REQ_PEER_RUN_ID:
    case GT_SIM_REQ_PEER_SEAL:
    case GT_SIM_REQ_PEER_OPEN:
        return do_peer(s, &m);
    default:  // the exports (devd_export.c), or a message a trainer never sends
        return devd_export_request(m.type) ? do_export(s, &m) : unexpected(&m);
    }
}

// ---- sessions ---------------------------------------------------------------------------------

static void refuse_waiting(void *ctx)
{
    devd *d = ctx;
    int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        return;
    }
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    uint8_t body[256];
    gt_writer w = gt_writer_init_fixed(body, sizeof body);
    gt_err why = gt_errf(GT_E_STATE, "device busy: another session owns the device");
    if (gt_is_ok(gt_sim_refuse_write(&w, why))) {
        gt_err e = gt_sim_frame_send(fd, body, w.len, -1);
        (void)e;
    }
    shutdown(fd, SHUT_WR);
    close(fd);
    gt_log_info("devd: refused a second client (device busy)");
}

static gt_err bounce_create(devd_session *s)
{
    devd *d = s->d;
    s->bounce_bytes = (size_t)d->slot_count * d->slot_bytes;
    s->bounce_fd = memfd_create("gtsim-bounce", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    GT_ENSURE(s->bounce_fd >= 0, GT_E_IO, "devd: memfd_create: %s", strerror(errno));
    GT_ENSURE(ftruncate(s->bounce_fd, (off_t)s->bounce_bytes) == 0, GT_E_IO,
              "devd: bounce buffers: %s", strerror(errno));
    // The client must not shrink the file under devd (SIGBUS) nor grow it.
    GT_ENSURE(fcntl(s->bounce_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0,
              GT_E_IO, "devd: sealing bounce buffers: %s", strerror(errno));
    // Not populated: a session that never copies in or out (a travelling holder loading from a
    // file) never pays for 16 MiB of pages; a bulk transfer faults them in as it goes.
    void *p = mmap(NULL, s->bounce_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->bounce_fd, 0);
    GT_ENSURE(p != MAP_FAILED, GT_E_NOMEM, "devd: mapping bounce buffers: %s", strerror(errno));
    s->bounce = p;
    return GT_OK;
}

static gt_err bounce_make(void *ctx, int *fd)
{
    devd_session *s = ctx;
    GT_TRY(bounce_create(s));
    *fd = s->bounce_fd;
    return GT_OK;
}

// The handshake is sim_server.c's (shared with a trainer serving a trip itself).
static gt_err handshake(devd_session *s)
{
    devd *d = s->d;
    gt_sim_server_params p = {.slot_count = d->slot_count, .slot_bytes = d->slot_bytes,
                              .mem_limit = d->arena_bytes, .produce = d->produce,
                              .produce_ctx = d->produce_ctx, .appraise = d->appraise,
                              .appraise_ctx = d->appraise_ctx, .bounce = bounce_make,
                              .bounce_ctx = s, .client_hello = &s->client_hello};
    return gt_sim_server_handshake(s->fd, d->rx, &s->watch, &p, &s->keys, s->agreement);
}

static void session_end(devd_session *s)
{
    devd *d = s->d;
    uint64_t wiped = d->bytes_wiped;
    size_t cursor = 0;
    gt_dbuf h = 0;
    for (gt_buftab_entry *e; (e = gt_buftab_next(d->tab, &cursor, &h)) != NULL;) {
        if (e->owner == s->id) {
            buf_release(d, h, e);
        }
    }
    if (s->bounce != NULL) {
        if (s->bounce_used) {  // ciphertext only; wiped anyway. Untouched pages hold nothing.
            gt_secure_zero(s->bounce, s->bounce_bytes);
        }
        munmap(s->bounce, s->bounce_bytes);
    }
    if (s->bounce_fd >= 0) {
        close(s->bounce_fd);
    }
    close(s->fd);
    gt_secure_zero(&s->keys, sizeof s->keys);
    free(s->declared);
    s->declared = NULL;
    gt_release_state_free(&s->rel);
    gt_peer_core_free(s->peer);  // wipes the run's keys
    s->peer = NULL;
    gt_buf_free_nowipe(&s->client_hello);
    gt_log_info("devd: session %llu ended; %llu bytes of its memory zeroized",
                (unsigned long long)s->id, (unsigned long long)(d->bytes_wiped - wiped));
    // The paging key, tree and store are per device session: fresh ones once nothing is placed.
    if (d->pg != NULL && gt_buftab_live(d->tab) == 0) {
        gt_err e = gt_pager_rekey(d->pg);
        if (!gt_is_ok(e)) {
            gt_log_warn("devd: %s", e.msg);
        }
    }
}

static void session_run(devd *d, int fd)
{
    devd_session s;
    memset(&s, 0, sizeof s);
    s.d = d;
    s.fd = fd;
    s.bounce_fd = -1;
    s.id = ++d->sessions;
    s.watch = (gt_sim_watch){.fd = d->listen_fd, .on_watch = refuse_waiting, .ctx = d,
                             .timeout_ms = d->cfg->idle_timeout_ms, .stop = d->cfg->stop};
    struct timeval tv = {.tv_sec = DEVD_SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    // A connection that never finishes its hello must not hold the device: the whole handshake
    // has a deadline (a per-read timeout alone lets a byte-a-second client stay for ever).
    s.watch.timeout_ms = DEVD_HELLO_TIMEOUT_MS;
    s.watch.deadline = gt_now_seconds() + DEVD_HELLO_TIMEOUT_MS / 1000.0;
    gt_err err = handshake(&s);
    s.watch.timeout_ms = d->cfg->idle_timeout_ms > 0 ? d->cfg->idle_timeout_ms : 0;
    s.watch.deadline = 0;
    if (!gt_is_ok(err)) {
        gt_log_warn("devd: session %llu refused: %s", (unsigned long long)s.id, err.msg);
    } else {
        gt_log_info("devd: session %llu attached", (unsigned long long)s.id);
        bool bye = false;
        while (gt_is_ok(err) && !bye) {
            err = serve_one(&s, &bye);
            if (gt_is_ok(err) && d->pg != NULL && gt_pager_failed(d->pg)) {
                err = gt_errf(GT_E_AUTH, "the paging store failed a check: session torn down");
            }
        }
        if (!gt_is_ok(err)) {
            if (err.code == GT_E_PEER) {
                gt_log_info("devd: session %llu: client went away", (unsigned long long)s.id);
            } else {
                gt_log_warn("devd: session %llu ended: %s", (unsigned long long)s.id, err.msg);
            }
        }
    }
    session_end(&s);
}


// ---- travelling (docs/device-sim.md "Travelling") ---------------------------------------------

// STATUS/TRIP answers for a request from the lending trainer; never blocks on the trip.
static gt_err send_trip(devd_session *t)
{
    devd *d = t->d;
    bool ours = d->trip.trainer == t->id;
    gt_sim_msg r;
    memset(&r, 0, sizeof r);
    r.type = GT_SIM_REP_TRIP;
    r.state = ours ? (uint32_t)d->trip.state : GT_SIM_TRIP_AT_TRAINER;
    r.code = ours ? d->trip.fail_code : 0;
    r.count = ours && r.state == GT_SIM_TRIP_RETURNED ? (uint32_t)d->trip.nloaded : 0;
    GT_TRY(send_msg(t, &r));
    for (uint32_t i = 0; i < r.count; i++) {
        gt_sim_msg l = {.type = GT_SIM_REP_LOADED, .handle = d->trip.loaded[i].handle,
                        .len = d->trip.loaded[i].bytes};
        GT_TRY(send_msg(t, &l));
    }
    return GT_OK;
}

static gt_err trip_step(devd *d, gt_trip_event ev, gt_code why, unsigned *effects);

// One record from the lending trainer while the device is away: only TRIP_STATUS and RECALL are
// served,
// everything else is refused ("device is lent"); an error means the trainer is gone.
static gt_err trainer_while_lent(devd_session *t)
{
    // its own buffer and watch: this may run inside a holder's frame read (d->rx is in use)
    uint8_t body[GT_SIM_MAX_REC_PLAIN + GT_SIM_MAX_STATUS_MSG + 16 + GT_AEAD_TAG_BYTES];
    gt_sim_watch w = {.fd = -1, .timeout_ms = 5000};
    gt_sim_msg m;
    GT_TRY(gt_sim_msg_recv(t->fd, &t->keys, body, sizeof body, NULL, &w, &m));
    switch (m.type) {
    case GT_SIM_REQ_TRIP_STATUS:
        return send_trip(t);
    case GT_SIM_REQ_RECALL:
    {
        // The trainer takes its device back while no holder has attached (the holder refused
        // before attaching); an attached holder's trip ends with its RETURN or its departure.
        gt_err e = trip_step(t->d, GT_TRIP_EV_RECALL, GT_E_STATE, NULL);
        if (!gt_is_ok(e)) {
            return send_status(t, gt_err_wrap(e, "device: a holder has it"));
        }
        gt_log_info("devd: session %llu recalled the device before any holder attached",
                    (unsigned long long)t->id);
        return send_status(t, GT_OK);
    }
    case GT_SIM_REQ_BYE:
        return gt_errf(GT_E_PEER, "devd: the lending trainer ended its session");
    case GT_SIM_MSG_CHUNK:
    case GT_SIM_MSG_SLOT_FREE:
        return gt_errf(GT_E_STATE, "devd: %s from the lending trainer", gt_sim_msg_name(m.type));
    default: {
        gt_secure_zero(&m, sizeof m);
        // Any other request (lend, alloc, copy_out, launch, ...): the machine refuses it while
        // the device is away.
        gt_trip_state to;
        unsigned fx;
        gt_err e = gt_trip_step(t->d->trip.state, m.type == GT_SIM_REQ_LEND ? GT_TRIP_EV_LEND
                                                                            : GT_TRIP_EV_TRAINER_USE,
                                &to, &fx);
        if (gt_is_ok(e)) {  // cannot happen while lent; refused all the same
            e = gt_errf(GT_E_STATE, "trip %s", gt_trip_state_name(t->d->trip.state));
        }
        return send_status(t, gt_err_wrap(e, "device is lent: only trip_status until it "
                                          "returns"));
    }
    }
}

static void trainer_watch(void *ctx)
{
    devd_session *t = ctx;
    if (t->d->trip.trainer_gone) {
        return;
    }
    gt_err e = trainer_while_lent(t);
    if (!gt_is_ok(e)) {
        gt_log_warn("devd: the lending trainer (session %llu) failed: %s",
                    (unsigned long long)t->id, e.msg);
        t->d->trip.trainer_gone = true;
    }
}

// The buffer effects of a step that ends a trip: HAND_LOADED makes loaded buffers the trainer's
// (still NO_READBACK) and lists them; every other trip buffer is wiped (WIPE_UNLOADED, WIPE_TRIP).
static void trip_buffers(devd *d, unsigned fx)
{
    d->trip.nloaded = 0;
    size_t cursor = 0;
    gt_dbuf h = 0;
    for (gt_buftab_entry *b; (b = gt_buftab_next(d->tab, &cursor, &h)) != NULL;) {
        if (b->ext.devd.trip == 0) {
            continue;
        }
        if ((fx & GT_TRIP_FX_HAND_LOADED) && b->ext.devd.loaded > 0 &&
            d->trip.nloaded < GT_SIM_MAX_TRIP_BUFFERS) {
            d->trip.loaded[d->trip.nloaded].handle = h;
            d->trip.loaded[d->trip.nloaded].bytes = b->ext.devd.loaded;
            d->trip.nloaded++;
            b->ext.devd.trip = 0;
            b->ext.devd.loaded = 0;
        } else {
            buf_release(d, h, b);
        }
    }
    // handles in increasing order
    for (size_t i = 1; i < d->trip.nloaded; i++) {
        for (size_t j = i; j > 0 && d->trip.loaded[j - 1].handle > d->trip.loaded[j].handle; j--) {
            uint64_t h = d->trip.loaded[j].handle, n = d->trip.loaded[j].bytes;
            d->trip.loaded[j] = d->trip.loaded[j - 1];
            d->trip.loaded[j - 1].handle = h;
            d->trip.loaded[j - 1].bytes = n;
        }
    }
}

// Every state change of the trip: the state machine decides (GT_E_STATE when ev is not allowed
// now: nothing changes), the device-wide effects happen here (buffers, ticket, holder, why it
// failed); the session effects (NEW_TICKET, BIND/END/PARK_HOLDER, DROP_CONN, MARK_LOADED) are
// returned in *effects for the caller, which owns those sessions and buffers.
static gt_err trip_step(devd *d, gt_trip_event ev, gt_code why, unsigned *effects)
{
    gt_trip_state to;
    unsigned fx = 0;
    GT_TRY(gt_trip_step(d->trip.state, ev, &to, &fx));
    if (fx & (GT_TRIP_FX_HAND_LOADED | GT_TRIP_FX_WIPE_UNLOADED | GT_TRIP_FX_WIPE_TRIP)) {
        trip_buffers(d, fx);
    }
    if (fx & GT_TRIP_FX_KILL_TICKET) {
        gt_secure_zero(d->trip.ticket, sizeof d->trip.ticket);  // the ticket is dead
    }
    if (fx & (GT_TRIP_FX_END_HOLDER | GT_TRIP_FX_PARK_HOLDER | GT_TRIP_FX_KILL_TICKET)) {
        d->trip.holder = 0;
    }
    d->trip.state = to;
    if (to == GT_TRIP_FAILED || to == GT_TRIP_RETURNED) {
        d->trip.fail_code = to == GT_TRIP_RETURNED ? 0 : (uint32_t)(why ? why : GT_E_PEER);
        gt_log_info("devd: trip %s (%s): %zu buffers loaded for session %llu",
                    gt_trip_state_name(to), gt_trip_event_name(ev), d->trip.nloaded,
                    (unsigned long long)d->trip.trainer);
    }
    if (effects != NULL) {
        *effects = fx;
    }
    return GT_OK;
}

// A chunk authenticated into b: the trip is LOADED, and b holds authenticated chunk data up to
// the chunk's end (MARK_LOADED: what RETURN hands over).
static gt_err loaded(devd *d, gt_buftab_entry *b, const gt_sim_msg *req)
{
    // The chunk's plaintext carries its dataset from here on: the id is the first 16 bytes of
    // the AAD the tag just authenticated (GT_CHUNK_AAD_BYTES). No label, no data: a buffer that
    // cannot be labelled is wiped.
    uint64_t owner = b->owner;
    gt_err le = gt_buftab_label_add(d->tab, req->handle, req->aad);
    if (!gt_is_ok(le)) {
        buf_release_again(d, req->handle, owner);
        return gt_err_wrap(le, "device: chunk wiped");
    }
    unsigned fx = 0;
    GT_TRY(trip_step(d, GT_TRIP_EV_LOAD, GT_E_NONE, &fx));
    if ((fx & GT_TRIP_FX_MARK_LOADED) && req->offset + req->len > b->ext.devd.loaded) {
        b->ext.devd.loaded = req->offset + req->len;  // the extent holding authenticated data
    }
    return GT_OK;
}

// Opens n body bytes at in (ciphertext and tags, in order) through cs into device memory from
// dst + *pt_at on, moving *pt_at past the plaintext written: straight into the arena, or a page
// at a time when paging (each piece's plaintext lands in one held page).
static gt_err arena_open(devd *d, gt_chunk_stream *cs, uint64_t dst, uint64_t pt_len,
                         uint64_t *pt_at, const uint8_t *in, uint64_t n)
{
    for (uint64_t done = 0; done < n;) {
        uint64_t left = pt_len - *pt_at;  // what the buffer still takes
        uint64_t piece = n - done < (1u << 30) ? n - done : (1u << 30);
        if (left > 0) {
            piece = arena_piece(d, dst + *pt_at, piece);
            GT_TRY(arena_hold(d, dst + *pt_at, piece < left ? piece : left, true));
        }
        size_t wrote = 0;
        GT_TRY(gt_chunk_stream_update(cs, in + done, (size_t)piece, d->arena + dst + *pt_at,
                                      &wrote));
        *pt_at += wrote;
        done += piece;
    }
    return GT_OK;
}

// A load's request fields, checked: the segment size (0 or a GTCHUNK2 one) and the body's bytes.
static gt_err load_body_bytes(const gt_sim_msg *req, uint64_t *body)
{
    GT_TRY(gt_err_wrap(gt_chunk_seg_check(req->seg_bytes), "device: load_sealed"));
    GT_ENSURE(req->len <= (1ull << 40), GT_E_LIMIT, "device: load_sealed of %llu bytes",
              (unsigned long long)req->len);
    *body = gt_chunk_body_bytes(req->len, req->seg_bytes);
    return GT_OK;
}

// LOAD_SEALED: the holder's sealed chunk (its body, exactly as stored) arrives through the
// bounce slots without a second session encryption; devd opens it with the chunk key from the
// (AEAD-protected) request into the trainer-owned buffer: one decryption pass, here, serially
// (segment by segment for GTCHUNK2: the slots arrive in order; the holder's own path is
// LOAD_SEALED_FD, which opens on two threads).
static gt_err do_load_sealed(devd_session *h, const gt_sim_msg *req)
{
    devd *d = h->d;
    gt_buftab_entry *b = NULL;
    uint64_t total = 0;
    gt_err st = load_body_bytes(req, &total);
    if (gt_is_ok(st)) {
        st = buf_access(h, req->handle, req->offset, req->len, "load_sealed", &b);
    }
    GT_TRY(send_status(h, st));
    if (!gt_is_ok(st)) {
        return GT_OK;
    }
    uint64_t handle = req->handle, owner = b->owner, sb = d->slot_bytes;
    uint64_t n = chunk_count(total, sb);
    uint64_t dst = b->at.offset + req->offset, pt_at = 0;
    gt_chunk_stream *cs = NULL;
    gt_err err = GT_OK;
    bool auth_failed = false;
    GT_TRY_GOTO(err, gt_chunk_stream_new(&cs, req->len, req->seg_bytes, req->iv, req->aad,
                                         req->key),
                out);
    for (uint64_t i = 0; i < n; i++) {
        gt_sim_msg m;
        GT_TRY_GOTO(err, recv_msg(h, &m), out);
        uint64_t want = total - i * sb < sb ? total - i * sb : sb;
        uint32_t slot = (uint32_t)(i % d->slot_count);
        GT_ENSURE_GOTO(err, m.type == GT_SIM_MSG_CHUNK, out, GT_E_STATE,
                       "devd: %s during load_sealed (expected chunk)", gt_sim_msg_name(m.type));
        GT_ENSURE_GOTO(err, m.slot == slot && m.len == want, out, GT_E_FORMAT,
                       "devd: load chunk %llu in slot %u of %llu bytes (expected slot %u, %llu)",
                       (unsigned long long)i, m.slot, (unsigned long long)m.len, slot,
                       (unsigned long long)want);
        const uint8_t *src = h->bounce + (size_t)slot * sb;
        for (uint64_t k = 0; k < want && !auth_failed;) {
            // copied out of shared memory first: what is authenticated is what is decrypted
            uint64_t piece = want - k < DEVD_STAGE_BYTES ? want - k : DEVD_STAGE_BYTES;
            memcpy(d->stage, src + k, (size_t)piece);
            gt_err e = arena_open(d, cs, dst, req->len, &pt_at, d->stage, piece);
            if (e.code == GT_E_AUTH) {
                auth_failed = true;  // the rest of the slots are taken, not opened
            } else {
                GT_TRY_GOTO(err, e, out);
            }
            k += piece;
        }
        if (i + d->slot_count < n) {
            gt_sim_msg f = {.type = GT_SIM_MSG_SLOT_FREE, .slot = slot};
            GT_TRY_GOTO(err, send_msg(h, &f), out);
        }
    }
    if (!auth_failed && !gt_is_ok(gt_chunk_stream_final(cs))) {
        auth_failed = true;
    }
out:
    gt_chunk_stream_free(cs);
    gt_secure_zero(d->stage, DEVD_STAGE_BYTES);
    if (!gt_is_ok(err) || auth_failed) {
        buf_release_again(d, handle, owner);  // nothing unauthenticated stays in device memory
    }
    if (!gt_is_ok(err)) {
        return err;  // protocol or channel failure: the trip fails
    }
    if (auth_failed) {
        gt_log_warn("devd: load_sealed into 0x%llx: chunk authentication failed; buffer wiped",
                    (unsigned long long)handle);
        return send_status(h, gt_errf(GT_E_AUTH, "device: sealed chunk authentication failed; "
                                      "buffer 0x%llx wiped and freed",
                                      (unsigned long long)handle));
    }
    return send_status(h, loaded(d, b, req));
}

// LOAD_SEALED_FD: as LOAD_SEALED, but devd reads the chunk's body itself from the holder's chunk
// file (a regular file) through a mapping and decrypts from there: the one copy out of the
// holder's memory is the read (no double fetch), no bounce slots, and the holder does no copying
// at all. A GTCHUNK2 chunk of two or more segments opens on two threads (this one and a worker,
// each its own half of the segments, each through its own mapping so that a truncated file is an
// error on either); under paging, and for GTCHUNK1, serially. Closes fd.
typedef struct {
    devd *d;
    gt_chunk_stream *cs;
    uint64_t dst;  // arena offset
    uint64_t pt_len, pt_at;
} fd_load;

static gt_err fd_load_visit(void *ctx, const uint8_t *data, size_t len)
{
    fd_load *ld = ctx;
    GT_TRY(arena_open(ld->d, ld->cs, ld->dst, ld->pt_len, &ld->pt_at, data, len));
    return gt_chunk_stream_final(ld->cs);
}

// One thread's run of segments [first, end), from its own mapping of the file.
typedef struct {
    int fd;
    uint64_t file_offset;  // of the body
    uint8_t *pt;           // the whole chunk's destination
    const gt_sim_msg *req;
    uint64_t first, end, nseg;
    gt_err err;
} fd_half;

static gt_err fd_half_visit(void *ctx, const uint8_t *data, size_t len)
{
    fd_half *f = ctx;
    return gt_chunk_segs_open(f->pt, data, len, f->req->len, f->req->seg_bytes, f->first,
                              f->end, f->req->iv, f->req->aad, f->req->key);
}

static void *fd_half_main(void *arg)
{
    fd_half *f = arg;
    uint32_t seg = f->req->seg_bytes;
    uint64_t from = gt_chunk_seg_body_offset(seg, f->first);
    uint64_t to = f->end == f->nseg ? gt_chunk_body_bytes(f->req->len, seg)
                                    : gt_chunk_seg_body_offset(seg, f->end);
    f->err = gt_file_map_visit(f->fd, f->file_offset + from, to - from, fd_half_visit, f);
    return NULL;
}

// The two-thread open; GT_E_AUTH if any segment failed (the caller wipes the buffer).
static gt_err fd_load_two(devd *d, int fd, const gt_sim_msg *req, uint64_t dst)
{
    uint64_t nseg = gt_chunk_seg_count(req->len, req->seg_bytes);
    fd_half half[2] = {
        {fd, req->file_offset, d->arena + dst, req, 0, (nseg + 1) / 2, nseg, GT_OK},
        {fd, req->file_offset, d->arena + dst, req, (nseg + 1) / 2, nseg, nseg, GT_OK},
    };
    pthread_t th;
    bool worker = pthread_create(&th, NULL, fd_half_main, &half[1]) == 0;
    if (!worker) {
        half[0].end = nseg;  // no second thread to be had: all here, same result
    }
    fd_half_main(&half[0]);
    if (worker) {
        pthread_join(th, NULL);
    }
    return gt_is_ok(half[0].err) ? half[1].err : half[0].err;
}

static gt_err do_load_sealed_fd(devd_session *h, const gt_sim_msg *req, int fd)
{
    devd *d = h->d;
    gt_buftab_entry *b = NULL;
    struct stat st;
    uint64_t body = 0;
    gt_err s = fd >= 0 ? GT_OK : gt_errf(GT_E_ARG, "device: load_sealed_fd without a file");
    if (gt_is_ok(s)) {
        s = load_body_bytes(req, &body);
    }
    if (gt_is_ok(s)) {
        s = buf_access(h, req->handle, req->offset, req->len, "load_sealed_fd", &b);
    }
    if (gt_is_ok(s) && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
                        req->file_offset > (uint64_t)st.st_size ||
                        (uint64_t)st.st_size - req->file_offset < body)) {
        s = gt_errf(GT_E_ARG, "device: load_sealed_fd: not a regular file holding %llu bytes "
                    "at offset %llu", (unsigned long long)body,
                    (unsigned long long)req->file_offset);
    }
    if (!gt_is_ok(s)) {
        if (fd >= 0) {
            close(fd);
        }
        return send_status(h, s);
    }
    uint64_t handle = req->handle, owner = b->owner;
    uint64_t dst = b->at.offset + req->offset;
    gt_err err = GT_OK;
    if (d->pg == NULL && gt_chunk_seg_count(req->len, req->seg_bytes) >= 2) {
        err = fd_load_two(d, fd, req, dst);
    } else {
        // Read in place through a mapping (no copy out of the page cache); the holder
        // truncating its file meanwhile is GT_E_IO, not the end of devd.
        fd_load ld = {.d = d, .dst = dst, .pt_len = req->len};
        err = gt_chunk_stream_new(&ld.cs, req->len, req->seg_bytes, req->iv, req->aad, req->key);
        if (gt_is_ok(err)) {
            err = gt_file_map_visit(fd, req->file_offset, body, fd_load_visit, &ld);
        }
        gt_chunk_stream_free(ld.cs);
    }
    bool auth_failed = err.code == GT_E_AUTH;
    close(fd);
    if (!gt_is_ok(err)) {
        buf_release_again(d, handle, owner);  // wiped
        // a file error is the request's, not the channel's: the session goes on
        return send_status(h, auth_failed ? gt_errf(GT_E_AUTH, "device: sealed chunk "
                                                    "authentication failed; buffer 0x%llx wiped "
                                                    "and freed", (unsigned long long)handle)
                                          : err);
    }
    return send_status(h, loaded(d, b, req));
}

// LOAD_SEALED_WRAPPED (a holder in enclave mode, docs/holder-enclave.md): the chunk key comes
// wrapped by the holder's enclave to this session's devd key, bound to the session's agreement,
// the chunk the AAD names, this trip's ticket and this session's server hello. devd unwraps it
// here; anything else (another devd, trip, chunk, agreement, a changed byte) is refused and
// nothing is loaded. Then as LOAD_SEALED_FD.
static gt_err do_load_sealed_wrapped(devd_session *h, gt_sim_msg *req, int fd)
{
    uint8_t trip_id[GT_SHA256_BYTES], aad[GT_RELEASE_AAD_BYTES];
    gt_err s = gt_release_trip_id(trip_id, h->d->trip.ticket);
    if (gt_is_ok(s)) {
        // the load's AAD (data.h): dataset id 16 | u32le chunk | ...
        const uint8_t *c = req->aad + GT_DATASET_ID_BYTES;
        uint32_t chunk = (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 |
                         (uint32_t)c[3] << 24;
        gt_release_aad_build(aad, h->agreement, req->aad, chunk, trip_id,
                             h->keys.server_hello_hash);
        s = gt_release_unwrap(req->key, req->wrapped, sizeof req->wrapped, h->keys.server_sec,
                              aad);
    }
    if (!gt_is_ok(s)) {
        if (fd >= 0) {
            close(fd);
        }
        gt_log_warn("devd: a wrapped chunk key refused: %s", s.msg);
        return send_status(h, gt_errf(GT_E_AUTH, "device: %s", s.msg));
    }
    req->type = GT_SIM_REQ_LOAD_SEALED_FD;
    gt_err err = do_load_sealed_fd(h, req, fd);
    gt_secure_zero(req->key, sizeof req->key);
    return err;
}

// The holder's ALLOC: a HANDLE reply, or the refusal as a status.
static gt_err holder_alloc(devd_session *h, const gt_sim_msg *m)
{
    uint64_t hd = 0;
    gt_err e = buf_alloc(h, m->len, m->flags, &hd);
    if (!gt_is_ok(e)) {
        return send_status(h, e);
    }
    gt_sim_msg r;
    memset(&r, 0, sizeof r);
    r.type = GT_SIM_REP_HANDLE;
    r.handle = hd;
    return send_msg(h, &r);
}

// The holder's SIZE: a SIZE reply, or the lookup's failure as a status.
static gt_err holder_size(devd_session *h, const gt_sim_msg *m)
{
    gt_buftab_entry *b = NULL;
    gt_err e = buf_find(h, m->handle, &b);
    if (!gt_is_ok(e)) {
        return send_status(h, e);
    }
    gt_sim_msg r;
    memset(&r, 0, sizeof r);
    r.type = GT_SIM_REP_SIZE;
    r.len = b->bytes;
    return send_msg(h, &r);
}

// One record from the attached holder. *returned is set by RETURN and RETURN_STAY, *stay by
// RETURN_STAY.
static gt_err serve_holder_one(devd_session *h, bool *returned, bool *stay)
{
    gt_sim_msg m, r;
    int fd = -1;
    gt_err err = recv_msg_fd(h, &m, &fd);
    if (!gt_is_ok(err)) {
        if (fd >= 0) {
            close(fd);
        }
        return err;
    }
    if (fd >= 0 && m.type != GT_SIM_REQ_LOAD_SEALED_FD &&
        m.type != GT_SIM_REQ_LOAD_SEALED_WRAPPED) {
        close(fd);  // a descriptor nobody asked for
        fd = -1;
    }
    memset(&r, 0, sizeof r);
    switch (m.type) {
    case GT_SIM_REQ_ALLOC:
        err = holder_alloc(h, &m);
        break;
    case GT_SIM_REQ_FREE:
        err = send_status(h, buf_free(h, m.handle));
        break;
    case GT_SIM_REQ_SIZE:
        err = holder_size(h, &m);
        break;
    case GT_SIM_REQ_LOAD_SEALED:
        err = do_load_sealed(h, &m);
        break;
    case GT_SIM_REQ_LOAD_SEALED_FD:
        err = do_load_sealed_fd(h, &m, fd);  // closes fd
        break;
    case GT_SIM_REQ_LOAD_SEALED_WRAPPED:
        err = do_load_sealed_wrapped(h, &m, fd);  // closes fd
        break;
    case GT_SIM_REQ_SYNC:
        err = send_status(h, GT_OK);
        break;
    case GT_SIM_REQ_STAT:
        r.type = GT_SIM_REP_STAT;
        r.stat = stat_of(h->d);
        err = send_msg(h, &r);
        break;
    case GT_SIM_REQ_RETURN:
        *returned = true;
        break;
    case GT_SIM_REQ_RETURN_STAY:
        *returned = true;
        *stay = true;
        break;
    case GT_SIM_REQ_BYE:
        err = gt_errf(GT_E_PEER, "devd: the holder left without RETURN");
        break;
    case GT_SIM_REQ_COPY_IN:
    case GT_SIM_REQ_COPY_OUT:
    case GT_SIM_REQ_MEMSET:
    case GT_SIM_REQ_LAUNCH:
    case GT_SIM_REQ_LEND:
    case GT_SIM_REQ_TRIP_STATUS:
    case GT_SIM_REQ_RECALL:
    case GT_SIM_REQ_ATTACH:
        err = send_status(h, gt_errf(GT_E_POLICY, "device: a travelling holder may not %s "
                                     "(only alloc, load_sealed, size, free, return)",
                                     gt_sim_msg_name(m.type)));
        break;
    default:
        err = gt_errf(GT_E_STATE, "devd: unexpected %s message from the holder",
                      gt_sim_msg_name(m.type));
        break;
    }
    gt_secure_zero(&m, sizeof m);  // LOAD_SEALED's chunk key
    return err;
}

// The holder's first record: ATTACH with the ticket. Wrong ticket or another agreement: refused,
// the lend stands.
static gt_err attach_check(devd_session *h, const devd_session *t)
{
    devd *d = h->d;
    gt_sim_msg m;
    GT_TRY(recv_msg(h, &m));
    gt_err st = GT_OK;
    gt_trip_state to;
    unsigned fx;
    gt_err open = gt_trip_step(d->trip.state, GT_TRIP_EV_ATTACH, &to, &fx);  // asked, not taken
    if (m.type != GT_SIM_REQ_ATTACH) {
        st = gt_errf(GT_E_STATE, "devd: %s before attach (the device is lent)",
                     gt_sim_msg_name(m.type));
    } else if (!gt_is_ok(open)) {
        st = gt_err_wrap(open, "devd: the trip has ended");
    } else if (!gt_ct_equal(m.ticket, d->trip.ticket, GT_SIM_TICKET_BYTES)) {
        st = gt_errf(GT_E_AUTH, "devd: wrong travel ticket");
    } else if (!gt_ct_equal(h->agreement, t->agreement, GT_SHA256_BYTES)) {
        st = gt_errf(GT_E_POLICY, "devd: the holder's agreement hash is not the lending "
                     "trainer's");
    }
    gt_secure_zero(&m, sizeof m);
    gt_err e = send_status(h, st);
    return gt_is_ok(st) ? e : st;
}

static gt_err handshake(devd_session *s);
static void session_end(devd_session *s);
static void refuse_waiting(void *ctx);

// ---- holder sessions, fresh and parked --------------------------------------------------------

static void holder_end(devd_session *h)
{
    session_end(h);
    free(h);
}

static void parked_end(devd *d, size_t i, const char *why)
{
    devd_session *h = d->parked[i];
    memmove(&d->parked[i], &d->parked[i + 1], (d->nparked - i - 1) * sizeof *d->parked);
    d->nparked--;
    gt_log_info("devd: parked holder session %llu ended: %s", (unsigned long long)h->id, why);
    holder_end(h);
}

// Keeps h, its trip over, for its holder's next trip; the oldest parked session makes room.
static void park(devd *d, devd_session *h)
{
    if (h->bounce_used) {  // ciphertext only, but nothing of a trip stays behind it
        gt_secure_zero(h->bounce, h->bounce_bytes);
        h->bounce_used = false;
    }
    if (d->nparked == DEVD_MAX_PARKED) {
        parked_end(d, 0, "room for a newer one");
    }
    d->parked[d->nparked++] = h;
    gt_log_info("devd: holder session %llu parked for its next trip (%zu parked)",
                (unsigned long long)h->id, d->nparked);
}

// A parked session is re-attested (ended) once its handshake is DEVD_PARK_MAX_S old.
static void parked_expire(devd *d)
{
    double now = gt_now_seconds();
    for (size_t i = d->nparked; i-- > 0;) {
        if (now - d->parked[i]->attested_at > DEVD_PARK_MAX_S) {
            parked_end(d, i, "attested too long ago");
        }
    }
}

// Parked session i turned readable while the device is not lent: its holder left, or sent
// something with no trip to attach to (an ATTACH after the lease ran out). The session ends;
// an ATTACH is answered first, so that holder learns why at once.
static void parked_stray(devd *d, size_t i)
{
    devd_session *h = d->parked[i];
    uint8_t body[GT_SIM_MAX_REC_PLAIN + GT_AEAD_TAG_BYTES];
    gt_sim_watch w = {.fd = -1, .timeout_ms = 1000};
    gt_sim_msg m;
    memset(&m, 0, sizeof m);
    gt_err e = gt_sim_msg_recv(h->fd, &h->keys, body, sizeof body, NULL, &w, &m);
    if (gt_is_ok(e) && m.type == GT_SIM_REQ_ATTACH) {
        gt_err ignored = send_status(h, gt_errf(GT_E_STATE, "devd: the device is not lent (that "
                                                "trip has ended)"));
        (void)ignored;
    }
    gt_secure_zero(&m, sizeof m);
    parked_end(d, i, gt_is_ok(e) ? "a request with no trip to attach to"
                                 : "its holder went away");
}

// While a holder has the device: a second connection is refused, the lending trainer may ask
// for the trip's status, the lease bounds every wait.
static void holder_watch(devd_session *h, devd_session *t, int timeout_ms)
{
    devd *d = h->d;
    h->watch = (gt_sim_watch){.fd = d->listen_fd, .on_watch = refuse_waiting, .ctx = d,
                              .timeout_ms = timeout_ms, .stop = d->cfg->stop,
                              .fd2 = t->fd, .on_watch2 = trainer_watch, .ctx2 = t,
                              .abort2 = &d->trip.trainer_gone, .deadline = d->trip.lease_end};
}

// One trip of an attested holder session (fresh or parked): ATTACH with the ticket, then its
// requests until RETURN / RETURN_STAY, its departure or the lease's end. Afterwards the session
// is parked (RETURN_STAY) or ended. A refused attach leaves the lend standing (unless the lease
// ran out meanwhile: the lend loop sees it).
// Why a holder's trip ended without its RETURN, as the state machine's event.
static gt_trip_event holder_failure(const devd *d, gt_err err)
{
    if (d->trip.trainer_gone) {
        return GT_TRIP_EV_TRAINER_GONE;
    }
    if (d->cfg->stop != NULL && *d->cfg->stop) {
        return GT_TRIP_EV_DEVICE_FAULT;
    }
    if (err.code == GT_E_TIMEOUT && gt_now_seconds() >= d->trip.lease_end) {
        return GT_TRIP_EV_EXPIRE;
    }
    return GT_TRIP_EV_HOLDER_LOST;  // BYE, EOF, a protocol or channel error, an idle timeout
}

static void holder_trip(devd *d, devd_session *t, devd_session *h)
{
    holder_watch(h, t, DEVD_HELLO_TIMEOUT_MS);
    gt_err err = attach_check(h, t);
    unsigned fx = 0;
    if (gt_is_ok(err)) {
        err = trip_step(d, GT_TRIP_EV_ATTACH, GT_E_NONE, &fx);
    }
    if (!gt_is_ok(err)) {
        if (err.code == GT_E_PEER) {
            gt_log_info("devd: holder session %llu left", (unsigned long long)h->id);
        } else {
            gt_log_warn("devd: attach refused (session %llu): %s", (unsigned long long)h->id,
                        err.msg);
        }
        // the lend stands (DROP_CONN); after the trip ended the machine refuses, same close
        gt_err ignored = trip_step(d, GT_TRIP_EV_ATTACH_REFUSED, GT_E_NONE, NULL);
        (void)ignored;
        holder_end(h);
        return;
    }
    if (fx & GT_TRIP_FX_BIND_HOLDER) {
        d->trip.holder = h->id;
    }
    h->watch.timeout_ms = d->cfg->idle_timeout_ms > 0 ? d->cfg->idle_timeout_ms : 0;
    gt_log_info("devd: holder session %llu attached to the device lent by session %llu",
                (unsigned long long)h->id, (unsigned long long)t->id);
    bool returned = false, stay = false;
    while (gt_is_ok(err) && !returned) {
        err = serve_holder_one(h, &returned, &stay);
        if (gt_is_ok(err) && d->pg != NULL && gt_pager_failed(d->pg)) {
            err = gt_errf(GT_E_AUTH, "the paging store failed a check: trip failed");
        }
    }
    if (returned) {
        err = trip_step(d, stay ? GT_TRIP_EV_RETURN_STAY : GT_TRIP_EV_RETURN, GT_E_NONE, &fx);
        gt_err e = send_status(h, err);
        if ((fx & GT_TRIP_FX_PARK_HOLDER) && gt_is_ok(e)) {
            park(d, h);
            return;
        }
    } else {
        gt_log_warn("devd: trip failed: %s", err.msg);
        gt_err e = trip_step(d, holder_failure(d, err),
                             d->trip.trainer_gone ? GT_E_PEER : err.code, NULL);
        if (!gt_is_ok(e)) {
            gt_log_warn("devd: %s", e.msg);
        }
    }
    holder_end(h);  // END_HOLDER (and every failure)
}

// A connection that arrived while the device is lent: the handshake, then its trip.
static void holder_fresh(devd *d, devd_session *t, int fd)
{
    devd_session *h = calloc(1, sizeof *h);
    if (h == NULL) {
        gt_log_warn("devd: out of memory for a holder session");
        close(fd);
        return;
    }
    h->d = d;
    h->fd = fd;
    h->bounce_fd = -1;
    h->id = ++d->sessions;
    h->holder = true;
    holder_watch(h, t, DEVD_HELLO_TIMEOUT_MS);
    struct timeval tv = {.tv_sec = DEVD_SEND_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    gt_err err = handshake(h);
    if (!gt_is_ok(err)) {
        gt_log_warn("devd: attach refused (session %llu): %s", (unsigned long long)h->id, err.msg);
        holder_end(h);
        return;
    }
    h->attested_at = gt_now_seconds();
    holder_trip(d, t, h);
}

// The device is lent: until the trip ends, serve trip_status to the trainer, refuse its other
// requests, and let one holder with the ticket attach: a new connection or a parked session. A
// fatal error ends the trainer's session (and with it every buffer, trip buffers included).
static gt_err lend_run(devd_session *t)
{
    devd *d = t->d;
    parked_expire(d);
    while (d->trip.state == GT_TRIP_LENT) {
        if (d->cfg->stop != NULL && *d->cfg->stop) {
            GT_TRY(trip_step(d, GT_TRIP_EV_DEVICE_FAULT, GT_E_STATE, NULL));
            return gt_errf(GT_E_STATE, "devd: stopping");
        }
        double left = d->trip.lease_end - gt_now_seconds();
        if (left <= 0) {
            gt_log_warn("devd: lease expired before a holder attached");
            GT_TRY(trip_step(d, GT_TRIP_EV_EXPIRE, GT_E_TIMEOUT, NULL));
            break;
        }
        struct pollfd pfd[2 + DEVD_MAX_PARKED] = {{.fd = d->listen_fd, .events = POLLIN},
                                                  {.fd = t->fd, .events = POLLIN}};
        size_t n = 2;
        for (size_t i = 0; i < d->nparked; i++) {
            pfd[n++] = (struct pollfd){.fd = d->parked[i]->fd, .events = POLLIN};
        }
        int ms = left > 0.2 ? 200 : (int)(left * 1000) + 1;
        if (poll(pfd, n, ms) <= 0) {
            continue;
        }
        if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            gt_err e = trainer_while_lent(t);
            if (!gt_is_ok(e)) {
                GT_TRY(trip_step(d, GT_TRIP_EV_TRAINER_GONE, GT_E_PEER, NULL));
                return e;
            }
            if (d->trip.state != GT_TRIP_LENT) {
                break;  // recalled
            }
        }
        if (pfd[0].revents & POLLIN) {
            int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                holder_fresh(d, t, fd);
            }
        } else {
            for (size_t i = 2; i < n; i++) {
                if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                    devd_session *h = d->parked[i - 2];
                    memmove(&d->parked[i - 2], &d->parked[i - 1],
                            (d->nparked - (i - 1)) * sizeof *d->parked);
                    d->nparked--;
                    holder_trip(d, t, h);
                    break;  // the parked list changed
                }
            }
        }
        if (d->trip.trainer_gone) {
            // still lent (a holder's trip already failed with TRAINER_GONE otherwise)
            gt_err ignored = trip_step(d, GT_TRIP_EV_TRAINER_GONE, GT_E_PEER, NULL);
            (void)ignored;
            return gt_errf(GT_E_PEER, "devd: the lending trainer went away");
        }
    }
    d->trip.tsess = NULL;
    return GT_OK;
}

static gt_err do_lend(devd_session *t, const gt_sim_msg *req)
{
    devd *d = t->d;
    if (req->ms == 0 || req->ms > GT_SIM_MAX_LEASE_MS) {
        return send_status(t, gt_errf(GT_E_ARG, "device: lease of %u ms (1..%u)", req->ms,
                                      GT_SIM_MAX_LEASE_MS));
    }
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    gt_err e = gt_random_bytes(ticket, sizeof ticket);
    if (!gt_is_ok(e)) {
        return send_status(t, e);
    }
    e = trip_step(d, GT_TRIP_EV_LEND, GT_E_NONE, NULL);
    if (!gt_is_ok(e)) {
        gt_secure_zero(ticket, sizeof ticket);
        return send_status(t, e);
    }
    // NEW_TICKET: the previous trip's result is forgotten; ARM_LEASE: its end bounds the waits
    d->trip.nloaded = 0;
    d->trip.fail_code = 0;
    d->trip.holder = 0;
    d->trip.trainer_gone = false;
    memcpy(d->trip.ticket, ticket, sizeof ticket);
    gt_secure_zero(ticket, sizeof ticket);
    d->trip.trainer = t->id;
    d->trip.tsess = t;
    d->trip.lease_end = gt_now_seconds() + req->ms / 1000.0;
    gt_sim_msg r;
    memset(&r, 0, sizeof r);
    r.type = GT_SIM_REP_TICKET;
    memcpy(r.ticket, d->trip.ticket, sizeof r.ticket);
    e = send_msg(t, &r);
    gt_secure_zero(&r, sizeof r);
    if (!gt_is_ok(e)) {
        GT_TRY(trip_step(d, GT_TRIP_EV_TRAINER_GONE, GT_E_PEER, NULL));
        return e;
    }
    gt_log_info("devd: session %llu lent the device for %u ms", (unsigned long long)t->id,
                req->ms);
    return lend_run(t);
}

// ---- the server -------------------------------------------------------------------------------

static gt_err listen_on(const char *path, int *out)
{
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    GT_ENSURE(strlen(path) < sizeof addr.sun_path, GT_E_ARG, "devd: socket path too long: %s",
              path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    struct stat st;
    if (lstat(path, &st) == 0) {
        GT_ENSURE(S_ISSOCK(st.st_mode), GT_E_ARG, "devd: %s exists and is not a socket", path);
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0;
        if (probe >= 0) {
            close(probe);
        }
        GT_ENSURE(!live, GT_E_STATE, "devd: another devd is already serving %s", path);
        unlink(path);
    }
    // Bind and listen under a temporary name, then rename: a client never finds the path
    // before devd accepts on it.
    struct sockaddr_un tmp = addr;
    int tn = snprintf(tmp.sun_path, sizeof tmp.sun_path, "%s.%d", path, (int)getpid());
    GT_ENSURE(tn > 0 && (size_t)tn < sizeof tmp.sun_path, GT_E_ARG,
              "devd: socket path too long: %s", path);
    unlink(tmp.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    GT_ENSURE(fd >= 0, GT_E_IO, "devd: socket: %s", strerror(errno));
    mode_t old = umask(0077);  // only this user may connect
    int rc = bind(fd, (struct sockaddr *)&tmp, sizeof tmp);
    umask(old);
    if (rc != 0 || listen(fd, 8) != 0 || rename(tmp.sun_path, path) != 0) {
        gt_err e = gt_errf(GT_E_IO, "devd: cannot listen on %s: %s", path, strerror(errno));
        unlink(tmp.sun_path);
        close(fd);
        return e;
    }
    *out = fd;
    return GT_OK;
}

static gt_err arena_create(devd *d)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
        uint64_t ram = (uint64_t)pages * (uint64_t)page;
        char want[32], have[32];
        gt_format_size(want, sizeof want, d->arena_bytes);
        gt_format_size(have, sizeof have, ram);
        GT_ENSURE(d->arena_bytes <= ram / 4 * 3, GT_E_LIMIT,
                  "devd: --mem-limit %s is more than 3/4 of this machine's memory (%s)", want,
                  have);
    }
    double t0 = gt_now_seconds();
    void *p = mmap(NULL, d->arena_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    char sz[32];
    gt_format_size(sz, sizeof sz, d->arena_bytes);
    GT_ENSURE(p != MAP_FAILED, GT_E_NOMEM, "devd: cannot reserve %s of device memory: %s", sz,
              strerror(errno));
    d->arena = p;
    // MAP_POPULATE faulted every page in once, here, as HBM simply exists; transfers never
    // fault. Device memory never lands in a core dump.
    madvise(p, d->arena_bytes, MADV_DONTDUMP);
    gt_log_info("devd: %s of device memory reserved and touched in %.3f s", sz,
                gt_now_seconds() - t0);
    return GT_OK;
}

// --paging-store: the arena is the pager's address space, of which at most --mem-limit is ever
// resident (docs/paging.md); nothing is reserved or touched up front.
static gt_err pager_create(devd *d)
{
    gt_pager_config pc = {.cap = d->arena_bytes, .page_bytes = d->cfg->page_bytes,
                          .store_dir = d->cfg->paging_store, .tab = d->tab,
                          .prefetch = d->cfg->prefetch};
    GT_TRY(gt_pager_new(&d->pg, &pc));
    d->arena = gt_pager_base(d->pg);
    gt_pager_stats st;
    gt_pager_stats_get(d->pg, &st);
    char cap[32], page[32];
    gt_format_size(cap, sizeof cap, st.cap);
    gt_format_size(page, sizeof page, st.page_bytes);
    gt_log_info("devd: paging on: at most %s resident, pages of %s sealed to %s", cap, page,
                d->cfg->paging_store);
    return GT_OK;
}

// Accepts sessions, and watches parked sessions for strays, until *stop or --max-sessions.
static void serve_loop(devd *d)
{
    while (d->cfg->stop == NULL || *d->cfg->stop == 0) {
        if (d->cfg->max_sessions != 0 && d->sessions >= d->cfg->max_sessions) {
            break;
        }
        parked_expire(d);
        struct pollfd pfd[1 + DEVD_MAX_PARKED] = {{.fd = d->listen_fd, .events = POLLIN}};
        size_t n = 1;
        for (size_t i = 0; i < d->nparked; i++) {
            pfd[n++] = (struct pollfd){.fd = d->parked[i]->fd, .events = POLLIN};
        }
        int pr = poll(pfd, n, 200);
        if (pr <= 0) {
            continue;  // timeout or EINTR: look at *stop again
        }
        for (size_t i = n; i-- > 1;) {  // from the end: parked_stray shifts the rest down
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                parked_stray(d, i - 1);
            }
        }
        if ((pfd[0].revents & POLLIN) == 0) {
            continue;
        }
        int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        session_run(d, fd);
    }
}

gt_err gt_devd_run(const gt_devd_config *cfg)
{
    gt_err err = GT_OK;
    devd d;
    memset(&d, 0, sizeof d);
    d.cfg = cfg;
    d.listen_fd = -1;
    d.arena_bytes = cfg->mem_limit ? cfg->mem_limit : GT_DEVD_DEFAULT_MEM;
    d.slot_count = cfg->slot_count ? cfg->slot_count : DEVD_DEFAULT_SLOTS;
    d.slot_bytes = cfg->slot_bytes ? cfg->slot_bytes : DEVD_DEFAULT_SLOT_BYTES;
    GT_ENSURE(d.slot_count >= 2 && d.slot_count <= GT_SIM_MAX_SLOTS, GT_E_ARG,
              "devd: %u bounce slots (2..%u)", d.slot_count, GT_SIM_MAX_SLOTS);
    GT_ENSURE(d.slot_bytes >= GT_SIM_MIN_SLOT_BYTES && d.slot_bytes <= GT_SIM_MAX_SLOT_BYTES &&
                  d.slot_bytes % 4096 == 0,
              GT_E_ARG, "devd: bounce slot of %u bytes (4 KiB multiple, 4 KiB..64 MiB)",
              d.slot_bytes);
    GT_ENSURE(d.arena_bytes >= 4096, GT_E_ARG, "devd: memory limit of %llu bytes is too small",
              (unsigned long long)d.arena_bytes);
    gt_ops_cpu_set_threads(cfg->threads);  // devd's own OpenMP threads run launched ops
    d.stage = malloc(DEVD_STAGE_BYTES);
    d.rx = malloc(GT_SIM_MAX_FRAME);
    GT_ENSURE_GOTO(err, d.stage != NULL && d.rx != NULL, out, GT_E_NOMEM, "devd: out of memory");
    d.produce = cfg->attester.produce;
    d.produce_ctx = cfg->attester.ctx;
    d.appraise = cfg->attester.appraise;
    d.appraise_ctx = cfg->attester.ctx;
    if (d.produce == NULL) {
        GT_TRY_GOTO(err, gt_sim_identity_open(&d.identity, cfg->identity_dir, cfg->vendor_root_dir),
                    out);
        d.produce = gt_sim_identity_produce;
        d.produce_ctx = d.identity;
    }
    if (d.appraise == NULL) {
        GT_TRY_GOTO(err, gt_sim_admission_open(&d.admission, cfg->admit_policy, cfg->client_root),
                    out);
        d.appraise = gt_sim_admission_appraise;
        d.appraise_ctx = d.admission;
    }
    // Paging: --mem-limit caps what is resident; the pager's arena refuses what does not fit.
    gt_buftab_config tc = {.mem_limit = cfg->paging_store ? 0 : d.arena_bytes,
                           .max_buffers = DEVD_MAX_BUFFERS,
                           .limit_hint = "devd --mem-limit, or page beyond it: --paging-store DIR"};
    GT_TRY_GOTO(err, gt_buftab_new(&d.tab, &tc), out);
    // The socket first: a path devd cannot serve on (no such folder, not writable, a file that
    // is not a socket, another devd's) fails at once, before the arena is reserved and touched
    // (seconds for GiBs). Clients that connect meanwhile wait in the backlog.
    GT_TRY_GOTO(err, listen_on(cfg->socket_path, &d.listen_fd), out);
    GT_TRY_GOTO(err, cfg->paging_store ? pager_create(&d) : arena_create(&d), out);
    gt_log_info("devd: serving %s", cfg->socket_path);
    serve_loop(&d);
out:
    while (d.nparked > 0) {
        parked_end(&d, d.nparked - 1, "devd stopping");
    }
    if (d.listen_fd >= 0) {
        close(d.listen_fd);
        unlink(cfg->socket_path);
    }
    if (d.pg != NULL) {
        gt_pager_free(d.pg);  // wipes what is resident, removes the store
    } else if (d.arena != NULL) {
        gt_secure_zero(d.arena, d.arena_bytes);
        munmap(d.arena, d.arena_bytes);
    }
    gt_buftab_free(d.tab);
    free(d.extents);
    free(d.stage);
    free(d.rx);
    gt_sim_identity_free(d.identity);
    gt_sim_admission_free(d.admission);
    return err;
}
