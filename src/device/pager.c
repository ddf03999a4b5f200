// The pager (device.h "the pager", docs/paging.md): a virtual arena of whole pages of which at
// most `cap` bytes are readable at once. A resident page is a frame of a fixed pool (a memfd of
// the cap's size) mapped at its address. A page that has to make room is sealed into an untrusted
// store file (AES-256-GCM under a key only this pager has), its frame wiped and returned to the
// pool, and its address mapped PROT_NONE, so a stray access is a crash rather than a silent read.
// Each page's version is a leaf of a binary hash tree stored in a second untrusted file; the
// tree's top levels (root included) stay here. A fault-in recomputes the path from the leaf and
// its stored siblings to the first node kept here, and opens the blob with the version, the
// buffer, the page and its label in the AAD: a stale, replayed, swapped, truncated, deleted or
// altered page fails, and the pager is then failed for good.
#include <gputravel/crypto.h>
#include <gputravel/device.h>

#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pager_test.h"

enum { PG_FREE = 0, PG_ZERO, PG_RESIDENT, PG_SEALED };

#define NO_PAGE UINT32_MAX
#define TREE_HASH GT_SHA256_BYTES
#define TREE_MAX_LEVELS 32
#define PAGER_MAX_PAGES (1u << 26)
#define PAGER_MIN_CAP_PAGES 4u
#define PAGER_AAD_BYTES 48
#define TREE_CACHE_NODES (1u << 13)  // 256 KiB of the tree's top kept here (14 levels)

typedef struct {
    uint64_t handle, owner;  // the buffer it belongs to (handle 0: not placed)
    uint32_t first;          // that buffer's first page
    uint32_t prev, next;     // the LRU list of resident pages, oldest first
    uint32_t frame;          // resident: the pool frame mapped at it
    uint8_t state;
    bool dirty;              // resident and maybe changed since it came in: reseal to evict
    bool has_blob;           // the store holds its newest version (it was sealed before)
    uint64_t pin;            // the hold it was last needed by: never evicted during it
    gt_label sealed_label;   // the label bound into its blob's AAD
} page_meta;

typedef struct {
    uint32_t first, count;
} extent;

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
    uint8_t *stage;  // one sealed page: ciphertext || tag (never plaintext)
    // The frames: cap_pages pages of a memfd, the only memory a resident page can have. A
    // resident page maps its frame; a free frame is all zeros (wiped when its page left).
    int pool_fd;
    uint8_t *pool;  // all frames, mapped once: where pages are opened and wiped
    uint32_t *free_frames, nfree;
    int store_fd, tree_fd;
    char store_path[600], tree_path[600];
    const gt_buftab *tab;
    uint64_t epoch;
    bool failed;
    uint64_t nresident, nsealed, peak, page_outs, fault_ins, clean_drops;
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

static uint8_t *page_addr(const gt_pager *pg, uint32_t p) { return pg->base + p * pg->page; }

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

