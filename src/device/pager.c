// The pager (device.h "the pager", docs/paging.md): a virtual arena of whole pages of which at
// most `cap` bytes are readable at once. A resident page is a frame of a fixed pool (a memfd of
// the cap's size) mapped at its address. A page that has to make room is sealed into an untrusted
// store file (AES-256-GCM under a key only this pager has), its frame wiped and returned to the
// pool, and its address mapped PROT_NONE, so a stray access is a crash rather than a silent read.
// Each page's version is a leaf of a binary hash tree stored in a second untrusted file; the
// tree's top levels (root included) stay here. A fault-in recomputes the path from the leaf and
// its stored siblings to the first node kept here, and opens the blob with the version, the
// buffer, the page and its label in the AAD: a stale, replayed, swapped, truncated, deleted or
// altered page fails, and the pager is then failed for good. With prefetch, a worker thread
// moves pages too (ahead of the caller, from the op stream it records): all shared state is
// under one lock, and a page being moved is PG_MOVING, owned by the thread moving it.
#include <gputravel/crypto.h>
#include <gputravel/device.h>

#include <assert.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "opstream.h"
#include "pager_test.h"

enum { PG_FREE = 0, PG_ZERO, PG_RESIDENT, PG_SEALED, PG_MOVING };
enum { LOAD_DEMAND, LOAD_AHEAD, LOAD_ASSIST };  // who brought a page in, and why

#define NO_PAGE UINT32_MAX
#define NO_FRAME UINT32_MAX
#define TREE_HASH GT_SHA256_BYTES
#define TREE_MAX_LEVELS 32
#define PAGER_MAX_PAGES (1u << 26)
#define PAGER_MIN_CAP_PAGES 4u
#define PAGER_AAD_BYTES 48
#define TREE_CACHE_NODES (1u << 13)  // 256 KiB of the tree's top kept here (14 levels)
#define VICTIM_SCAN 512u              // resident pages looked at for one eviction, oldest first
#define PLAN_MAX_LAUNCHES 256u        // launches predicted ahead at most (and the cap's pages)
#define OPSTREAM_LAUNCHES (1u << 14)  // launches remembered: more than a GPT-2 step has
#define EACH_RUN_PAGES 32u            // pages a piecewise access holds at once, at most

typedef struct {
    uint64_t handle, owner;  // the buffer it belongs to (handle 0: not placed)
    uint32_t first;          // that buffer's first page
    uint32_t prev, next;     // the LRU list of resident pages, oldest first
    uint32_t frame;          // resident: the pool frame mapped at it
    uint8_t state;
    bool dirty;              // resident and maybe changed since it came in: reseal to evict
    bool has_blob;           // the store holds its newest version (it was sealed before)
    bool prefetched;         // brought in ahead by the worker, not used since
    bool mapped;             // its address maps its frame (else PROT_NONE): see map_range
    bool claimed;            // chosen for a batch of evictions (evict_batch): no one else's victim
    uint64_t pin;            // the hold it was last needed by: never evicted during it
    gt_label sealed_label;   // the label bound into its blob's AAD
    gt_label live_label;     // its buffer's label at its last write: what a seal binds
    uint64_t plan_gen;       // the plan that lists it (pg->plan_gen: the current one) ...
    uint32_t plan_pos;       // ... at this position
} page_meta;

typedef struct {
    uint32_t first, count;
} extent;

// One thread's GCM key schedules (the caller's, the worker's): made once per key, not per page.
typedef struct {
    gt_aead_keyed *seal, *open;
} mover;

struct gt_pager {
    uint8_t key[GT_AEAD_KEY_BYTES];
    uint8_t (*cache)[TREE_HASH];  // the tree's top nodes 1 .. cache_n - 1: the trusted copy
    uint64_t cache_n;
    uint8_t defaults[TREE_MAX_LEVELS + 1][TREE_HASH];  // an untouched subtree's hash, per level
    uint8_t *base;
    uint64_t page, cap_pages, virt;
    uint32_t npages, nleaves;
    int levels;
    page_meta *pages;
    uint32_t lru_head, lru_tail;
    extent *extents;  // placed buffers, sorted by first page
    size_t nextents, cap_extents;
    mover mv[2];  // [0] the caller's, [1] the worker's
    // The frames: cap_pages pages of a memfd, the only memory a resident page can have. A
    // resident page maps its frame; a free frame is all zeros (wiped when its page left).
    int pool_fd;
    uint8_t *pool;  // all frames, mapped once: where pages are opened and wiped
    uint32_t *free_frames, nfree;
    uint32_t *free_at;  // frame f's index in free_frames, NO_FRAME when it is not free
    // Victims of one batch (per thread: [0] the caller's room_for, [1] the worker's) whose
    // frames are wiped but still mapped at their addresses: unmapped together, in runs, before
    // any of those frames is used again (pend_flush).
    uint32_t *pend[2], npend[2];
    uint32_t *claim[2];  // the victims a thread's evict_batch chose, before it evicts them
    int store_fd, tree_fd;
    char store_path[600], tree_path[600];
    const gt_buftab *tab;
    uint64_t epoch;
    atomic_bool failed;  // read by the owner without the lock (gt_pager_failed)
    uint64_t nresident, nsealed, peak, page_outs, fault_ins, clean_drops;
    uint64_t demand_faults, prefetch_issued, prefetch_hits, prefetch_wasted, assist_faults;
    uint64_t pre_evictions, ops_in_parts, discards;
    atomic_uint_least64_t map_calls;  // counted by either thread, with or without the lock
    // Threads: everything above and below is under mu, but for a PG_MOVING page's bytes and
    // frame, which only its mover touches. busy: pages moving now (both threads).
    pthread_mutex_t mu;
    pthread_cond_t wake;   // the worker: a new plan, or stop
    pthread_cond_t moved;  // a page finished moving, or a frame came free
    pthread_t worker;
    bool has_worker, stop, sync_made;
    uint32_t busy;
    // The plan: pages in the order the caller will need them (plan_now first: the current
    // access; then predicted). plan_head: where the caller is; wcur: where the worker is.
    gt_opstream *os;
    uint32_t *plan, plan_n, plan_head, plan_now, wcur, reserve;
    uint64_t plan_gen;
    bool plan_full;  // the plan reached the cap: memory is short
    uint64_t idle_gen;  // the worker found nothing more to do in this plan
    bool test_sync;     // tests: each launch waits until the worker is done with its plan
};

// ---- the hash tree over page versions ---------------------------------------------------------
// Leaf l is SHA-256(0x00 || le64 version of page l); a node is SHA-256(0x01 || left || right).
// In the tree file, internal node i (heap order, root 1) is 32 bytes at i * 32 and leaf l's
// version 8 bytes at nleaves * 32 + l * 8. The file starts sparse: 32 zero bytes read as the
// untouched subtree of that level and 8 zero bytes as version 0, a fixed reading of the bytes,
// so whatever the store holds is still checked against the root.

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static gt_err leaf_hash(uint64_t version, uint8_t out[TREE_HASH])
{
    uint8_t in[9] = {0x00};
    put_le64(in + 1, version);
    return gt_hash(GT_HASH_SHA256, out, in, sizeof in);
}

static gt_err node_hash(const uint8_t *left, const uint8_t *right, uint8_t out[TREE_HASH])
{
    uint8_t in[1 + 2 * TREE_HASH] = {0x01};
    memcpy(in + 1, left, TREE_HASH);
    memcpy(in + 1 + TREE_HASH, right, TREE_HASH);
    return gt_hash(GT_HASH_SHA256, out, in, sizeof in);
}

static gt_err store_read(int fd, void *buf, size_t n, uint64_t at, const char *what)
{
    ssize_t got = pread(fd, buf, n, (off_t)at);
    GT_ENSURE(got == (ssize_t)n, GT_E_AUTH, "paging: the untrusted store is short at %s", what);
    return GT_OK;
}

static gt_err store_write(int fd, const void *buf, size_t n, uint64_t at)
{
    ssize_t put = pwrite(fd, buf, n, (off_t)at);
    GT_ENSURE(put == (ssize_t)n, GT_E_IO, "paging: cannot write the store (%zd of %zu bytes)",
              put, n);
    return GT_OK;
}

static uint64_t leaf_at(const gt_pager *pg, uint32_t leaf)
{
    return (uint64_t)pg->nleaves * TREE_HASH + (uint64_t)leaf * 8;
}

static gt_err leaf_version(gt_pager *pg, uint32_t leaf, uint64_t *version)
{
    uint8_t raw[8];
    GT_TRY(store_read(pg->tree_fd, raw, sizeof raw, leaf_at(pg, leaf), "a page version"));
    gt_reader r = gt_reader_init(raw, sizeof raw);
    return gt_reader_u64le(&r, version);
}

// The value of node n at level lv (0: a leaf) as the store holds it.
static gt_err node_get(gt_pager *pg, uint64_t n, int lv, uint8_t out[TREE_HASH])
{
    if (lv == 0) {
        uint64_t v = 0;
        GT_TRY(leaf_version(pg, (uint32_t)(n - pg->nleaves), &v));
        return leaf_hash(v, out);
    }
    static const uint8_t zero[TREE_HASH];
    GT_TRY(store_read(pg->tree_fd, out, TREE_HASH, n * TREE_HASH, "a tree node"));
    if (memcmp(out, zero, TREE_HASH) == 0) {
        memcpy(out, pg->defaults[lv], TREE_HASH);
    }
    return GT_OK;
}

// The parent of h and its sibling sib, h being node n.
static gt_err climb_one(uint64_t n, const uint8_t *h, const uint8_t *sib, uint8_t out[TREE_HASH])
{
    return n & 1 ? node_hash(sib, h, out) : node_hash(h, sib, out);
}

// Nodes below cache_n (the root, 1, and the levels under it down to cache_n / 2 .. cache_n - 1)
// are kept here, trusted; the rest only in the store. A level is all cached or not at all.
static bool node_cached(const gt_pager *pg, uint64_t n) { return n < pg->cache_n; }

// Page leaf's stored version, checked against the first cached node above it; sib receives the
// siblings below that node (sib[0]: the sibling leaf, read with it in one pread).
static gt_err tree_check(gt_pager *pg, uint32_t leaf, uint64_t *version, uint8_t sib[][TREE_HASH])
{
    uint8_t raw[16], h[TREE_HASH];
    GT_TRY(store_read(pg->tree_fd, raw, sizeof raw, leaf_at(pg, leaf & ~1u), "a page version"));
    gt_reader r = gt_reader_init(raw, sizeof raw);
    uint64_t v[2] = {0, 0};
    GT_TRY(gt_reader_u64le(&r, &v[0]));
    GT_TRY(gt_reader_u64le(&r, &v[1]));
    *version = v[leaf & 1];
    GT_TRY(leaf_hash(*version, h));
    GT_TRY(leaf_hash(v[(leaf & 1) ^ 1], sib[0]));
    uint64_t n = (uint64_t)pg->nleaves + leaf;
    for (int lv = 0; !node_cached(pg, n); lv++, n >>= 1) {
        if (lv > 0) {
            GT_TRY(node_get(pg, n ^ 1, lv, sib[lv]));
        }
        GT_TRY(climb_one(n, h, sib[lv], h));
    }
    GT_ENSURE(gt_ct_equal(h, pg->cache[n], TREE_HASH), GT_E_AUTH,
              "paging: the version tree does not match its root at page %u", leaf);
    return GT_OK;
}

// Sets page leaf to version (its siblings sib checked by tree_check just before): the new path
// below the cache goes to the store, the cached part (up to the root) is updated here.
static gt_err tree_set(gt_pager *pg, uint32_t leaf, uint64_t version, uint8_t sib[][TREE_HASH])
{
    uint8_t h[TREE_HASH], raw[8];
    GT_TRY(leaf_hash(version, h));
    uint64_t n = (uint64_t)pg->nleaves + leaf;
    for (int lv = 0; !node_cached(pg, n); lv++) {
        GT_TRY(climb_one(n, h, sib[lv], h));
        n >>= 1;
        if (!node_cached(pg, n)) {
            GT_TRY(store_write(pg->tree_fd, h, TREE_HASH, n * TREE_HASH));
        }
    }
    put_le64(raw, version);
    GT_TRY(store_write(pg->tree_fd, raw, sizeof raw, leaf_at(pg, leaf)));
    for (memcpy(pg->cache[n], h, TREE_HASH); n > 1; n >>= 1) {
        GT_TRY(climb_one(n, pg->cache[n], pg->cache[n ^ 1], pg->cache[n >> 1]));
    }
    return GT_OK;
}

static gt_err tree_init(gt_pager *pg)
{
    GT_TRY(leaf_hash(0, pg->defaults[0]));
    for (int lv = 1; lv <= pg->levels; lv++) {
        GT_TRY(node_hash(pg->defaults[lv - 1], pg->defaults[lv - 1], pg->defaults[lv]));
    }
    for (uint64_t n = 1, lv = (uint64_t)pg->levels; n < pg->cache_n; n++) {
        lv -= (n & (n - 1)) == 0 && n > 1;  // a power of two starts the next level down
        memcpy(pg->cache[n], pg->defaults[lv], TREE_HASH);
    }
    return GT_OK;
}

// ---- the resident list ------------------------------------------------------------------------

static void lru_remove(gt_pager *pg, uint32_t p)
{
    page_meta *m = &pg->pages[p];
    if (m->prev != NO_PAGE) {
        pg->pages[m->prev].next = m->next;
    } else {
        pg->lru_head = m->next;
    }
    if (m->next != NO_PAGE) {
        pg->pages[m->next].prev = m->prev;
    } else {
        pg->lru_tail = m->prev;
    }
    m->prev = m->next = NO_PAGE;
}

static void lru_push(gt_pager *pg, uint32_t p)
{
    page_meta *m = &pg->pages[p];
    m->prev = pg->lru_tail;
    m->next = NO_PAGE;
    if (pg->lru_tail != NO_PAGE) {
        pg->pages[pg->lru_tail].next = p;
    } else {
        pg->lru_head = p;
    }
    pg->lru_tail = p;
}


// ---- one page in and out ----------------------------------------------------------------------
// Both threads move pages the same way, holding the lock except around the crypto, the store's
// blob I/O and the wipe: the page is PG_MOVING meanwhile (in no list, touched by no one else),
// and its frame is the mover's alone. What the tree check and the tree update read and write
// (the cached top, the tree file) is only touched with the lock held.

static void lock(gt_pager *pg) { pthread_mutex_lock(&pg->mu); }
static void unlock(gt_pager *pg) { pthread_mutex_unlock(&pg->mu); }

static uint8_t *page_addr(const gt_pager *pg, uint32_t p) { return pg->base + p * pg->page; }
static uint8_t *frame_addr(const gt_pager *pg, uint32_t f) { return pg->pool + f * pg->page; }

static uint64_t blob_at(const gt_pager *pg, uint32_t p)
{
    return (uint64_t)p * (pg->page + GT_AEAD_TAG_BYTES);
}

// (buffer, page of the buffer, page of the arena, version, label): a blob opens only as
// exactly this page at exactly this version with the label it left with.
static void page_aad(const gt_pager *pg, uint32_t p, uint64_t version, gt_label label,
                     uint8_t aad[PAGER_AAD_BYTES], uint8_t iv[GT_AEAD_IV_BYTES])
{
    const page_meta *m = &pg->pages[p];
    memcpy(aad, "gtpage01", 8);
    put_le64(aad + 8, m->handle);
    put_le64(aad + 16, p - m->first);
    put_le64(aad + 24, p);
    put_le64(aad + 32, version);
    put_le64(aad + 40, label);
    // A page's version only grows under one key, so (page, version) never repeats: the IV.
    for (int i = 0; i < 4; i++) {
        iv[i] = (uint8_t)(p >> (8 * i));
    }
    put_le64(iv + 4, version);
}

// Pages [p, p + n) mapped to nothing (PROT_NONE), so a stray access is a crash: one call for a
// run of pages (the kernel's cost is mostly per call: the mapping's split, the TLB flush of
// every thread).
static void run_unmap(gt_pager *pg, uint32_t p, uint32_t n)
{
    uint8_t *a = page_addr(pg, p);
    void *r = mmap(a, (size_t)n * pg->page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
                   MAP_NORESERVE, -1, 0);
    atomic_fetch_add_explicit(&pg->map_calls, 1, memory_order_relaxed);
    if (r == MAP_FAILED) {  // out of mappings: the frames stay mapped, but unreadable
        (void)mprotect(a, (size_t)n * pg->page, PROT_NONE);
    }
    for (uint32_t i = 0; i < n; i++) {
        pg->pages[p + i].mapped = false;
    }
}

static void page_unmap(gt_pager *pg, uint32_t p)
{
    if (pg->pages[p].mapped) {
        run_unmap(pg, p, 1);
    }
}

static void frame_free(gt_pager *pg, uint32_t f)
{
    pg->free_at[f] = pg->nfree;
    pg->free_frames[pg->nfree++] = f;
    pthread_cond_broadcast(&pg->moved);  // a caller may wait for a frame
}

// A free frame for page p (lock held, nfree > 0): the one after its left neighbour's when that
// is free, so that consecutive pages sit in consecutive frames whoever of the two threads
// brings them in (map_range then maps them with one call); else the last one freed.
static uint32_t frame_take(gt_pager *pg, uint32_t p)
{
    uint32_t f = pg->free_frames[pg->nfree - 1];
    if (p > 0) {
        const page_meta *l = &pg->pages[p - 1];
        uint32_t want = l->frame + 1;
        if ((l->state == PG_RESIDENT || l->state == PG_MOVING) && want < pg->cap_pages &&
            pg->free_at[want] != NO_FRAME) {
            f = want;
        }
    }
    uint32_t i = pg->free_at[f], top = pg->free_frames[pg->nfree - 1];
    pg->free_frames[i] = top;
    pg->free_at[top] = i;
    pg->nfree--;
    pg->free_at[f] = NO_FRAME;
    return f;
}

// Resident page p's frame wiped and back in the pool, its address already unmapped (lock held).
static void frame_forget(gt_pager *pg, uint32_t p)
{
    page_meta *m = &pg->pages[p];
    gt_secure_zero(frame_addr(pg, m->frame), pg->page);
    frame_free(pg, m->frame);
    lru_remove(pg, p);
    pg->nresident--;
    pg->prefetch_wasted += m->prefetched;
    m->prefetched = false;
}

// Gone from readable memory at once (lock held): its frame wiped and back in the pool.
static void page_drop(gt_pager *pg, uint32_t p)
{
    page_unmap(pg, p);
    frame_forget(pg, p);
}

// Every resident page wiped (pinned: all of them, or only the unpinned ones, which the caller is
// not using now), and the store emptied.
static void pager_wipe(gt_pager *pg, bool pinned)
{
    for (uint32_t p = pg->lru_head, next; p != NO_PAGE; p = next) {
        next = pg->pages[p].next;
        if (pinned || pg->pages[p].pin != pg->epoch) {
            page_drop(pg, p);
            pg->pages[p].state = PG_ZERO;
        }
    }
    if (pg->store_fd >= 0) {
        (void)ftruncate(pg->store_fd, 0);
    }
}

static void pager_wipe_all(gt_pager *pg) { pager_wipe(pg, true); }

static bool on_worker(const gt_pager *pg)
{
    return pg->has_worker && pthread_equal(pthread_self(), pg->worker);
}

// A check failed: nothing of this pager is trusted any more. Everything resident is wiped now
// but for what the caller holds when the worker found it (a launch running on its pages): the
// caller wipes those itself as soon as it is back in the pager (caller_failed). A page the other
// thread is moving is wiped when it takes the lock back and finds this. The owner ends the
// session (and releases the buffers).
static gt_err pager_fail(gt_pager *pg, uint32_t p, gt_err why)
{
    pg->failed = true;
    pager_wipe(pg, !on_worker(pg));
    const page_meta *m = &pg->pages[p];
    return gt_errf(GT_E_AUTH,
                   "paging: device session torn down: page %llu of buffer %#llx failed its "
                   "check in the untrusted store (stale, swapped, cut, deleted or altered): %s",
                   (unsigned long long)(p - m->first), (unsigned long long)m->handle, why.msg);
}

static gt_err failed_err(void)
{
    return gt_errf(GT_E_AUTH, "paging: the untrusted store failed a check earlier; the device "
                              "session is torn down");
}

// The caller finds the pager failed (lock held): what it still held is wiped now.
static gt_err caller_failed(gt_pager *pg)
{
    pager_wipe_all(pg);
    return failed_err();
}

static void move_begin(gt_pager *pg, page_meta *m)
{
    m->state = PG_MOVING;
    pg->busy++;
    unlock(pg);
}

static void move_end(gt_pager *pg)
{
    lock(pg);
    pg->busy--;
    pthread_cond_broadcast(&pg->moved);
}