// Gone from readable memory: its frame wiped and back in the pool, the address mapped to
// nothing (PROT_NONE), so a stray access is a crash.
static void page_drop(gt_pager *pg, uint32_t p)
{
    uint8_t *a = page_addr(pg, p);
    uint32_t f = pg->pages[p].frame;
    gt_secure_zero(pg->pool + (uint64_t)f * pg->page, pg->page);
    void *r = mmap(a, pg->page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
                   MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {  // out of mappings: the frame stays mapped, but unreadable
        (void)mprotect(a, pg->page, PROT_NONE);
    }
    pg->free_frames[pg->nfree++] = f;
    lru_remove(pg, p);
    pg->nresident--;
}

static void pager_wipe_all(gt_pager *pg)
{
    while (pg->lru_head != NO_PAGE) {
        uint32_t p = pg->lru_head;
        page_drop(pg, p);
        pg->pages[p].state = PG_ZERO;
    }
    if (pg->store_fd >= 0) {
        (void)ftruncate(pg->store_fd, 0);
    }
}

// A check failed: nothing of this pager is trusted any more. Everything resident is wiped now;
// the owner ends the session (and releases the buffers).
static gt_err pager_fail(gt_pager *pg, uint32_t p, gt_err why)
{
    pg->failed = true;
    pager_wipe_all(pg);
    const page_meta *m = &pg->pages[p];
    return gt_errf(GT_E_AUTH,
                   "paging: device session torn down: page %llu of buffer %#llx failed its "
                   "check in the untrusted store (stale, swapped, cut, deleted or altered): %s",
                   (unsigned long long)(p - m->first), (unsigned long long)m->handle, why.msg);
}

static gt_err page_out(gt_pager *pg, uint32_t p)
{
    page_meta *m = &pg->pages[p];
    if (!m->dirty) {  // unchanged: what the store (or a zero page) holds is still its content
        page_drop(pg, p);
        m->state = m->has_blob ? PG_SEALED : PG_ZERO;
        pg->nsealed += m->has_blob;
        pg->clean_drops++;
        return GT_OK;
    }
    gt_buftab_entry *e = NULL;
    GT_TRY(gt_buftab_find(pg->tab, m->handle, m->owner, &e));
    uint8_t sib[TREE_MAX_LEVELS][TREE_HASH], aad[PAGER_AAD_BYTES], iv[GT_AEAD_IV_BYTES];
    uint64_t version = 0;
    gt_err err = tree_check(pg, p, &version, sib);
    if (!gt_is_ok(err)) {
        return pager_fail(pg, p, err);
    }
    version++;
    page_aad(pg, p, version, e->label, aad, iv);
    size_t n = 0;
    GT_TRY(gt_aead_seal(pg->stage, pg->page + GT_AEAD_TAG_BYTES, &n, page_addr(pg, p), pg->page,
                        aad, sizeof aad, iv, pg->key));
    GT_TRY(store_write(pg->store_fd, pg->stage, n, blob_at(pg, p)));
    GT_TRY(tree_set(pg, p, version, sib));
    page_drop(pg, p);
    m->state = PG_SEALED;
    m->dirty = false;
    m->has_blob = true;
    m->sealed_label = e->label;
    pg->nsealed++;
    pg->page_outs++;
    return GT_OK;
}

// Page p's newest blob, checked and opened into dst (its frame).
static gt_err page_open(gt_pager *pg, uint32_t p, uint8_t *dst)
{
    page_meta *m = &pg->pages[p];
    uint8_t sib[TREE_MAX_LEVELS][TREE_HASH], aad[PAGER_AAD_BYTES], iv[GT_AEAD_IV_BYTES];
    uint64_t version = 0;
    size_t blob = pg->page + GT_AEAD_TAG_BYTES, n = 0;
    GT_TRY(tree_check(pg, p, &version, sib));
    GT_ENSURE(version > 0, GT_E_AUTH, "paging: a sealed page at version 0");
    GT_TRY(store_read(pg->store_fd, pg->stage, blob, blob_at(pg, p), "a page"));
    page_aad(pg, p, version, m->sealed_label, aad, iv);
    return gt_aead_open(dst, pg->page, &n, pg->stage, blob, aad, sizeof aad, iv, pg->key);
}

static gt_err page_in(gt_pager *pg, uint32_t p)
{
    page_meta *m = &pg->pages[p];
    assert(pg->nfree > 0);  // nresident < cap_pages
    uint32_t f = pg->free_frames[pg->nfree - 1];
    uint8_t *frame = pg->pool + (uint64_t)f * pg->page;
    if (m->state == PG_SEALED) {  // a zero page needs nothing: a free frame is zeros
        gt_err err = page_open(pg, p, frame);
        if (!gt_is_ok(err)) {
            gt_secure_zero(frame, pg->page);
            return pager_fail(pg, p, err);
        }
    }
    // The frame at the page's address: no frame is allocated or zeroed by the kernel here, and
    // MAP_POPULATE sets its entries in the same call rather than one fault per 4 KiB.
    void *r = mmap(page_addr(pg, p), pg->page, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED | MAP_POPULATE, pg->pool_fd, (off_t)f * (off_t)pg->page);
    if (r == MAP_FAILED) {
        gt_secure_zero(frame, pg->page);
        return gt_errf(GT_E_NOMEM, "paging: cannot map a page (vm.max_map_count?)");
    }
    (void)madvise(r, pg->page, MADV_DONTDUMP);
    pg->nfree--;
    m->frame = f;
    pg->nsealed -= m->state == PG_SEALED;
    m->has_blob = m->state == PG_SEALED;
    m->dirty = false;
    m->state = PG_RESIDENT;
    lru_push(pg, p);
    pg->nresident++;
    pg->fault_ins++;
    pg->peak = pg->nresident > pg->peak ? pg->nresident : pg->peak;
    return GT_OK;
}

// Page p resident and pinned for the current hold, evicting the coldest unpinned pages.
static gt_err page_need(gt_pager *pg, uint32_t p, bool write)
{
    page_meta *m = &pg->pages[p];
    assert(m->state != PG_FREE);
    if (m->state == PG_RESIDENT) {
        lru_remove(pg, p);
        lru_push(pg, p);
        m->pin = pg->epoch;
        m->dirty |= write;
        return GT_OK;
    }
    while (pg->nresident >= pg->cap_pages) {
        uint32_t v = pg->lru_head;
        while (v != NO_PAGE && pg->pages[v].pin == pg->epoch) {
            v = pg->pages[v].next;
        }
        GT_ENSURE(v != NO_PAGE, GT_E_LIMIT, "paging: every resident page is in use");
        GT_TRY(page_out(pg, v));
    }
    GT_TRY(page_in(pg, p));
    m->pin = pg->epoch;
    m->dirty = write;
    return GT_OK;
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
    }
    pg->nfree = (uint32_t)pg->cap_pages;
    return GT_OK;
}