// Seals page p (plaintext in its frame, which no one writes while it moves) at version in
// place, frame and tag written to the store as its blob with one call. The frame then holds
// ciphertext, wiped next. Lock not held.
static gt_err seal_blob(gt_pager *pg, uint32_t p, uint64_t version, gt_label label, mover *mv,
                        uint8_t *frame)
{
    uint8_t aad[PAGER_AAD_BYTES], iv[GT_AEAD_IV_BYTES], tag[GT_AEAD_TAG_BYTES];
    page_aad(pg, p, version, label, aad, iv);
    GT_TRY(gt_aead_keyed_seal_detached(mv->seal, frame, frame, pg->page, aad, sizeof aad, iv,
                                       tag));
    struct iovec io[2] = {{frame, pg->page}, {tag, sizeof tag}};
    ssize_t put = pwritev(pg->store_fd, io, 2, (off_t)blob_at(pg, p));
    GT_ENSURE(put == (ssize_t)(pg->page + sizeof tag), GT_E_IO,
              "paging: cannot write the store (%zd of %llu bytes)", put,
              (unsigned long long)(pg->page + sizeof tag));
    return GT_OK;
}

// After the seal (lock held again): the version checked once more against the root with fresh
// siblings (other pages' updates changed them meanwhile), then set one higher.
static gt_err seal_commit(gt_pager *pg, uint32_t p, uint64_t version)
{
    uint8_t sib[TREE_MAX_LEVELS][TREE_HASH];
    uint64_t now = 0;
    GT_TRY(tree_check(pg, p, &now, sib));
    GT_ENSURE(now + 1 == version, GT_E_AUTH, "paging: a page's version changed in the store");
    return tree_set(pg, p, version, sib);
}

// Page v (resident, unpinned) out of protected memory, lock held: sealed into the store when it
// may have changed since it came in, else dropped (its blob, or a zero page, is still its
// content); its frame wiped. Evictions come in batches (evict_batch): a mapped page's address
// keeps mapping its wiped frame, and both go to the mover's pg->pend, unmapped and freed by
// pend_flush before any frame is handed out again; an unmapped one's frame is freed at once.
static gt_err evict(gt_pager *pg, uint32_t v, mover *mv)
{
    page_meta *m = &pg->pages[v];
    uint8_t sib[TREE_MAX_LEVELS][TREE_HASH];
    uint64_t version = 0;
    if (m->dirty) {  // checked before sealing: the version must be the root's, or an IV repeats
        gt_err err = tree_check(pg, v, &version, sib);
        if (!gt_is_ok(err)) {
            return pager_fail(pg, v, err);
        }
        version++;
    }
    bool dirty = m->dirty;
    uint32_t f = m->frame;
    lru_remove(pg, v);
    pg->nresident--;
    pg->prefetch_wasted += m->prefetched;
    m->prefetched = false;
    bool defer = m->mapped;  // not mapped: the worker's, in ahead and never held
    move_begin(pg, m);
    gt_err err = dirty ? seal_blob(pg, v, version, m->live_label, mv, frame_addr(pg, f)) : GT_OK;
    gt_secure_zero(frame_addr(pg, f), pg->page);
    move_end(pg);
    if (gt_is_ok(err) && dirty && !pg->failed) {
        err = seal_commit(pg, v, version);
    }
    if (defer) {
        int who = (int)(mv - pg->mv);
        pg->pend[who][pg->npend[who]++] = v;  // m->frame and m->mapped stay until pend_flush
    } else {
        frame_free(pg, f);
    }
    m->state = m->has_blob || dirty ? PG_SEALED : PG_ZERO;
    if (pg->failed) {
        m->state = PG_ZERO;
        return failed_err();
    }
    if (!gt_is_ok(err)) {  // its content is gone with the frame: the session cannot go on
        return pager_fail(pg, v, err);
    }
    pg->nsealed += m->state == PG_SEALED;
    if (dirty) {
        m->dirty = false;
        m->has_blob = true;
        m->sealed_label = m->live_label;
        pg->page_outs++;
    } else {
        pg->clean_drops++;
    }
    return GT_OK;
}

// Opens page p's blob at version (checked against the root just before) in frame dst. Lock not
// held: the blob is read after the check, but a blob other than that version's fails the tag.
// The ciphertext is read into the frame (protected memory) first and opened there, in place: a
// host changing the store during the open cannot change what the tag is checked over. On a
// failure the frame holds ciphertext or zeros, and the caller wipes it.
static gt_err open_blob(gt_pager *pg, uint32_t p, uint64_t version, gt_label label, mover *mv,
                        uint8_t *dst)
{
    uint8_t aad[PAGER_AAD_BYTES], iv[GT_AEAD_IV_BYTES], tag[GT_AEAD_TAG_BYTES];
    struct iovec io[2] = {{dst, pg->page}, {tag, sizeof tag}};
    ssize_t got = preadv(pg->store_fd, io, 2, (off_t)blob_at(pg, p));
    GT_ENSURE(got == (ssize_t)(pg->page + sizeof tag), GT_E_AUTH,
              "paging: the untrusted store is short at a page");
    page_aad(pg, p, version, label, aad, iv);
    return gt_aead_keyed_open_detached(mv->open, dst, dst, pg->page, aad, sizeof aad, iv, tag);
}

// Maps frames f .. f + n - 1 at pages p .. p + n - 1 with one call: no frame is allocated or
// zeroed by the kernel here, and MAP_POPULATE sets their entries in the same call rather than
// one fault per 4 KiB. Lock held.
static gt_err run_map(gt_pager *pg, uint32_t p, uint32_t f, uint32_t n)
{
    size_t len = (size_t)n * pg->page;
    void *r = mmap(page_addr(pg, p), len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED | MAP_POPULATE, pg->pool_fd, (off_t)f * (off_t)pg->page);
    atomic_fetch_add_explicit(&pg->map_calls, 1, memory_order_relaxed);
    GT_ENSURE(r != MAP_FAILED, GT_E_NOMEM, "paging: cannot map a page (vm.max_map_count?)");
    (void)madvise(r, len, MADV_DONTDUMP);
    for (uint32_t i = 0; i < n; i++) {
        pg->pages[p + i].mapped = true;
    }
    return GT_OK;
}

// The resident pages of [lo, hi) that are not mapped yet mapped at their addresses (lock held),
// one call per run of consecutive pages in consecutive frames. A fault-in only opens a page
// into its frame: it is mapped here, by the caller, when a hold needs it (a page the worker
// brought in ahead stays unaddressable until then, and costs no call if it leaves unused).
static gt_err map_range(gt_pager *pg, uint64_t lo, uint64_t hi)
{
    for (uint64_t p = lo; p < hi;) {
        const page_meta *m = &pg->pages[p];
        if (m->state != PG_RESIDENT || m->mapped) {
            p++;
            continue;
        }
        uint32_t n = 1;
        while (p + n < hi && pg->pages[p + n].state == PG_RESIDENT && !pg->pages[p + n].mapped &&
               pg->pages[p + n].frame == m->frame + n) {
            n++;
        }
        GT_TRY(run_map(pg, (uint32_t)p, m->frame, n));
        p += n;
    }
    return GT_OK;
}

static void load_done(gt_pager *pg, uint32_t p, uint32_t f, bool sealed, int why)
{
    page_meta *m = &pg->pages[p];
    m->frame = f;
    pg->nsealed -= sealed;
    m->has_blob = sealed;
    m->dirty = false;
    m->state = PG_RESIDENT;
    m->prefetched = why == LOAD_AHEAD;
    m->mapped = false;
    lru_push(pg, p);
    pg->nresident++;
    pg->fault_ins++;
    pg->demand_faults += why == LOAD_DEMAND;
    pg->prefetch_issued += why == LOAD_AHEAD;
    pg->assist_faults += why == LOAD_ASSIST;
    uint64_t used = pg->cap_pages - pg->nfree;  // frames holding plaintext, moving ones too
    pg->peak = used > pg->peak ? used : pg->peak;
}

// Page p (sealed or zero) into frame f, lock held: checked against the root and opened in the
// frame (mapped by map_range when a hold needs it).
static gt_err load(gt_pager *pg, uint32_t p, uint32_t f, mover *mv, int why)
{
    page_meta *m = &pg->pages[p];
    uint8_t sib[TREE_MAX_LEVELS][TREE_HASH];
    uint64_t version = 0;
    bool sealed = m->state == PG_SEALED;
    gt_err err = GT_OK;
    if (pg->failed) {  // the other thread tore it down while this one made room
        frame_free(pg, f);
        return failed_err();
    }
    if (sealed) {  // a zero page needs nothing: a free frame is zeros
        err = tree_check(pg, p, &version, sib);
        err = gt_is_ok(err) && version == 0
                  ? gt_errf(GT_E_AUTH, "paging: a sealed page at version 0") : err;
        if (!gt_is_ok(err)) {
            frame_free(pg, f);
            return pager_fail(pg, p, err);
        }
    }
    uint8_t state = m->state;
    m->frame = f;  // seen by the next page's frame_take while this one moves
    move_begin(pg, m);
    err = sealed ? open_blob(pg, p, version, m->sealed_label, mv, frame_addr(pg, f)) : GT_OK;
    bool auth = !gt_is_ok(err);
    if (!gt_is_ok(err)) {
        gt_secure_zero(frame_addr(pg, f), pg->page);
    }
    move_end(pg);
    m->state = state;
    if (pg->failed) {  // torn down meanwhile by the other thread: this page goes too
        if (gt_is_ok(err)) {
            gt_secure_zero(frame_addr(pg, f), pg->page);
        }
        frame_free(pg, f);
        m->state = PG_ZERO;
        pg->nsealed -= sealed;
        return failed_err();
    }
    if (!gt_is_ok(err)) {
        frame_free(pg, f);
        return auth ? pager_fail(pg, p, err) : err;
    }
    load_done(pg, p, f, sealed, why);
    return GT_OK;
}

// Pages a piecewise access holds at once: enough to fault them in and map them as runs (one
// call per run instead of per page), few enough to leave most of the cap to the rest.
static uint64_t each_run(const gt_pager *pg)
{
    uint64_t n = pg->cap_pages / 4;
    return n < 1 ? 1 : n > EACH_RUN_PAGES ? EACH_RUN_PAGES : n;
}

// Victims evicted together when a thread runs out of frames: half a piecewise run.
static uint32_t batch_pages(const gt_pager *pg)
{
    return (uint32_t)(each_run(pg) / 2 > 0 ? each_run(pg) / 2 : 1);
}

static int u32_desc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int u32_asc(const void *a, const void *b) { return -u32_desc(a, b); }

// A batch's victims (pg->pend[who]) unmapped, one call per run of consecutive pages, then their
// wiped frames back in the pool, highest first, so that the next fault-ins (taking the last
// freed first) give consecutive pages consecutive frames and map_range maps them in one call.
// Lock held.
static void pend_flush(gt_pager *pg, int who)
{
    uint32_t *v = pg->pend[who], n = pg->npend[who];
    qsort(v, n, sizeof *v, u32_asc);
    for (uint32_t i = 0, k = 1; i < n; i += k, k = 1) {
        while (i + k < n && v[i + k] == v[i] + k) {
            k++;
        }
        run_unmap(pg, v[i], k);
    }
    for (uint32_t i = 0; i < n; i++) {
        v[i] = pg->pages[v[i]].frame;
    }
    qsort(v, n, sizeof *v, u32_desc);
    for (uint32_t i = 0; i < n; i++) {
        frame_free(pg, v[i]);
    }
    pg->npend[who] = 0;
}

// ---- choosing what leaves: the recorded future first, then LRU -------------------------------
// The plan (below) lists the pages the next accesses need, in order. A page not in the rest of
// the plan is needed later than all of it (or never again): those go first, oldest first; else
// the page needed last (Belady's choice, within the scan). Pinned and moving pages never go.

static bool in_plan(const gt_pager *pg, const page_meta *m)
{
    return m->plan_gen == pg->plan_gen && m->plan_pos >= pg->plan_head;
}

// A resident, unpinned page to evict for a page needed at plan position `pos` (UINT32_MAX: a
// demand, anything may go): NO_PAGE when every candidate is needed sooner.
static uint32_t pick_victim(gt_pager *pg, uint32_t pos, bool only_unplanned)
{
    uint32_t best = NO_PAGE, best_pos = 0, seen = 0;
    for (uint32_t v = pg->lru_head; v != NO_PAGE && seen < VICTIM_SCAN; v = pg->pages[v].next) {
        const page_meta *m = &pg->pages[v];
        if (m->pin == pg->epoch || m->claimed) {
            continue;
        }
        seen++;
        if (!in_plan(pg, m)) {
            return v;
        }
        if (!only_unplanned && (best == NO_PAGE || m->plan_pos > best_pos)) {
            best = v;
            best_pos = m->plan_pos;
        }
    }
    return best != NO_PAGE && (pos == UINT32_MAX || best_pos > pos) ? best : NO_PAGE;
}

// Up to `want` victims for thread `who` (lock held): all chosen first (claimed: the other thread
// neither chooses nor evicts them while this one seals and wipes), the first needed later than
// plan position pos (first_unused: not needed by the plan at all), the rest likewise (or, with
// rest_unused, not needed by the plan at all); then evicted one by one, their addresses
// unmapped together at the end (pend_flush), in runs. A claimed page that a new hold pinned
// meanwhile, or that left already, is skipped.
static gt_err evict_batch(gt_pager *pg, int who, uint32_t pos, bool first_unused,
                          bool rest_unused, uint32_t want, uint32_t *done)
{
    uint32_t *v = pg->claim[who], n = 0;
    while (n < want) {
        uint32_t x = pick_victim(pg, pos, n > 0 ? rest_unused : first_unused);
        if (x == NO_PAGE) {
            break;
        }
        pg->pages[x].claimed = true;
        v[n++] = x;
    }
    gt_err err = GT_OK;
    *done = 0;
    for (uint32_t i = 0; i < n; i++) {
        page_meta *m = &pg->pages[v[i]];
        m->claimed = false;
        if (gt_is_ok(err) && !pg->failed && m->state == PG_RESIDENT && m->pin != pg->epoch) {
            err = evict(pg, v[i], &pg->mv[who]);
            (*done)++;
        }
    }
    pend_flush(pg, who);
    return err;
}

// A frame for the caller's fault-in, lock held; *f stays NO_FRAME when the caller has to look
// again (it waited for the worker, which may have moved the page it wants meanwhile).
static gt_err take_frame(gt_pager *pg, uint32_t p, uint32_t *f)
{
    if (pg->nfree > 0) {
        *f = frame_take(pg, p);
        return GT_OK;
    }
    // A batch: one victim, and pages no plan needs (the used ones), unmapped together. The
    // frame is taken on the caller's next look.
    uint32_t done = 0;
    gt_err err = evict_batch(pg, 0, UINT32_MAX, false, true, batch_pages(pg), &done);
    if (gt_is_ok(err) && done == 0 && pg->nfree == 0) {
        GT_ENSURE(pg->busy > 0, GT_E_LIMIT, "paging: every resident page is in use");
        pthread_cond_wait(&pg->moved, &pg->mu);
    }
    return err;
}

// Page p resident and pinned for the current hold (lock held). label: its buffer's label now,
// bound into its blob when it is sealed after a write.
static gt_err page_need(gt_pager *pg, uint32_t p, bool write, gt_label label)
{
    page_meta *m = &pg->pages[p];
    uint32_t f = NO_FRAME;
    for (;;) {
        // Moving, or a victim of the worker's batch whose address is not unmapped yet.
        while (m->state == PG_MOVING || (m->state != PG_RESIDENT && m->mapped)) {
            pthread_cond_wait(&pg->moved, &pg->mu);
        }
        if (pg->failed) {
            if (f != NO_FRAME) {
                frame_free(pg, f);
            }
            return failed_err();
        }
        assert(m->state != PG_FREE);
        if (m->state == PG_RESIDENT) {
            if (f != NO_FRAME) {  // the worker brought it in while this thread made room
                frame_free(pg, f);
            }
            pg->prefetch_hits += m->prefetched;
            m->prefetched = false;
            lru_remove(pg, p);
            lru_push(pg, p);
            break;
        }
        if (f == NO_FRAME) {
            GT_TRY(take_frame(pg, p, &f));
            continue;
        }
        GT_TRY(load(pg, p, f, &pg->mv[0], LOAD_DEMAND));
        break;
    }
    m->pin = pg->epoch;
    if (write) {
        m->dirty = true;
        m->live_label = label;
    }
    return GT_OK;
}

// ---- the worker: pages of the plan in ahead of the caller ------------------------------------

// Out of protected memory, and its address no longer maps a frame (not a victim of the caller's
// batch still waiting for pend_flush).
static bool loadable(const page_meta *m)
{
    return (m->state == PG_SEALED || m->state == PG_ZERO) && !m->mapped;
}

// The next page of the plan the worker can bring in, at or after its cursor; NO_PAGE if none.
static uint32_t next_wanted(gt_pager *pg)
{
    uint32_t end = pg->plan_n, reach = pg->plan_head + (uint32_t)pg->cap_pages;
    end = end < reach ? end : reach;
    pg->wcur = pg->wcur < pg->plan_head ? pg->plan_head : pg->wcur;
    for (; pg->wcur < end; pg->wcur++) {
        if (loadable(&pg->pages[pg->plan[pg->wcur]])) {
            return pg->plan[pg->wcur];
        }
    }
    return NO_PAGE;
}

// One piece of work, lock held: false when there is none until the plan changes.
// Up to `want` victims evicted by the worker (lock held), needed later than plan position pos
// (only_unplanned: not needed by the plan at all), their addresses unmapped in runs: false when
// none could go or an eviction failed.
static bool worker_evict(gt_pager *pg, uint32_t pos, bool only_unplanned, uint32_t want)
{
    uint32_t done = 0;
    gt_err err = evict_batch(pg, 1, pos, only_unplanned, true, want, &done);
    pg->pre_evictions += done;
    return done > 0 && gt_is_ok(err);
}

static bool worker_step(gt_pager *pg)
{
    uint64_t gen = pg->plan_gen;
    uint32_t p = next_wanted(pg), pos = pg->wcur, f = NO_FRAME;
    uint32_t batch = batch_pages(pg);
    if (p == NO_PAGE) {
        // Under pressure, keep a few frames free for the caller's next faults: it then does not
        // wait for a seal. Only pages the plan does not need go, a batch at a time once half
        // the reserve is used (not one page per page the caller takes).
        if (!pg->plan_full || pg->nfree >= (pg->reserve + 1) / 2) {
            return false;
        }
        uint32_t want = pg->reserve - pg->nfree;
        return worker_evict(pg, 0, true, want < batch ? want : batch);
    }
    if (pg->nfree == 0) {  // a batch of victims: their unmaps in runs, their frames in order
        return worker_evict(pg, pos, false, batch);
    }
    f = frame_take(pg, p);
    if (gen != pg->plan_gen || !loadable(&pg->pages[p])) {
        frame_free(pg, f);  // the plan moved on meanwhile, or the caller took the page
        return true;
    }
    return gt_is_ok(load(pg, p, f, &pg->mv[1], pos < pg->plan_now ? LOAD_ASSIST : LOAD_AHEAD));
}

static void *worker_main(void *arg)
{
    gt_pager *pg = arg;
    lock(pg);
    while (!pg->stop) {
        if (pg->failed || !worker_step(pg)) {
            pg->idle_gen = pg->plan_gen;
            pthread_cond_broadcast(&pg->moved);
            pthread_cond_wait(&pg->wake, &pg->mu);
        }
    }
    unlock(pg);
    return NULL;
}

// A new plan (lock held): the pages of [plan_now first, the rest predicted), in order of need.
static void plan_begin(gt_pager *pg)
{
    pg->plan_gen++;
    pg->plan_n = pg->plan_head = pg->plan_now = pg->wcur = 0;
    pg->plan_full = false;
}

static bool plan_add(gt_pager *pg, uint32_t lo, uint32_t hi)
{
    for (uint32_t p = lo; p < hi; p++) {
        if (pg->plan_n >= pg->cap_pages) {
            pg->plan_full = true;
            return false;
        }
        page_meta *m = &pg->pages[p];
        if (m->plan_gen != pg->plan_gen) {
            m->plan_gen = pg->plan_gen;
            m->plan_pos = pg->plan_n;
            pg->plan[pg->plan_n++] = p;
        }
    }
    return true;
}

static void plan_publish(gt_pager *pg)
{
    if (pg->has_worker) {
        pthread_cond_signal(&pg->wake);
    }
}

// No page moves and no plan is left (lock held): buffers may be placed, released, rekeyed.
static void quiesce(gt_pager *pg)
{
    plan_begin(pg);
    while (pg->busy > 0) {
        pthread_cond_wait(&pg->moved, &pg->mu);
    }
}

// ---- the pager --------------------------------------------------------------------------------