static gt_err pager_memory(gt_pager *pg)
{
    pg->pages = calloc(pg->npages, sizeof *pg->pages);
    pg->stage = malloc(pg->page + GT_AEAD_TAG_BYTES);
    pg->cache = calloc(pg->cache_n, sizeof *pg->cache);
    pg->free_frames = calloc(pg->cap_pages, sizeof *pg->free_frames);
    GT_ENSURE(pg->pages != NULL && pg->stage != NULL && pg->cache != NULL &&
                  pg->free_frames != NULL, GT_E_NOMEM, "paging: out of memory");
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

gt_err gt_pager_new(gt_pager **out, const gt_pager_config *cfg)
{
    *out = NULL;
    gt_pager *pg = calloc(1, sizeof *pg);
    GT_ENSURE(pg != NULL, GT_E_NOMEM, "paging: out of memory");
    pg->store_fd = pg->tree_fd = pg->pool_fd = -1;
    pg->lru_head = pg->lru_tail = NO_PAGE;
    pg->tab = cfg->tab;
    gt_err err = pager_sizes(pg, cfg);
    if (gt_is_ok(err)) {
        err = pager_memory(pg);
    }
    if (gt_is_ok(err)) {
        err = pager_store(pg, cfg->store_dir);
    }
    if (gt_is_ok(err)) {
        err = gt_pager_rekey(pg);
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
    free(pg->stage);
    free(pg->extents);
    free(pg->cache);
    free(pg->free_frames);
    gt_secure_zero(pg, sizeof *pg);
    free(pg);
}

gt_err gt_pager_rekey(gt_pager *pg)
{
    assert(pg->nextents == 0);
    GT_ENSURE(pg->nextents == 0, GT_E_STATE, "paging: rekey with buffers placed");
    uint64_t blobs = (uint64_t)pg->npages * (pg->page + GT_AEAD_TAG_BYTES);
    uint64_t tree = (uint64_t)pg->nleaves * (TREE_HASH + 8);
    GT_ENSURE(ftruncate(pg->store_fd, 0) == 0 && ftruncate(pg->store_fd, (off_t)blobs) == 0 &&
                  ftruncate(pg->tree_fd, 0) == 0 && ftruncate(pg->tree_fd, (off_t)tree) == 0,
              GT_E_IO, "paging: cannot reset the store");
    GT_TRY(gt_random_bytes(pg->key, sizeof pg->key));
    pg->failed = false;
    pg->nsealed = 0;
    return tree_init(pg);
}

uint8_t *gt_pager_base(gt_pager *pg) { return pg->base; }

bool gt_pager_failed(const gt_pager *pg) { return pg->failed; }

static gt_err failed_err(void)
{
    return gt_errf(GT_E_AUTH, "paging: the untrusted store failed a check earlier; the device "
                              "session is torn down");
}

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

gt_err gt_pager_place(gt_pager *pg, gt_dbuf h, uint64_t owner, uint64_t bytes, uint64_t *off)
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

void gt_pager_release(gt_pager *pg, uint64_t off)
{
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

// Pages [lo, hi) resident and pinned, within the hold already begun (pg->epoch).
static gt_err need_pages(gt_pager *pg, uint64_t lo, uint64_t hi, bool write)
{
    for (uint64_t p = lo; p < hi; p++) {
        GT_TRY(page_need(pg, (uint32_t)p, write));
    }
    return GT_OK;
}

gt_err gt_pager_hold(gt_pager *pg, uint64_t off, uint64_t len, bool write)
{
    if (pg->failed) {
        return failed_err();
    }
    if (len == 0) {
        return GT_OK;
    }
    uint64_t lo = off / pg->page, hi = (off + len + pg->page - 1) / pg->page;
    char need[32], cap[32];
    gt_format_size(need, sizeof need, (hi - lo) * pg->page);
    gt_format_size(cap, sizeof cap, pg->cap_pages * pg->page);
    GT_ENSURE(hi - lo <= pg->cap_pages, GT_E_LIMIT,
              "device: this access needs %s resident at once, the memory limit is %s", need, cap);
    pg->epoch++;
    return need_pages(pg, lo, hi, write);
}

gt_err gt_pager_each(gt_pager *pg, uint64_t off, uint64_t len, bool write, gt_pager_piece_fn fn,
                     void *ctx)
{
    for (uint64_t done = 0; done < len;) {
        uint64_t at = off + done, n = pg->page - at % pg->page;
        n = n < len - done ? n : len - done;
        GT_TRY(gt_pager_hold(pg, at, n, write));
        GT_TRY(fn(ctx, pg->base + at, done, n));
        done += n;
    }
    return GT_OK;
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

// The page ranges op's refs cover, merged, and how many pages that is.
static gt_err op_pages(gt_pager *pg, const gt_op *op, gt_pager_where_fn where, void *ctx,
                       page_range *r, int *nr, uint64_t *total)
{
    uint64_t bytes[GT_OP_MAX_REFS];
    int nrefs = 0, n = 0;
    GT_TRY(gt_op_ref_sizes(op, bytes, &nrefs));
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    for (int i = 0; i < nrefs; i++) {
        if (op->refs[i].buf == 0 || bytes[i] == 0) {
            continue;
        }
        uint64_t boff = 0;
        GT_TRY(where(ctx, op->refs[i].buf, &boff));
        uint64_t a = boff + op->refs[i].offset;
        r[n++] = (page_range){a / pg->page, (a + bytes[i] + pg->page - 1) / pg->page,
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

// Element i of every N-shaped ref depends only on element i of the others and on whole scalar
// refs: any split in multiples of 16 elements gives the same bytes (the kernels' vector blocks).
static bool op_elementwise(uint32_t kind)
{
    return kind == GT_OP_GELU_FWD || kind == GT_OP_GELU_BWD || kind == GT_OP_RESIDUAL_FWD ||
           kind == GT_OP_RESIDUAL_BWD || kind == GT_OP_ADAMW || kind == GT_OP_CLIP_GRADS;
}

static gt_err launch_fit(gt_pager *pg, const gt_op *op, gt_pager_where_fn where,
                         gt_pager_run_fn run, void *ctx, bool *fits)
{
    page_range r[GT_OP_MAX_REFS];
    int nr = 0;
    uint64_t total = 0;
    GT_TRY(op_pages(pg, op, where, ctx, r, &nr, &total));
    *fits = total <= pg->cap_pages;
    if (!*fits) {
        return GT_OK;
    }
    pg->epoch++;
    for (int i = 0; i < nr; i++) {
        GT_TRY(need_pages(pg, r[i].lo, r[i].hi, r[i].write));
    }
    return run(ctx, op);
}

static gt_err op_too_big(const gt_pager *pg, const gt_op *op, uint64_t pages)
{
    char need[32], cap[32];
    gt_format_size(need, sizeof need, pages * pg->page);
    gt_format_size(cap, sizeof cap, pg->cap_pages * pg->page);
    return gt_errf(GT_E_LIMIT, "device: op %s needs %s resident, cap is %s%s", gt_op_name(op->kind),
                   need, cap, op_elementwise(op->kind) ? "" : " (not elementwise: not split)");
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
        for (;;) {  // a piece may straddle a page more than another: halve until it fits
            GT_ENSURE(c > 0, GT_E_LIMIT, "%s", op_too_big(pg, op, pages).msg);
            gt_op sub = op_piece(op, start, c);
            page_range r[GT_OP_MAX_REFS];
            int nr = 0;
            uint64_t total = 0;
            GT_TRY(op_pages(pg, &sub, where, ctx, r, &nr, &total));
            if (total <= pg->cap_pages) {
                break;
            }
            c = c / 2 / 16 * 16;
        }
        gt_op sub = op_piece(op, start, c);
        bool fits = false;
        GT_TRY(launch_fit(pg, &sub, where, run, ctx, &fits));
        assert(fits);
        start += c;
    }
    return GT_OK;
}

gt_err gt_pager_launch(gt_pager *pg, const gt_op *op, gt_pager_where_fn where,
                       gt_pager_run_fn run, void *ctx)
{
    if (pg->failed) {
        return failed_err();
    }
    bool fits = false;
    GT_TRY(launch_fit(pg, op, where, run, ctx, &fits));
    if (fits) {
        return GT_OK;
    }
    page_range r[GT_OP_MAX_REFS];
    int nr = 0;
    uint64_t total = 0;
    GT_TRY(op_pages(pg, op, where, ctx, r, &nr, &total));
    if (!op_elementwise(op->kind)) {
        return op_too_big(pg, op, total);
    }
    return launch_split(pg, op, where, run, ctx, total);
}

void gt_pager_stats_get(const gt_pager *pg, gt_pager_stats *st)
{
    *st = (gt_pager_stats){.page_bytes = pg->page, .cap = pg->cap_pages * pg->page,
                           .resident_bytes = pg->nresident * pg->page,
                           .peak_resident = pg->peak * pg->page,
                           .evicted_bytes = pg->nsealed * pg->page,
                           .page_outs = pg->page_outs, .fault_ins = pg->fault_ins,
                           .clean_drops = pg->clean_drops};
}

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