static gt_err pager_sizes(gt_pager *pg, const gt_pager_config *cfg)
{
    uint64_t page = cfg->page_bytes ? cfg->page_bytes : GT_PAGER_PAGE_BYTES;
    GT_ENSURE(page >= 4096 && page <= (1u << 20) && (page & (page - 1)) == 0, GT_E_ARG,
              "paging: page size %llu (a power of two from 4 KiB to 1 MiB)",
              (unsigned long long)page);
    pg->page = page;
    pg->cap_pages = cfg->cap / page;
    char cap[32], min[32];
    gt_format_size(cap, sizeof cap, cfg->cap);
    gt_format_size(min, sizeof min, PAGER_MIN_CAP_PAGES * page);
    GT_ENSURE(pg->cap_pages >= PAGER_MIN_CAP_PAGES, GT_E_ARG,
              "paging: a memory limit of %s is less than %s (4 pages)", cap, min);
    uint64_t virt = cfg->virt;
    if (virt == 0) {  // address space is cheap (PROT_NONE, MAP_NORESERVE): room to page into
        virt = 16 * cfg->cap < ((uint64_t)256 << 20) ? (uint64_t)256 << 20 : 16 * cfg->cap;
    }
    virt = (virt + page - 1) / page * page;
    GT_ENSURE(virt / page <= PAGER_MAX_PAGES && virt >= cfg->cap, GT_E_ARG,
              "paging: an arena of %llu bytes", (unsigned long long)virt);
    pg->virt = virt;
    pg->npages = (uint32_t)(virt / page);
    pg->nleaves = 1;
    while (pg->nleaves < pg->npages) {
        pg->nleaves *= 2;
        pg->levels++;
    }
    pg->cache_n = pg->nleaves < TREE_CACHE_NODES ? pg->nleaves : TREE_CACHE_NODES;
    return GT_OK;
}

static gt_err store_open(const char *dir, const char *ext, uint64_t bytes, char *path,
                         size_t cap, int *fd)
{
    uint8_t r[6];
    char hex[13];
    GT_TRY(gt_random_bytes(r, sizeof r));
    gt_hex_encode(hex, sizeof hex, r, sizeof r);
    int n = snprintf(path, cap, "%s/gtpager-%s.%s", dir, hex, ext);
    GT_ENSURE(n > 0 && (size_t)n < cap, GT_E_ARG, "paging: store directory path too long");
    *fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    GT_ENSURE(*fd >= 0, GT_E_IO, "paging: cannot create the store %s", path);
    if (ftruncate(*fd, (off_t)bytes) != 0) {  // sparse: nothing is written until a page-out
        close(*fd);
        *fd = -1;
        unlink(path);
        return gt_errf(GT_E_IO, "paging: cannot size the store %s", path);
    }
    return GT_OK;
}

static gt_err pager_store(gt_pager *pg, const char *dir)
{
    GT_ENSURE(dir != NULL && dir[0] != '\0', GT_E_ARG, "paging: no store directory");
    GT_TRY(store_open(dir, "pages", (uint64_t)pg->npages * (pg->page + GT_AEAD_TAG_BYTES),
                      pg->store_path, sizeof pg->store_path, &pg->store_fd));
    uint64_t tree = (uint64_t)pg->nleaves * (TREE_HASH + 8);
    return store_open(dir, "tree", tree, pg->tree_path, sizeof pg->tree_path, &pg->tree_fd);
}

// The frames: the cap's worth of a memfd (its pages exist only once used, and never more than
// the cap), mapped once as the pool; frame 0 is handed out first.
static gt_err pager_pool(gt_pager *pg)
{
    uint64_t bytes = pg->cap_pages * pg->page;
    pg->pool_fd = memfd_create("gtpager-frames", MFD_CLOEXEC);
    GT_ENSURE(pg->pool_fd >= 0, GT_E_NOMEM, "paging: cannot create the frame pool");
    GT_ENSURE(ftruncate(pg->pool_fd, (off_t)bytes) == 0, GT_E_NOMEM,
              "paging: cannot size the frame pool (%llu bytes)", (unsigned long long)bytes);
    void *a = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pg->pool_fd, 0);
    GT_ENSURE(a != MAP_FAILED, GT_E_NOMEM, "paging: cannot map the frame pool");
    pg->pool = a;
    (void)madvise(a, bytes, MADV_DONTDUMP);
    (void)madvise(a, bytes, MADV_DONTFORK);
    for (uint64_t i = 0; i < pg->cap_pages; i++) {
        pg->free_frames[i] = (uint32_t)(pg->cap_pages - 1 - i);
        pg->free_at[pg->cap_pages - 1 - i] = (uint32_t)i;
    }
    pg->nfree = (uint32_t)pg->cap_pages;
    return GT_OK;
}

static gt_err pager_memory(gt_pager *pg)
{
    pg->pages = calloc(pg->npages, sizeof *pg->pages);
    pg->cache = calloc(pg->cache_n, sizeof *pg->cache);
    pg->free_frames = calloc(pg->cap_pages, sizeof *pg->free_frames);
    pg->free_at = calloc(pg->cap_pages, sizeof *pg->free_at);
    pg->plan = calloc(pg->cap_pages, sizeof *pg->plan);
    pg->pend[0] = calloc(pg->cap_pages, sizeof *pg->pend[0]);
    pg->pend[1] = calloc(pg->cap_pages, sizeof *pg->pend[1]);
    pg->claim[0] = calloc(pg->cap_pages, sizeof *pg->claim[0]);
    pg->claim[1] = calloc(pg->cap_pages, sizeof *pg->claim[1]);
    GT_ENSURE(pg->pages != NULL && pg->cache != NULL && pg->free_frames != NULL &&
                  pg->free_at != NULL &&
                  pg->plan != NULL && pg->pend[0] != NULL && pg->pend[1] != NULL &&
                  pg->claim[0] != NULL && pg->claim[1] != NULL,
              GT_E_NOMEM, "paging: out of memory");
    for (uint32_t p = 0; p < pg->npages; p++) {
        pg->pages[p].prev = pg->pages[p].next = NO_PAGE;
    }
    GT_TRY(pager_pool(pg));
    // Address space only: no frame exists until a page is needed, and none beyond the cap.
    void *a = mmap(NULL, pg->virt, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    GT_ENSURE(a != MAP_FAILED, GT_E_NOMEM, "paging: cannot reserve %llu bytes of address space",
              (unsigned long long)pg->virt);
    pg->base = a;
    (void)madvise(a, pg->virt, MADV_DONTDUMP);
    return GT_OK;
}

static void movers_free(gt_pager *pg)
{
    for (int i = 0; i < 2; i++) {
        gt_aead_keyed_free(pg->mv[i].seal);
        gt_aead_keyed_free(pg->mv[i].open);
        pg->mv[i] = (mover){NULL, NULL};
    }
}

// Both threads' key schedules for pg->key (no page moves: quiesced).
static gt_err movers_key(gt_pager *pg)
{
    movers_free(pg);
    for (int i = 0; i < 2; i++) {
        GT_TRY(gt_aead_keyed_new(&pg->mv[i].seal, true, pg->key));
        GT_TRY(gt_aead_keyed_new(&pg->mv[i].open, false, pg->key));
    }
    return GT_OK;
}

gt_err gt_pager_new(gt_pager **out, const gt_pager_config *cfg)
{
    *out = NULL;
    gt_pager *pg = calloc(1, sizeof *pg);
    GT_ENSURE(pg != NULL, GT_E_NOMEM, "paging: out of memory");
    pg->store_fd = pg->tree_fd = pg->pool_fd = -1;
    pg->lru_head = pg->lru_tail = NO_PAGE;
    pg->tab = cfg->tab;
    GT_ENSURE(pthread_mutex_init(&pg->mu, NULL) == 0, GT_E_NOMEM, "paging: no lock");
    pthread_cond_init(&pg->wake, NULL);
    pthread_cond_init(&pg->moved, NULL);
    pg->sync_made = true;
    gt_err err = pager_sizes(pg, cfg);
    if (gt_is_ok(err)) {
        err = pager_memory(pg);
    }
    if (gt_is_ok(err)) {
        err = gt_opstream_new(&pg->os, OPSTREAM_LAUNCHES);
    }
    if (gt_is_ok(err)) {
        err = pager_store(pg, cfg->store_dir);
    }
    if (gt_is_ok(err)) {
        err = gt_pager_rekey(pg);
    }
    // Keep frames free for the caller's faults while memory is short: an eighth of the cap, at
    // most 64 pages (a few MiB of seals the caller does not wait for).
    pg->reserve = (uint32_t)(pg->cap_pages / 8 < 64 ? pg->cap_pages / 8 : 64);
    if (gt_is_ok(err) && cfg->prefetch) {
        lock(pg);  // the worker starts once pg->worker is written (it reads it: on_worker)
        pg->has_worker = pthread_create(&pg->worker, NULL, worker_main, pg) == 0;
        unlock(pg);
        err = pg->has_worker ? GT_OK : gt_errf(GT_E_NOMEM, "paging: cannot start the prefetcher");
    }
    if (!gt_is_ok(err)) {
        gt_pager_free(pg);
        return err;
    }
    *out = pg;
    return GT_OK;
}

static void store_close(int fd, const char *path)
{
    if (fd >= 0) {
        (void)ftruncate(fd, 0);  // only ciphertext, but nothing is left behind
        close(fd);
        unlink(path);
    }
}

void gt_pager_free(gt_pager *pg)
{
    if (pg == NULL) {
        return;
    }
    if (pg->has_worker) {
        lock(pg);
        quiesce(pg);
        pg->stop = true;
        pthread_cond_signal(&pg->wake);
        unlock(pg);
        pthread_join(pg->worker, NULL);
    }
    if (pg->base != NULL && pg->pool != NULL) {
        pager_wipe_all(pg);
    }
    if (pg->base != NULL) {
        munmap(pg->base, pg->virt);
    }
    if (pg->pool != NULL) {
        munmap(pg->pool, pg->cap_pages * pg->page);
    }
    if (pg->pool_fd >= 0) {
        close(pg->pool_fd);
    }
    store_close(pg->store_fd, pg->store_path);
    store_close(pg->tree_fd, pg->tree_path);
    free(pg->pages);
    free(pg->pend[0]);
    free(pg->pend[1]);
    free(pg->claim[0]);
    free(pg->claim[1]);
    movers_free(pg);
    free(pg->extents);
    free(pg->cache);
    free(pg->free_frames);
    free(pg->free_at);
    free(pg->plan);
    gt_opstream_free(pg->os);
    if (pg->sync_made) {
        pthread_cond_destroy(&pg->wake);
        pthread_cond_destroy(&pg->moved);
        pthread_mutex_destroy(&pg->mu);
    }
    gt_secure_zero(pg, sizeof *pg);
    free(pg);
}

static gt_err rekey_locked(gt_pager *pg)
{
    assert(pg->nextents == 0);
    GT_ENSURE(pg->nextents == 0, GT_E_STATE, "paging: rekey with buffers placed");
    quiesce(pg);
    gt_opstream_reset(pg->os);  // a new session: its stream is learnt anew
    uint64_t blobs = (uint64_t)pg->npages * (pg->page + GT_AEAD_TAG_BYTES);
    uint64_t tree = (uint64_t)pg->nleaves * (TREE_HASH + 8);
    GT_ENSURE(ftruncate(pg->store_fd, 0) == 0 && ftruncate(pg->store_fd, (off_t)blobs) == 0 &&
                  ftruncate(pg->tree_fd, 0) == 0 && ftruncate(pg->tree_fd, (off_t)tree) == 0,
              GT_E_IO, "paging: cannot reset the store");
    GT_TRY(gt_random_bytes(pg->key, sizeof pg->key));
    GT_TRY(movers_key(pg));
    pg->failed = false;
    pg->nsealed = 0;
    return tree_init(pg);
}

gt_err gt_pager_rekey(gt_pager *pg)
{
    lock(pg);
    gt_err err = rekey_locked(pg);
    unlock(pg);
    return err;
}

uint8_t *gt_pager_base(gt_pager *pg) { return pg->base; }

bool gt_pager_failed(const gt_pager *pg) { return pg->failed; }

static gt_err extents_room(gt_pager *pg)
{
    if (pg->nextents < pg->cap_extents) {
        return GT_OK;
    }
    size_t cap = pg->cap_extents ? 2 * pg->cap_extents : 64;
    extent *ne = realloc(pg->extents, cap * sizeof *ne);
    GT_ENSURE(ne != NULL, GT_E_NOMEM, "paging: out of memory for the arena's extents");
    pg->extents = ne;
    pg->cap_extents = cap;
    return GT_OK;
}

static gt_err place_locked(gt_pager *pg, gt_dbuf h, uint64_t owner, uint64_t bytes,
                           uint64_t *off)
{
    GT_ENSURE(!pg->failed, GT_E_AUTH, "paging: the device session is torn down");
    uint64_t want = (bytes + pg->page - 1) / pg->page, prev_end = 0;
    size_t at = pg->nextents;
    for (size_t i = 0; i < pg->nextents; i++) {  // first fit
        if (pg->extents[i].first - prev_end >= want) {
            at = i;
            break;
        }
        prev_end = pg->extents[i].first + pg->extents[i].count;
    }
    char need[32], arena[32];
    gt_format_size(need, sizeof need, bytes);
    gt_format_size(arena, sizeof arena, pg->virt);
    GT_ENSURE(at < pg->nextents || pg->npages - prev_end >= want, GT_E_LIMIT,
              "device memory exhausted: no room for %s in the paged arena of %s", need, arena);
    GT_TRY(extents_room(pg));
    memmove(&pg->extents[at + 1], &pg->extents[at], (pg->nextents - at) * sizeof *pg->extents);
    pg->extents[at] = (extent){.first = (uint32_t)prev_end, .count = (uint32_t)want};
    pg->nextents++;
    for (uint64_t p = prev_end; p < prev_end + want; p++) {
        pg->pages[p] = (page_meta){.handle = h, .owner = owner, .first = (uint32_t)prev_end,
                                   .prev = NO_PAGE, .next = NO_PAGE, .state = PG_ZERO};
    }
    *off = prev_end * pg->page;
    return GT_OK;
}

gt_err gt_pager_place(gt_pager *pg, gt_dbuf h, uint64_t owner, uint64_t bytes, uint64_t *off)
{
    lock(pg);
    gt_err err = place_locked(pg, h, owner, bytes, off);
    unlock(pg);
    return err;
}

static void release_locked(gt_pager *pg, uint64_t off)
{
    quiesce(pg);  // none of its pages is moving, and the worker has no plan to move them
    if (pg->failed) {
        pager_wipe_all(pg);
    }
    uint32_t first = (uint32_t)(off / pg->page);
    size_t i = 0;
    while (i < pg->nextents && pg->extents[i].first != first) {
        i++;
    }
    assert(i < pg->nextents);
    if (i == pg->nextents) {
        return;
    }
    uint32_t count = pg->extents[i].count;
    for (uint32_t p = first; p < first + count; p++) {
        if (pg->pages[p].state == PG_RESIDENT) {
            page_drop(pg, p);
        } else if (pg->pages[p].state == PG_SEALED) {
            pg->nsealed--;
        }
        pg->pages[p] = (page_meta){.prev = NO_PAGE, .next = NO_PAGE, .state = PG_FREE};
    }
    // Its blobs are ciphertext under a key that outlives them: give the space back anyway.
    (void)fallocate(pg->store_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    (off_t)blob_at(pg, first), (off_t)((uint64_t)count * (pg->page + 16)));
    memmove(&pg->extents[i], &pg->extents[i + 1], (pg->nextents - i - 1) * sizeof *pg->extents);
    pg->nextents--;
}

void gt_pager_release(gt_pager *pg, uint64_t off)
{
    lock(pg);
    release_locked(pg, off);
    unlock(pg);
}

// Room for the pages of [lo, hi) that are out, made at once (lock held): what is already in is
// pinned first (not a victim), then as many victims as frames are missing are evicted, their
// addresses unmapped together (pend_flush) rather than one call per page. The victims' frames
// are wiped before pend_flush, and are handed out only after it, so no address ever maps a frame
// that holds another page.
static gt_err room_for(gt_pager *pg, uint64_t lo, uint64_t hi)
{
    uint32_t out = 0;
    for (uint64_t p = lo; p < hi; p++) {
        page_meta *m = &pg->pages[p];
        if (m->state == PG_RESIDENT) {
            m->pin = pg->epoch;
        }
        out += m->state == PG_SEALED || m->state == PG_ZERO;
    }
    if (pg->nfree >= out) {
        return GT_OK;
    }
    // Short of that, page_need waits for the worker or evicts more.
    uint32_t done = 0;
    return evict_batch(pg, 0, UINT32_MAX, false, false, out - pg->nfree, &done);
}

// Pages [lo, hi) resident, pinned and mapped, within the hold already begun (pg->epoch); lock
// held.
// The pages of [lo, hi) through page_need (lock held): with `only_out`, only those out of
// protected memory and not being moved, else all of them.
static gt_err need_pass(gt_pager *pg, uint64_t lo, uint64_t hi, bool write, bool only_out)
{
    uint64_t handle = 0;
    gt_label label = 0;
    for (uint64_t p = lo; p < hi; p++) {
        const page_meta *m = &pg->pages[p];
        if (only_out && (!loadable(m) || pg->nfree == 0)) {
            continue;  // moving (the worker's), in already, or no frame free: the second pass's
        }
        if (write && m->handle != handle) {  // the label a write leaves: read here, not by the worker
            gt_buftab_entry *e = NULL;
            GT_TRY(gt_buftab_find(pg->tab, m->handle, m->owner, &e));
            handle = m->handle;
            label = e->label;
        }
        if (!only_out && pg->plan_gen == m->plan_gen && m->plan_pos >= pg->plan_head) {
            pg->plan_head = m->plan_pos;  // the worker's reach moves with the caller
        }
        GT_TRY(page_need(pg, (uint32_t)p, write, label));
    }
    return GT_OK;
}

// Pages [lo, hi) resident, pinned and mapped, within the hold already begun (pg->epoch); lock
// held. With the worker, the caller first faults in what is still out and not moving, skipping
// the pages the worker is opening, so that both threads open pages of the range at once; then
// it waits for the worker's (the second pass).
static gt_err need_pages(gt_pager *pg, uint64_t lo, uint64_t hi, bool write)
{
    GT_TRY(room_for(pg, lo, hi));
    if (pg->has_worker) {
        GT_TRY(need_pass(pg, lo, hi, write, true));
    }
    GT_TRY(need_pass(pg, lo, hi, write, false));
    return map_range(pg, lo, hi);
}

static gt_err hold_check(gt_pager *pg, uint64_t lo, uint64_t hi)
{
    char need[32], cap[32];
    gt_format_size(need, sizeof need, (hi - lo) * pg->page);
    gt_format_size(cap, sizeof cap, pg->cap_pages * pg->page);
    GT_ENSURE(hi - lo <= pg->cap_pages, GT_E_LIMIT,
              "device: this access needs %s resident at once, the memory limit is %s", need, cap);
    return GT_OK;
}

static gt_err hold_locked(gt_pager *pg, uint64_t off, uint64_t len, bool write)
{
    if (pg->failed) {
        return caller_failed(pg);
    }
    if (len == 0) {
        return GT_OK;
    }
    uint64_t lo = off / pg->page, hi = (off + len + pg->page - 1) / pg->page;
    GT_TRY(hold_check(pg, lo, hi));
    pg->epoch++;
    return need_pages(pg, lo, hi, write);
}

gt_err gt_pager_hold(gt_pager *pg, uint64_t off, uint64_t len, bool write)
{
    lock(pg);
    gt_err err = hold_locked(pg, off, len, write);
    if (pg->failed) {
        pager_wipe_all(pg);
    }
    unlock(pg);
    return err;
}

// Read ahead for a piecewise access: the pages from `at` on, in order, as far as the cap reaches.
static void plan_range(gt_pager *pg, uint64_t lo, uint64_t hi)
{
    if (!pg->has_worker) {
        return;
    }
    plan_begin(pg);
    pg->plan_now = 1;
    plan_add(pg, (uint32_t)lo, (uint32_t)hi);
    pg->plan_full = false;  // in order, used once: nothing to keep frames free for
    plan_publish(pg);
}

gt_err gt_pager_each(gt_pager *pg, uint64_t off, uint64_t len, bool write, gt_pager_piece_fn fn,
                     void *ctx)
{
    uint64_t planned_to = 0;  // the plan covers pages up to here
    for (uint64_t done = 0; done < len;) {
        uint64_t at = off + done, p = at / pg->page;
        uint64_t run = (p + each_run(pg)) * pg->page - at;  // to a page boundary
        run = run < len - done ? run : len - done;
        lock(pg);
        uint64_t last = (off + len + pg->page - 1) / pg->page;
        if (p + pg->cap_pages / 2 >= planned_to && planned_to < last) {  // half used: plan on
            plan_range(pg, p, last);
            planned_to = p + pg->cap_pages < last ? p + pg->cap_pages : last;
        }
        gt_err err = hold_locked(pg, at, run, write);
        if (pg->failed) {
            pager_wipe_all(pg);
        }
        unlock(pg);
        GT_TRY(err);
        for (uint64_t end = done + run; done < end;) {  // the pieces: a page each, as before
            uint64_t a = off + done, n = pg->page - a % pg->page;
            n = n < end - done ? n : end - done;
            GT_TRY(fn(ctx, pg->base + a, done, n));
            done += n;
        }
    }
    return GT_OK;
}

// ---- contents nobody reads again: zero fills and whole-page overwrites -----------------------
// A page whose old bytes will not be read again is neither opened nor sealed: a fill with zeros
// makes it a zero page whatever it was (a resident frame wiped and freed, a blob no longer its
// newest version), and a launch that overwrites it whole gives it a fresh zero frame instead of
// opening its blob. Both follow from the call or the op table, never from the bytes: treating a
// page differently because it happens to hold zeros would show the host which pages of holder
// data are zero. The version stays in the tree, so the page's next seal takes the next version
// and no IV repeats.

// Page p, its content forgotten, is a zero page now (lock held).
static void page_forgotten(gt_pager *pg, page_meta *m)
{
    m->state = PG_ZERO;
    m->dirty = false;
    m->has_blob = false;
    pg->discards++;
}

// Resident pages [p, p + n), all mapped, unmapped with one call and made zero pages.
static void zero_run(gt_pager *pg, uint32_t p, uint32_t n)
{
    if (n == 0) {
        return;
    }
    run_unmap(pg, p, n);
    for (uint32_t i = 0; i < n; i++) {
        frame_forget(pg, p + i);
        page_forgotten(pg, &pg->pages[p + i]);
    }
}

// Whole pages [lo, hi) made zero pages (lock held, nothing pinned). The mapped resident ones are
// unmapped in runs; a page the worker is moving (or has yet to unmap) is waited for, the run so
// far zeroed first, since the lock is let go while waiting.
static gt_err zero_pages(gt_pager *pg, uint32_t lo, uint32_t hi)
{
    uint32_t run = lo, nrun = 0;  // mapped resident pages [run, run + nrun), still to zero
    for (uint32_t p = lo; p < hi; p++) {
        page_meta *m = &pg->pages[p];
        if (m->state == PG_MOVING || (m->state != PG_RESIDENT && m->mapped)) {
            zero_run(pg, run, nrun);
            nrun = 0;
            while (m->state == PG_MOVING || (m->state != PG_RESIDENT && m->mapped)) {
                pthread_cond_wait(&pg->moved, &pg->mu);
            }
            if (pg->failed) {
                return failed_err();
            }
        }
        assert(m->state != PG_FREE);
        if (m->state == PG_RESIDENT && m->mapped) {
            if (nrun > 0 && run + nrun != p) {
                zero_run(pg, run, nrun);
                nrun = 0;
            }
            run = nrun == 0 ? p : run;
            nrun++;
            continue;
        }
        if (m->state == PG_RESIDENT) {  // in ahead by the worker, never mapped
            page_drop(pg, p);
        } else if (m->state == PG_SEALED) {
            pg->nsealed--;
        } else {
            continue;  // a zero page already
        }
        page_forgotten(pg, m);
    }
    zero_run(pg, run, nrun);
    return GT_OK;
}

static gt_err piece_zero(void *ctx, uint8_t *p, uint64_t done, uint64_t n)
{
    (void)ctx;
    (void)done;
    memset(p, 0, n);
    return GT_OK;
}

gt_err gt_pager_zero(gt_pager *pg, uint64_t off, uint64_t len)
{
    uint64_t lo = (off + pg->page - 1) / pg->page, hi = (off + len) / pg->page;
    if (lo >= hi) {  // no whole page: the bytes, as any write
        return gt_pager_each(pg, off, len, true, piece_zero, NULL);
    }
    GT_TRY(gt_pager_each(pg, off, lo * pg->page - off, true, piece_zero, NULL));
    lock(pg);
    gt_err err = pg->failed ? caller_failed(pg) : GT_OK;
    if (gt_is_ok(err)) {
        pg->epoch++;  // the last hold ends: its pages may go too
        err = zero_pages(pg, (uint32_t)lo, (uint32_t)hi);
    }
    if (pg->failed) {
        pager_wipe_all(pg);
    }
    unlock(pg);
    GT_TRY(err);
    return gt_pager_each(pg, hi * pg->page, off + len - hi * pg->page, true, piece_zero, NULL);
}

// ---- launches ---------------------------------------------------------------------------------

typedef struct {
    uint64_t lo, hi;  // pages [lo, hi)
    bool write;       // a ref the op may change covers them
} page_range;

static int range_cmp(const void *a, const void *b)
{
    const page_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

// Where an op's refs lie among the pager's bytes: each one's start and size, looked up once per
// op and shared by everything that plans its launch (its pages, its parts, what it overwrites).
typedef struct {
    uint64_t at[GT_OP_MAX_REFS];     // the ref's first byte (its buffer's place + its offset)
    uint64_t bytes[GT_OP_MAX_REFS];  // its size (gt_op_ref_sizes)
    int nrefs;
} op_place;

static gt_err op_locate(const gt_op *op, gt_pager_where_fn where, void *ctx, op_place *pl)
{
    GT_TRY(gt_op_ref_sizes(op, pl->bytes, &pl->nrefs));
    for (int i = 0; i < pl->nrefs; i++) {
        uint64_t boff = 0;
        if (op->refs[i].buf != 0) {
            GT_TRY(where(ctx, op->refs[i].buf, &boff));
        }
        pl->at[i] = boff + op->refs[i].offset;
    }
    return GT_OK;
}

// The page ranges op's refs cover (part NULL), or what the part touches of them, merged, and
// how many pages that is.
static gt_err op_pages(const gt_pager *pg, const gt_op *op, const gt_op_part *part,
                       const op_place *pl, page_range *r, int *nr, uint64_t *total)
{
    uint64_t lo[GT_OP_MAX_REFS] = {0}, hi[GT_OP_MAX_REFS];
    int n = 0;
    memcpy(hi, pl->bytes, sizeof hi);
    if (part != NULL) {
        GT_TRY(gt_op_part_extents(op, part, lo, hi));
    }
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    for (int i = 0; i < pl->nrefs; i++) {
        if (op->refs[i].buf == 0 || hi[i] <= lo[i]) {
            continue;
        }
        GT_ENSURE(hi[i] <= pl->bytes[i], GT_E_STATE, "pager: part of %s beyond its ref %d",
                  gt_op_name(op->kind), i);
        uint64_t a = pl->at[i];
        r[n++] = (page_range){(a + lo[i]) / pg->page, (a + hi[i] + pg->page - 1) / pg->page,
                              gt_access_writes(d->refs[i].access)};
    }
    qsort(r, (size_t)n, sizeof *r, range_cmp);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && r[i].lo <= r[m - 1].hi) {  // overlapping: written if either is
            r[m - 1].hi = r[i].hi > r[m - 1].hi ? r[i].hi : r[m - 1].hi;
            r[m - 1].write |= r[i].write;
        } else {
            r[m++] = r[i];
        }
    }
    *total = 0;
    for (int i = 0; i < m; i++) {
        *total += r[i].hi - r[i].lo;
    }
    *nr = m;
    return GT_OK;
}

// Page ranges [lo, hi) of set (n of them, room for `room`) less [a, b): at most one more range.
static int ranges_cut(page_range *set, int n, int room, uint64_t a, uint64_t b)
{
    for (int i = 0; i < n; i++) {
        page_range x = set[i];
        if (b <= x.lo || a >= x.hi) {
            continue;
        }
        if (a > x.lo && b < x.hi) {  // a hole in the middle: two ranges
            if (n == room) {
                set[i].hi = a;  // no room for the tail: it is simply not discarded
                continue;
            }
            set[n++] = (page_range){b, x.hi, true};
            set[i].hi = a;
        } else if (a > x.lo) {
            set[i].hi = a;
        } else {
            set[i].lo = b < x.hi ? b : x.hi;
        }
    }
    return n;
}

// The pages a whole op (not a part: a part writes only its tiles of the hull it holds)
// overwrites entirely and does not read: the whole pages of its refs of access WRITE, less every
// page that a ref of another access touches (an op may read the bytes it writes, gelu_backward's
// dinp and dout are one range). The kernels write every byte of such a ref.
static int op_overwritten(const gt_pager *pg, const gt_op *op, const op_place *pl,
                          page_range *ow, int room)
{
    int n = 0;
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    for (int i = 0; i < pl->nrefs; i++) {
        uint64_t lo = (pl->at[i] + pg->page - 1) / pg->page;
        uint64_t hi = (pl->at[i] + pl->bytes[i]) / pg->page;
        if (op->refs[i].buf != 0 && d->refs[i].access == GT_ACCESS_WRITE && lo < hi && n < room) {
            ow[n++] = (page_range){lo, hi, true};
        }
    }
    for (int i = 0; i < pl->nrefs && n > 0; i++) {
        if (op->refs[i].buf != 0 && d->refs[i].access != GT_ACCESS_WRITE && pl->bytes[i] > 0) {
            n = ranges_cut(ow, n, room, pl->at[i] / pg->page,
                           (pl->at[i] + pl->bytes[i] + pg->page - 1) / pg->page);
        }
    }
    return n;
}

// Sealed pages of the ranges that the launch about to run overwrites whole: zero pages now, so
// that need_pages gives them a fresh frame instead of opening their blob (lock held). A page the
// worker is moving is left to need_pages.
static void overwritten_discard(gt_pager *pg, const page_range *ow, int now)
{
    for (int i = 0; i < now; i++) {
        for (uint64_t p = ow[i].lo; p < ow[i].hi; p++) {
            page_meta *m = &pg->pages[p];
            if (m->state == PG_SEALED && !m->mapped) {
                pg->nsealed--;
                page_forgotten(pg, m);
            }
        }
    }
}

// This launch into the op stream, and the plan it predicts (lock held): its own pages first
// (the worker faults them in beside the caller), then those of the launches that followed it
// last time, as far as the cap reaches. A launch other than the predicted one is counted; the
// plan then comes from wherever the stream finds it, or is only this launch's own pages.
static void plan_launch(gt_pager *pg, const page_range *r, int nr)
{
    gt_page_span s[GT_OP_MAX_REFS];
    for (int i = 0; i < nr; i++) {
        s[i] = (gt_page_span){(uint32_t)r[i].lo, (uint32_t)r[i].hi};
    }
    (void)gt_opstream_launch(pg->os, s, nr);
    plan_begin(pg);
    for (int i = 0; i < nr; i++) {
        plan_add(pg, s[i].lo, s[i].hi);
    }
    pg->plan_now = pg->plan_n;
    bool room = true;
    for (uint32_t k = 1; room && k <= PLAN_MAX_LAUNCHES; k++) {
        const gt_page_span *a = NULL;
        int n = gt_opstream_ahead(pg->os, k, &a);
        for (int i = 0; i < n && room; i++) {
            room = plan_add(pg, a[i].lo, a[i].hi);
        }
        room = room && n >= 0;
    }
    plan_publish(pg);
}

// Runs op (or its part) with the page ranges r (at most the cap) resident and pinned.
static gt_err launch_pinned(gt_pager *pg, const gt_op *op, const gt_op_part *part,
                            const page_range *r, int nr, const page_range *ow, int now,
                            gt_pager_run_fn run, void *ctx)
{
    lock(pg);
    if (pg->failed) {
        gt_err err = caller_failed(pg);
        unlock(pg);
        return err;
    }
    pg->epoch++;
    if (pg->has_worker) {
        plan_launch(pg, r, nr);
        while (pg->test_sync && pg->idle_gen != pg->plan_gen && !pg->failed) {
            pthread_cond_wait(&pg->moved, &pg->mu);
        }
    }
    overwritten_discard(pg, ow, now);
    gt_err err = GT_OK;
    for (int i = 0; i < nr && gt_is_ok(err); i++) {
        err = need_pages(pg, r[i].lo, r[i].hi, r[i].write);
    }
    if (pg->failed) {
        pager_wipe_all(pg);
    }
    unlock(pg);
    GT_TRY(err);
    return run(ctx, op, part);  // on its pinned pages, while the worker loads the next launches'
}

// Runs the whole op, whose refs lie at pl, when its pages fit under the cap; otherwise says how
// many it needs (pages).
static gt_err launch_placed(gt_pager *pg, const gt_op *op, const op_place *pl,
                            gt_pager_run_fn run, void *ctx, bool *fits, uint64_t *pages)
{
    page_range r[GT_OP_MAX_REFS];
    int nr = 0;
    GT_TRY(op_pages(pg, op, NULL, pl, r, &nr, pages));
    *fits = *pages <= pg->cap_pages;
    if (!*fits) {
        return GT_OK;
    }
    page_range ow[2 * GT_OP_MAX_REFS];
    int now = op_overwritten(pg, op, pl, ow, 2 * GT_OP_MAX_REFS);
    return launch_pinned(pg, op, NULL, r, nr, ow, now, run, ctx);
}

static bool op_elementwise(uint32_t kind)
{
    return kind == GT_OP_GELU_FWD || kind == GT_OP_GELU_BWD || kind == GT_OP_RESIDUAL_FWD ||
           kind == GT_OP_RESIDUAL_BWD || kind == GT_OP_ADAMW || kind == GT_OP_CLIP_GRADS;
}

// GT_E_LIMIT for an op of `pages` that cannot run under the cap; `why` says how it was tried.
static gt_err op_too_big(const gt_pager *pg, const gt_op *op, uint64_t pages, const char *why)
{
    char need[32], cap[32];
    gt_format_size(need, sizeof need, pages * pg->page);
    gt_format_size(cap, sizeof cap, pg->cap_pages * pg->page);
    return gt_errf(GT_E_LIMIT, "device: op %s needs %s resident, cap is %s%s", gt_op_name(op->kind),
                   need, cap, why);
}

// Piece [start, start + count) of an elementwise op: its N-shaped refs moved, N shortened.
static gt_op op_piece(const gt_op *op, uint64_t start, uint64_t count)
{
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    gt_op sub = *op;
    sub.ints[0] = (int64_t)count;  // every elementwise op's int 0 is N
    for (int i = 0; i < d->nrefs; i++) {
        if (d->refs[i].shape[0] != '\0' && sub.refs[i].buf != 0) {
            sub.refs[i].offset += start * gt_elem_size(d->refs[i].elem);
        }
    }
    return sub;
}

// An elementwise op in pieces, each small enough to be resident at once. Pieces start at
// multiples of 16 elements, so the kernels' 16-lane blocks fall where they fall unsplit.
static gt_err launch_split(gt_pager *pg, const gt_op *op, gt_pager_where_fn where,
                           gt_pager_run_fn run, void *ctx, uint64_t pages)
{
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    uint64_t per_elem = 0, n = (uint64_t)op->ints[0];
    for (int i = 0; i < d->nrefs; i++) {
        per_elem += d->refs[i].shape[0] == '\0' ? 0 : gt_elem_size(d->refs[i].elem);
    }
    uint64_t chunk = per_elem ? pg->cap_pages * pg->page / per_elem / 16 * 16 : 0;
    for (uint64_t start = 0; start < n;) {
        uint64_t c = n - start < chunk ? n - start : chunk;
        // A piece may straddle a page more than another: halve it until it fits (then it ran).
        for (bool fits = false; !fits;) {
            GT_ENSURE(c > 0, GT_E_LIMIT, "%s", op_too_big(pg, op, pages, "").msg);
            gt_op sub = op_piece(op, start, c);
            op_place pl;
            GT_TRY(op_locate(&sub, where, ctx, &pl));
            uint64_t sub_pages = 0;
            GT_TRY(launch_placed(pg, &sub, &pl, run, ctx, &fits, &sub_pages));
            c = fits ? c : c / 2 / 16 * 16;
        }
        start += c;
    }
    return GT_OK;
}

// A matmul or a sum_of_squares in parts (kernels.h): each group's tiles in order, each part as
// many of them as fit under the cap together. Every tile runs once, as the same sgemm call as in
// the whole op, or (sum_of_squares) the same block sum added to the total in the same order, so
// the bytes are the whole op's (docs/paging.md "Matmuls in parts", "Reductions in parts"). The
// order is required, not only chosen: a sum_of_squares part after tile 0 adds to the total the
// earlier parts left in out, so the parts run one at a time, from tile 0 up, never reordered.
// out's page is written (WRITE), so every part holds it resident and loaded: a write hold faults
// a page in like a read (page_need), and a later part reads what the earlier one wrote. A tile
// that does not fit alone refuses the op before anything of it ran.
static gt_err launch_parts(gt_pager *pg, const gt_op *op, const op_place *pl,
                           gt_pager_run_fn run, void *ctx, uint64_t pages)
{
    int groups = gt_op_part_groups(op);
    for (int g = 0; g < groups; g++) {  // first: every tile fits alone
        int tiles = 0;
        GT_TRY(gt_op_part_tiles(op, g, &tiles));
        for (int t = 0; t < tiles; t++) {
            page_range r[GT_OP_MAX_REFS];
            int nr = 0;
            uint64_t total = 0;
            GT_TRY(op_pages(pg, op, &(gt_op_part){g, t, t + 1}, pl, r, &nr, &total));
            if (total > pg->cap_pages) {
                char why[96], one[32];
                gt_format_size(one, sizeof one, total * pg->page);
                snprintf(why, sizeof why, " (in parts: one %s tile alone needs %s)",
                         gt_op_part_group_name(op, g), one);
                return op_too_big(pg, op, pages, why);
            }
        }
    }
    lock(pg);
    pg->ops_in_parts++;  // ops in parts: matmuls and sums of squares (device.h)
    unlock(pg);
    for (int g = 0; g < groups; g++) {
        int tiles = 0;
        GT_TRY(gt_op_part_tiles(op, g, &tiles));
        for (int lo = 0; lo < tiles;) {
            page_range r[GT_OP_MAX_REFS], next[GT_OP_MAX_REFS];
            int nr = 0, nnext = 0, hi = lo + 1;
            uint64_t total = 0;
            GT_TRY(op_pages(pg, op, &(gt_op_part){g, lo, hi}, pl, r, &nr, &total));
            while (hi < tiles) {  // the part grows while the next tile still fits with it
                GT_TRY(op_pages(pg, op, &(gt_op_part){g, lo, hi + 1}, pl, next, &nnext, &total));
                if (total > pg->cap_pages) {
                    break;
                }
                memcpy(r, next, sizeof(page_range) * (size_t)nnext);
                nr = nnext;
                hi++;
            }
            GT_TRY(launch_pinned(pg, op, &(gt_op_part){g, lo, hi}, r, nr, NULL, 0, run, ctx));
            lo = hi;
        }
    }
    return GT_OK;
}

gt_err gt_pager_launch(gt_pager *pg, const gt_op *op, gt_pager_where_fn where,
                       gt_pager_run_fn run, void *ctx)
{
    if (pg->failed) {
        lock(pg);
        gt_err err = caller_failed(pg);
        unlock(pg);
        return err;
    }
    op_place pl;
    GT_TRY(op_locate(op, where, ctx, &pl));
    bool fits = false;
    uint64_t total = 0;
    GT_TRY(launch_placed(pg, op, &pl, run, ctx, &fits, &total));
    if (fits) {
        return GT_OK;
    }
    if (gt_op_part_groups(op) > 0) {
        return launch_parts(pg, op, &pl, run, ctx, total);
    }
    if (!op_elementwise(op->kind)) {
        return op_too_big(pg, op, total,
                          " (neither elementwise nor a matmul or sum_of_squares: not split)");
    }
    return launch_split(pg, op, where, run, ctx, total);
}

void gt_pager_stats_get(const gt_pager *cpg, gt_pager_stats *st)
{
    gt_pager *pg = (gt_pager *)cpg;  // the lock is not the pager's state
    lock(pg);
    *st = (gt_pager_stats){.page_bytes = pg->page, .cap = pg->cap_pages * pg->page,
                           .resident_bytes = pg->nresident * pg->page,
                           .peak_resident = pg->peak * pg->page,
                           .evicted_bytes = pg->nsealed * pg->page,
                           .page_outs = pg->page_outs, .fault_ins = pg->fault_ins,
                           .clean_drops = pg->clean_drops, .demand_faults = pg->demand_faults,
                           .prefetch = pg->has_worker,
                           .prefetch_issued = pg->prefetch_issued,
                           .prefetch_hits = pg->prefetch_hits,
                           .prefetch_wasted = pg->prefetch_wasted,
                           .assist_faults = pg->assist_faults,
                           .pre_evictions = pg->pre_evictions,
                           .mispredicts = gt_opstream_mispredicts(pg->os),
                           .map_calls = atomic_load(&pg->map_calls),
                           .ops_in_parts = pg->ops_in_parts, .discards = pg->discards};
    unlock(pg);
}

uint64_t gt_pager_run_bytes(const gt_pager *pg) { return each_run(pg) * pg->page; }

// ---- test hooks (pager_test.h) ----------------------------------------------------------------

void gt_pager_test_paths(const gt_pager *pg, const char **pages, const char **tree)
{
    *pages = pg->store_path;
    *tree = pg->tree_path;
}

uint64_t gt_pager_test_blob_at(const gt_pager *pg, uint64_t page)
{
    return blob_at(pg, (uint32_t)page);
}

uint64_t gt_pager_test_blob_bytes(const gt_pager *pg) { return pg->page + GT_AEAD_TAG_BYTES; }

uint64_t gt_pager_test_page_of(const gt_pager *pg, uint64_t arena_off)
{
    return arena_off / pg->page;
}

void gt_pager_test_sync_prefetch(gt_pager *pg, bool on)
{
    lock(pg);
    pg->test_sync = on;
    unlock(pg);
}

void gt_pager_test_settle(gt_pager *pg)
{
    lock(pg);
    while (pg->has_worker && (pg->idle_gen != pg->plan_gen || pg->busy > 0)) {
        pthread_cond_wait(&pg->moved, &pg->mu);
    }
    unlock(pg);
}
