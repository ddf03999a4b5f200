// Sealing, verifying and unsealing datasets, streamed through one fixed buffer (constant memory
// whatever the dataset size). Nothing is visible under a final name until it is complete (seal)
// or authenticated (unseal).
#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <dirent.h>
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- small file helpers ---------------------------------------------------------------------

static gt_err read_exact(int fd, void *p, size_t n, const char *path)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        GT_ENSURE(r >= 0, GT_E_IO, "%s: read failed: %s", path, strerror(errno));
        GT_ENSURE(r > 0, GT_E_TRUNCATED, "%s: ends early (changed while being read?)", path);
        b += r;
        n -= (size_t)r;
    }
    return GT_OK;
}

static gt_err fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    GT_ENSURE(fd >= 0, GT_E_IO, "%s: %s", path, strerror(errno));
    bool ok = fsync(fd) == 0 || errno == EINVAL;  // some file systems cannot fsync a folder
    int saved = errno;
    close(fd);
    GT_ENSURE(ok, GT_E_IO, "%s: fsync: %s", path, strerror(saved));
    return GT_OK;
}

static bool dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL) {
        return false;
    }
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            empty = false;
            break;
        }
    }
    closedir(d);
    return empty;
}

// Opens chunk i of dsdir and checks what needs no key and no full read: present, exactly the
// size the manifest says, a header naming this dataset and this index. On success *fd is
// positioned just after the header.
static gt_err chunk_open_checked(const char *dsdir, const gt_manifest *m, uint32_t i, int *fd,
                                 char *path, size_t path_cap)
{
    *fd = -1;
    GT_TRY(gt_chunk_path(path, path_cap, dsdir, i));
    int f = open(path, O_RDONLY);
    GT_ENSURE(f >= 0, errno == ENOENT ? GT_E_NOTFOUND : GT_E_IO, "chunk %u is missing: %s: %s", i,
              path, strerror(errno));
    gt_err err = GT_OK;
    struct stat st;
    GT_ENSURE_GOTO(err, fstat(f, &st) == 0 && S_ISREG(st.st_mode), fail, GT_E_IO,
                   "chunk %u: %s is not a regular file", i, path);
    uint64_t want = gt_manifest_chunk_file_bytes(m, i), have = (uint64_t)st.st_size;
    GT_ENSURE_GOTO(err, have >= want, fail, GT_E_TRUNCATED,
                   "chunk %u is truncated: %s has %llu of the %llu bytes the manifest says", i,
                   path, (unsigned long long)have, (unsigned long long)want);
    GT_ENSURE_GOTO(err, have == want, fail, GT_E_FORMAT,
                   "chunk %u is longer than the manifest says: %s has %llu bytes, not %llu", i,
                   path, (unsigned long long)have, (unsigned long long)want);
    uint8_t hdr[GT_CHUNK_HEADER_BYTES];
    GT_TRY_GOTO(err, read_exact(f, hdr, sizeof hdr, path), fail);
    GT_TRY_GOTO(err, gt_chunk_header_check(hdr, sizeof hdr, m, i), fail);
    *fd = f;
    return GT_OK;
fail:
    close(f);
    return err;
}

// ---- the two-core pipeline ------------------------------------------------------------------
// A ring of GT_SEAL_PIPE_SLOTS buffers, allocated and touched once per operation (constant
// memory; no page faults in the loop). The calling thread fills slot k and publishes it; one or
// two worker threads each run their own function over every slot, in order, reading it only. A
// slot is refilled once every worker is done with it. Seal: the caller reads and encrypts, one
// worker hashes the ciphertext while the other writes it (mostly waiting on the disk). Unseal:
// the caller reads and decrypts, a worker writes. Verify: the caller reads, a worker hashes. A
// worker that cannot be started (or is not wanted: gt_seal_params.threads 1) runs inline in
// stage_push: slower, same result.
typedef gt_err (*stage_fn)(void *ctx, const uint8_t *p, size_t n);

// Each slot has a page of spare room past its GT_SEAL_PIPE_BYTES: sealing keeps its output
// aligned to the file's blocks and spills the 40 bytes the chunk header shifts there.
#define SLOT_SPARE 4096u
#define SLOT_STRIDE ((size_t)GT_SEAL_PIPE_BYTES + SLOT_SPARE)
#define RING_BYTES ((size_t)GT_SEAL_PIPE_SLOTS * SLOT_STRIDE)
#define STAGE_MAX_WORKERS 2

typedef struct stage stage;

typedef struct {
    stage *st;
    stage_fn fn;
    void *ctx;
    uint64_t consumed;  // slots this worker has finished
    bool threaded;
    pthread_t th;
} stage_worker;

struct stage {
    uint8_t *mem;  // RING_BYTES
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t len[GT_SEAL_PIPE_SLOTS];
    uint64_t produced;  // slots published
    bool closed, failed;
    gt_err err;  // the first worker failure
    int nworkers;
    stage_worker w[STAGE_MAX_WORKERS];
};

// On 2 MiB-aligned memory with transparent huge pages asked for (where the system allows
// them): O_DIRECT pins the writer's pages per write, which is cheaper on huge pages, and the
// cipher and the hash take fewer TLB misses.
#define RING_ALIGN ((size_t)2 << 20)

static gt_err ring_alloc(uint8_t **mem)
{
    void *p = NULL;
    GT_ENSURE(posix_memalign(&p, RING_ALIGN, RING_BYTES) == 0 && p != NULL, GT_E_NOMEM,
              "out of memory for the %zu-byte streaming buffers", RING_BYTES);
    (void)madvise(p, RING_BYTES & ~(RING_ALIGN - 1), MADV_HUGEPAGE);  // advisory
    memset(p, 0, RING_BYTES);  // touch once, here, not in the timed loop
    *mem = p;
    return GT_OK;
}

static void ring_free(uint8_t *mem)
{
    if (mem != NULL) {
        gt_secure_zero(mem, RING_BYTES);
        free(mem);
    }
}

static uint8_t *stage_slot(stage *st, uint64_t k)
{
    return st->mem + (size_t)(k % GT_SEAL_PIPE_SLOTS) * SLOT_STRIDE;
}

static void stage_fail(stage *st, gt_err e)  // with st->mu held, or single-threaded
{
    if (!st->failed) {
        st->err = e;
        st->failed = true;
    }
}

static void *stage_main(void *arg)
{
    stage_worker *w = arg;
    stage *st = w->st;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (w->consumed == st->produced && !st->closed && !st->failed) {
            pthread_cond_wait(&st->cv, &st->mu);
        }
        if (w->consumed == st->produced || st->failed) {
            break;  // closed and drained, or another worker failed
        }
        uint64_t k = w->consumed;
        size_t n = st->len[k % GT_SEAL_PIPE_SLOTS];
        pthread_mutex_unlock(&st->mu);
        gt_err e = w->fn(w->ctx, stage_slot(st, k), n);
        pthread_mutex_lock(&st->mu);
        w->consumed++;
        if (e.code != GT_E_NONE) {
            stage_fail(st, e);
        }
        pthread_cond_broadcast(&st->cv);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

static void stage_start(stage *st, uint8_t *mem, int nworkers, const stage_fn *fns,
                        void *const *ctxs, bool threaded)
{
    memset(st, 0, sizeof *st);
    st->mem = mem;
    st->err = GT_OK;
    st->nworkers = nworkers;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    for (int i = 0; i < nworkers; i++) {
        stage_worker *w = &st->w[i];
        w->st = st;
        w->fn = fns[i];
        w->ctx = ctxs[i];
        w->threaded = threaded && pthread_create(&w->th, NULL, stage_main, w) == 0;
    }
}

static uint64_t stage_slowest(const stage *st)
{
    uint64_t c = st->produced;
    for (int i = 0; i < st->nworkers; i++) {
        c = st->w[i].consumed < c ? st->w[i].consumed : c;
    }
    return c;
}

// The slot to fill next; waits until every worker has finished with it. NULL once a worker
// failed (stage_finish returns why).
static uint8_t *stage_next(stage *st)
{
    pthread_mutex_lock(&st->mu);
    while (st->produced - stage_slowest(st) >= GT_SEAL_PIPE_SLOTS && !st->failed) {
        pthread_cond_wait(&st->cv, &st->mu);
    }
    bool failed = st->failed;
    pthread_mutex_unlock(&st->mu);
    return failed ? NULL : stage_slot(st, st->produced);
}

// Hands the slot stage_next gave (n bytes filled) to the workers.
static void stage_push(stage *st, size_t n)
{
    uint64_t k = st->produced;
    pthread_mutex_lock(&st->mu);
    st->len[k % GT_SEAL_PIPE_SLOTS] = n;
    st->produced++;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    for (int i = 0; i < st->nworkers; i++) {
        stage_worker *w = &st->w[i];
        if (w->threaded) {
            continue;
        }
        pthread_mutex_lock(&st->mu);
        bool failed = st->failed;
        pthread_mutex_unlock(&st->mu);
        gt_err e = failed ? GT_OK : w->fn(w->ctx, stage_slot(st, k), n);
        pthread_mutex_lock(&st->mu);
        w->consumed++;
        if (e.code != GT_E_NONE) {
            stage_fail(st, e);
        }
        pthread_mutex_unlock(&st->mu);
    }
}

// Drains (or, after the caller's own failure, just stops) the workers; returns the first
// worker failure.
static gt_err stage_finish(stage *st)
{
    pthread_mutex_lock(&st->mu);
    st->closed = true;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    for (int i = 0; i < st->nworkers; i++) {
        if (st->w[i].threaded) {
            pthread_join(st->w[i].th, NULL);
        }
    }
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    return st->err;
}

// Starts writeback of what was written since *synced once a window has gathered, so that the
// disk works while the CPUs do and the final fsync finds little left to flush. Advisory: a file
// system that cannot (tmpfs) just ignores it, and the fsync still decides durability.
static void writeback_start(int fd, uint64_t written, uint64_t *synced, bool force)
{
    if (written > *synced && (force || written - *synced >= GT_SEAL_WRITEBACK_BYTES)) {
        (void)sync_file_range(fd, (off_t)*synced, (off_t)(written - *synced),
                              SYNC_FILE_RANGE_WRITE);
        *synced = written;
    }
}

static gt_err hash_stage(void *ctx, const uint8_t *p, size_t n)
{
    return gt_hash_update(ctx, p, n);
}

// ---- sealing --------------------------------------------------------------------------------

// The concatenated tokens of the input shards, read in order across shard boundaries.
// Pipelined (map): each shard's tokens are seen through a sliding read-only mapping of
// SOURCE_WINDOW bytes, and the cipher reads them there, writing its output into the ring: no
// read() copy out of the page cache (a tenth of sealing's CPU time), and the resident mapping
// stays one window whatever the shard size. The reference path (threads 1) read()s into the
// ring and encrypts in place. A shard truncated by another process while it is mapped raises
// SIGBUS rather than an error (as for any mmap reader); its length is checked again before each
// window.
#define SOURCE_WINDOW (8u << 20)
#define SOURCE_PIECE (64u << 10)  // bytes checked then encrypted while in cache

typedef struct {
    const char *const *paths;
    size_t count;
    size_t cur;
    bool open;
    gt_shard_reader r;
    uint64_t position;  // tokens delivered so far
    bool map;
    uint8_t *win;       // the mapping, or NULL
    size_t win_len;
    uint64_t win_off;   // its file offset (page-aligned)
} shard_source;

static void source_unmap(shard_source *s)
{
    if (s->win != NULL) {
        munmap(s->win, s->win_len);
        s->win = NULL;
    }
}

static void source_close(shard_source *s)
{
    source_unmap(s);
    if (s->open) {
        gt_shard_reader_close(&s->r);
        s->open = false;
    }
}

// Whether any of the n tokens is >= lim (lim >= 1): a saturating subtract of lim - 1 leaves
// a lane nonzero exactly when its token is larger, so one subtract and one OR per vector.
// AVX2 (chosen at run time) takes 16 lanes; SSE2 8; the plain scalar loop, which -O2 does not
// vectorise, took an eighth of sealing's time.
#if defined(__x86_64__)
__attribute__((target("avx2"))) static bool any_token_at_least_avx2(const uint16_t *t, size_t n,
                                                                    uint16_t lim)
{
    const __m256i top = _mm256_set1_epi16((int16_t)(lim - 1));
    __m256i bad = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(t + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(t + i + 16));
        bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_subs_epu16(a, top),
                                                   _mm256_subs_epu16(b, top)));
    }
    uint32_t any = !_mm256_testz_si256(bad, bad);
    for (; i < n; i++) {
        any |= t[i] >= lim;
    }
    return any != 0;
}
#endif

static bool any_token_at_least(const uint16_t *t, size_t n, uint16_t lim)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {  // a load of what libgcc found at start-up
        return any_token_at_least_avx2(t, n, lim);
    }
#endif
    size_t i = 0;
    uint32_t any = 0;
#if defined(__SSE2__)
    const __m128i top = _mm_set1_epi16((int16_t)(lim - 1));
    __m128i bad = _mm_setzero_si128();
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(t + i));
        bad = _mm_or_si128(bad, _mm_subs_epu16(v, top));
    }
    any = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi16(bad, _mm_setzero_si128())) != 0xffffu;
#endif
    for (; i < n; i++) {
        any |= t[i] >= lim;
    }
    return any != 0;
}

// The got tokens at t are the shard's next ones: checks them against the vocabulary and counts
// them delivered.
static gt_err source_accept(shard_source *s, const uint16_t *t, size_t got, uint32_t vocab)
{
    if (vocab < 65536 && any_token_at_least(t, got, (uint16_t)vocab)) {
        for (size_t i = 0; i < got; i++) {
            GT_ENSURE(t[i] < vocab, GT_E_FORMAT,
                      "%s: token %u at position %llu is outside the vocabulary (%u tokens)",
                      s->paths[s->cur], t[i], (unsigned long long)(s->r.tokens_read + i), vocab);
        }
    }
    s->r.tokens_read += got;
    s->position += got;
    return GT_OK;
}

// Opens the next shard when none is; false at the end of the current one (closed, moved on).
static gt_err source_ready(shard_source *s, bool *more)
{
    if (!s->open) {
        GT_ENSURE(s->cur < s->count, GT_E_IO, "the input shards changed while being sealed");
        GT_TRY(gt_shard_reader_open(&s->r, s->paths[s->cur]));
        s->open = true;
        (void)posix_fadvise(fileno(s->r.fp), 0, 0, POSIX_FADV_SEQUENTIAL);  // read ahead
    }
    *more = s->r.tokens_read < s->r.token_count;
    if (!*more) {
        source_close(s);
        s->cur++;
    }
    return GT_OK;
}

// Up to max of the current shard's next tokens, contiguous in the mapping (*got >= 1).
static gt_err source_mapped(shard_source *s, size_t max, const uint16_t **t, size_t *got)
{
    uint64_t at = GT_SHARD_HEADER_BYTES + 2 * s->r.tokens_read;
    uint64_t end = GT_SHARD_HEADER_BYTES + 2 * s->r.token_count;
    GT_ENSURE(at < end && max > 0, GT_E_STATE, "%s: read past its end", s->paths[s->cur]);
    if (s->win == NULL || at >= s->win_off + s->win_len) {
        source_unmap(s);
        int fd = fileno(s->r.fp);
        struct stat st;
        GT_ENSURE(fstat(fd, &st) == 0 && (uint64_t)st.st_size >= end, GT_E_TRUNCATED,
                  "%s: ends early (changed while being read?)", s->paths[s->cur]);
        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);  // a power of two, even
        uint64_t off = at & ~(page - 1);  // even, as at is: tokens never straddle windows
        size_t len = (size_t)(end - off < SOURCE_WINDOW ? end - off : SOURCE_WINDOW);
        void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
        GT_ENSURE(p != MAP_FAILED, GT_E_IO, "%s: cannot map: %s", s->paths[s->cur],
                  strerror(errno));
        (void)madvise(p, len, MADV_SEQUENTIAL);
        (void)madvise(p, len, MADV_WILLNEED);
        s->win = p;
        s->win_len = len;
        s->win_off = off;
    }
    size_t avail = (size_t)((s->win_off + s->win_len - at) / 2);  // >= 1: at < its end
    *got = avail < max ? avail : max;
    *t = (const uint16_t *)(const void *)(s->win + (at - s->win_off));
    return GT_OK;
}

// Fills out with the next n bytes of tokens, encrypted (n even).
static gt_err source_encrypt(shard_source *s, gt_aead_stream *a, uint8_t *out, size_t n,
                             uint32_t vocab)
{
    size_t done = 0;
    while (done < n) {
        bool more = false;
        GT_TRY(source_ready(s, &more));
        if (!more) {
            continue;
        }
        size_t want = (n - done) / 2, got = 0;
        if (s->map) {
            const uint16_t *t = NULL;
            GT_TRY(source_mapped(s, want < SOURCE_PIECE / 2 ? want : SOURCE_PIECE / 2, &t, &got));
            GT_TRY(source_accept(s, t, got, vocab));
            GT_TRY(gt_aead_stream_update(a, out + done, (const uint8_t *)t, 2 * got));
        } else {
            uint16_t *t = (uint16_t *)(void *)(out + done);
            uint64_t read_before = s->r.tokens_read;
            GT_TRY(gt_shard_reader_read(&s->r, t, want, &got));
            GT_ENSURE(got > 0, GT_E_TRUNCATED, "%s: ends early (changed while being read?)",
                      s->paths[s->cur]);
            s->r.tokens_read = read_before;  // source_accept counts them
            GT_TRY(source_accept(s, t, got, vocab));
            GT_TRY(gt_aead_stream_update(a, out + done, out + done, 2 * got));  // in place
        }
        done += 2 * got;
    }
    return GT_OK;
}

// The chunk file as the second thread hashes and writes it. The file's bytes go out in
// GT_SEAL_PIPE_BYTES pieces at aligned offsets, so they can bypass the page cache (O_DIRECT):
// no copy into the cache and no writeback left for the fsync, which only has to flush the
// device. Where the file system refuses O_DIRECT the same writes go through the cache, with
// writeback started early.
typedef struct {
    int fd;
    const char *path;
    uint64_t off, synced;
    bool direct;
} seal_out;

static gt_err pwrite_all(int fd, const uint8_t *b, size_t n, uint64_t off, const char *path)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        GT_ENSURE(w > 0, GT_E_IO, "%s: write failed: %s", path, strerror(errno));
        b += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return GT_OK;
}

static void seal_out_buffered(seal_out *o)
{
    int fl = fcntl(o->fd, F_GETFL);
    if (fl >= 0) {
        (void)fcntl(o->fd, F_SETFL, fl & ~O_DIRECT);
    }
    o->direct = false;
}

static gt_err seal_write_stage(void *ctx, const uint8_t *p, size_t n)
{
    seal_out *o = ctx;
    size_t direct = o->direct ? n & ~(size_t)(SLOT_SPARE - 1) : 0;  // whole pages
    if (direct > 0) {
        ssize_t w = pwrite(o->fd, p, direct, (off_t)o->off);
        if (w < 0 && errno == EINVAL) {
            seal_out_buffered(o);  // the file system took the flag but not the write
            direct = 0;
        } else {
            GT_ENSURE(w >= 0, GT_E_IO, "%s: write failed: %s", o->path, strerror(errno));
            if ((size_t)w < direct) {
                GT_TRY(pwrite_all(o->fd, p + w, direct - (size_t)w, o->off + (uint64_t)w,
                                  o->path));
            }
        }
    }
    if (n > direct) {
        if (o->direct) {
            seal_out_buffered(o);  // the unaligned tail of the file
        }
        GT_TRY(pwrite_all(o->fd, p + direct, n - direct, o->off + direct, o->path));
    }
    o->off += n;
    if (!o->direct) {
        writeback_start(o->fd, o->off, &o->synced, false);
    }
    return GT_OK;
}

// The chunk's encryption as file bytes: segment after segment (GTCHUNK1: one), each segment's
// ciphertext then its tag.
typedef struct {
    const gt_manifest *m;
    uint32_t index;
    const uint8_t *key;
    uint8_t aad[GT_CHUNK_AAD_BYTES];
    uint64_t nseg, seg, seg_left;  // the segment being written, its plaintext bytes to come
    gt_aead_stream *as;
} seal_segs;

static gt_err seal_segs_begin(seal_segs *g)
{
    const gt_manifest_chunk *c = &g->m->chunks[g->index];
    uint8_t nonce[GT_AEAD_IV_BYTES], sa[GT_CHUNK_SEG_AAD_BYTES];
    size_t sa_len = 0;
    gt_chunk_seg_nonce(nonce, c->iv, g->m->segment_bytes, g->seg);
    gt_chunk_seg_aad(sa, &sa_len, g->aad, g->m->segment_bytes, g->seg, g->nseg);
    g->seg_left = gt_chunk_seg_plain_bytes(c->plaintext_len, g->m->segment_bytes, g->seg);
    return gt_aead_stream_new(&g->as, true, sa, sa_len, nonce, g->key);
}

// Fills b from *fill up to cap file bytes (a segment's tag may run up to 16 past cap, into the
// slot's spare room); *pt_done counts the plaintext consumed. The last segment's tag is the
// manifest entry's.
static gt_err seal_segs_fill(seal_segs *g, shard_source *src, uint8_t *b, size_t *fill,
                             size_t cap, uint64_t *pt_done)
{
    gt_manifest_chunk *c = (gt_manifest_chunk *)&g->m->chunks[g->index];
    while (*fill < cap && g->seg < g->nseg) {
        if (g->as == NULL) {
            GT_TRY(seal_segs_begin(g));
        }
        size_t n = cap - *fill < g->seg_left ? cap - *fill : (size_t)g->seg_left;
        GT_TRY(source_encrypt(src, g->as, b + *fill, n, g->m->vocab_size));
        *fill += n;
        *pt_done += n;
        g->seg_left -= n;
        if (g->seg_left == 0) {
            uint8_t tag[GT_AEAD_TAG_BYTES];
            gt_err e = gt_aead_stream_final(g->as, tag);
            gt_aead_stream_free(g->as);
            g->as = NULL;
            GT_TRY(e);
            memcpy(b + *fill, tag, sizeof tag);
            *fill += sizeof tag;
            if (++g->seg == g->nseg) {
                memcpy(c->tag, tag, sizeof tag);
            }
        }
    }
    return GT_OK;
}

// Writes chunk i (header, then each segment's ciphertext and tag) into dir, hashing the file as
// it goes; fills the manifest entry's IV, tag and hash. Slot k of the ring holds the file's
// bytes [k * GT_SEAL_PIPE_BYTES, (k + 1) * GT_SEAL_PIPE_BYTES): the header (slot 0) or the bytes
// spilled from slot k - 1, then ciphertext and tags up to the slot's end; what a tag pushes past
// it (at most 16 bytes, or the header's 40) spills into the next slot.
static gt_err seal_chunk(gt_manifest *m, uint32_t i, const char *dir, shard_source *src,
                         uint8_t *ring, const gt_holder_keys *keys, bool threaded,
                         gt_progress *prog)
{
    gt_manifest_chunk *c = &m->chunks[i];
    char path[4096];
    GT_TRY(gt_chunk_path(path, sizeof path, dir, i));
    uint8_t key[GT_AEAD_KEY_BYTES] = {0};
    uint8_t hdr[GT_CHUNK_HEADER_BYTES] = {0};
    seal_segs g = {.m = m, .index = i, .key = key,
                   .nseg = gt_chunk_seg_count(c->plaintext_len, m->segment_bytes)};
    gt_hash_ctx *h = NULL;
    gt_err err = GT_OK;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    GT_ENSURE(fd >= 0, GT_E_IO, "%s: cannot create: %s", path, strerror(errno));
    seal_out o = {.fd = fd, .path = path};
    int fl = fcntl(fd, F_GETFL);
    o.direct = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
    GT_TRY_GOTO(err, gt_random_bytes(c->iv, sizeof c->iv), out);
    GT_TRY_GOTO(err, gt_chunk_key_derive(key, keys->dataset_key, m, i), out);
    memcpy(hdr, m->segment_bytes ? GT_CHUNK_V2_MAGIC : GT_CHUNK_MAGIC, 8);
    GT_TRY_GOTO(err, gt_chunk_aad_build(hdr + 8, m, i), out);
    memcpy(g.aad, hdr + 8, sizeof g.aad);
    GT_TRY_GOTO(err, gt_hash_new(&h, GT_HASH_SHA256), out);
    stage st;
    stage_start(&st, ring, 2, (const stage_fn[]){hash_stage, seal_write_stage},
                (void *const[]){h, &o}, threaded);
    const uint8_t *spill = hdr;  // the bytes that start the next slot
    size_t spill_len = sizeof hdr;
    while (g.seg < g.nseg && err.code == GT_E_NONE) {
        // Ctrl-C (a command that installed util's interrupt flag): stop at the next slot; the
        // staging folder is removed on the way out.
        if (gt_interrupted()) {
            err = gt_errf(GT_E_STATE, "stopped by a signal; nothing was sealed");
            break;
        }
        uint8_t *b = stage_next(&st);
        if (b == NULL) {
            break;  // the writing thread failed: stage_finish says why
        }
        memmove(b, spill, spill_len);
        size_t fill = spill_len;
        uint64_t pt_done = 0;
        err = seal_segs_fill(&g, src, b, &fill, GT_SEAL_PIPE_BYTES, &pt_done);
        if (err.code != GT_E_NONE) {
            break;
        }
        // a full slot goes out whole, what ran past its end spills into the next; the last
        // slot goes out as far as it is filled
        bool last = g.seg == g.nseg;
        size_t push = last || fill < GT_SEAL_PIPE_BYTES ? fill : GT_SEAL_PIPE_BYTES;
        stage_push(&st, push);
        spill = b + push;
        spill_len = fill - push;
        gt_progress_add(prog, pt_done);
    }
    if (err.code == GT_E_NONE && spill_len > 0) {
        err = gt_errf(GT_E_STATE, "seal: %zu bytes of chunk %u left unwritten", spill_len, i);
    }
    gt_err wrote = stage_finish(&st);
    if (err.code == GT_E_NONE) {
        err = wrote;
    }
    if (err.code != GT_E_NONE) {
        goto out;
    }
    GT_TRY_GOTO(err, gt_hash_final(h, c->file_sha256), out);
    GT_ENSURE_GOTO(err, fsync(fd) == 0, out, GT_E_IO, "%s: fsync: %s", path, strerror(errno));
out:
    gt_secure_zero(key, sizeof key);
    gt_aead_stream_free(g.as);
    gt_hash_free(h);
    if (close(fd) != 0 && err.code == GT_E_NONE) {
        err = gt_errf(GT_E_IO, "%s: close: %s", path, strerror(errno));
    }
    return err;
}

static void remove_staging(const char *dir, uint32_t chunk_count)
{
    char path[4096];
    for (uint32_t i = 0; i < chunk_count; i++) {
        if (gt_chunk_path(path, sizeof path, dir, i).code == GT_E_NONE) {
            unlink(path);
        }
    }
    if (gt_path_join(path, sizeof path, dir, GT_MANIFEST_FILE).code == GT_E_NONE) {
        unlink(path);
    }
    rmdir(dir);
}

// Opens every shard once to validate it and count tokens before anything is written.
static gt_err count_tokens(const gt_seal_params *p, uint64_t *total)
{
    *total = 0;
    for (size_t i = 0; i < p->shard_count; i++) {
        gt_shard_reader r;
        GT_TRY(gt_shard_reader_open(&r, p->shards[i]));
        *total += r.token_count;
        gt_shard_reader_close(&r);
    }
    GT_ENSURE(*total > 0, GT_E_ARG, "nothing to seal: the input shards hold no tokens");
    GT_ENSURE(*total <= INT32_MAX, GT_E_LIMIT,
              "%llu tokens: a sealed dataset unseals to one llm.c shard, which holds at most %d",
              (unsigned long long)*total, INT32_MAX);
    return GT_OK;
}

// Checks the parameters and the output folder and sizes the job: the chunk size (the default
// when none is given), the input's tokens and the chunks they make.
static gt_err seal_plan(const gt_seal_params *p, uint64_t *chunk_size, uint64_t *total_tokens,
                        uint64_t *chunk_count)
{
    *chunk_size = p->chunk_size ? p->chunk_size : GT_SEAL_DEFAULT_CHUNK_BYTES;
    GT_ENSURE(p->shard_count >= 1, GT_E_ARG, "seal: no input shards");
    GT_ENSURE(*chunk_size >= 2 && *chunk_size % 2 == 0 && *chunk_size <= GT_SEAL_MAX_CHUNK_BYTES,
              GT_E_ARG, "chunk size %llu: must be an even number of bytes, 2 .. %llu",
              (unsigned long long)*chunk_size, (unsigned long long)GT_SEAL_MAX_CHUNK_BYTES);
    GT_ENSURE(p->vocab_size >= 1 && p->vocab_size <= 65536, GT_E_ARG,
              "vocabulary size %u: uint16 tokens allow 1 .. 65536", p->vocab_size);
    GT_ENSURE(p->threads == 0 || p->threads == 1, GT_E_ARG,
              "threads %d: 0 (the pipeline) or 1 (one thread)", p->threads);
    GT_ENSURE(p->format >= 0 && p->format <= 2, GT_E_ARG,
              "chunk format %d: 1 (GTCHUNK1) or 2 (GTCHUNK2, segmented)", p->format);
    GT_ENSURE(p->segment_bytes == 0 || p->format == 2 ||
                  (p->format == 0 && GT_SEAL_DEFAULT_FORMAT == 2),
              GT_E_ARG, "a segment size is for chunk format 2 only");
    GT_TRY(gt_err_wrap(gt_chunk_seg_check(p->segment_bytes), "seal"));
    struct stat st;
    bool out_exists = stat(p->out_dir, &st) == 0;
    GT_ENSURE(!out_exists || (S_ISDIR(st.st_mode) && dir_is_empty(p->out_dir)), GT_E_STATE,
              "%s already exists and is not an empty folder: refusing to overwrite it",
              p->out_dir);
    GT_TRY(count_tokens(p, total_tokens));
    uint64_t total = 2 * *total_tokens;
    *chunk_count = (total + *chunk_size - 1) / *chunk_size;
    GT_ENSURE(*chunk_count <= GT_MANIFEST_MAX_CHUNKS, GT_E_LIMIT,
              "%llu chunks of %llu bytes: at most %u chunks; choose a larger --chunk-size",
              (unsigned long long)*chunk_count, (unsigned long long)*chunk_size,
              GT_MANIFEST_MAX_CHUNKS);
    return GT_OK;
}

static void seal_result_fill(gt_seal_result *result, const gt_manifest *m, uint64_t total,
                             size_t manifest_bytes)
{
    memcpy(result->dataset_id, m->dataset_id, sizeof m->dataset_id);
    result->token_count = m->token_count;
    result->plaintext_bytes = total;
    result->chunk_count = m->chunk_count;
    result->stored_bytes = manifest_bytes;
    for (uint32_t i = 0; i < m->chunk_count; i++) {
        result->stored_bytes += gt_manifest_chunk_file_bytes(m, i);
    }
}

// The manifest's fields that the plan decided (the chunk table and ids come after).
static void manifest_start(gt_manifest *m, const gt_seal_params *p, const gt_holder_keys *keys,
                           uint64_t total_tokens, uint64_t chunk_size, uint64_t chunk_count)
{
    int format = p->format ? p->format : GT_SEAL_DEFAULT_FORMAT;
    m->segment_bytes = format == 2 ? (p->segment_bytes ? p->segment_bytes
                                                       : GT_CHUNK_SEG_DEFAULT_BYTES)
                                   : 0;
    m->version = format == 2 ? GT_MANIFEST_VERSION_SEGMENTED : GT_MANIFEST_VERSION;
    m->suite = GT_SUITE_AES256GCM_HKDF_SHA256;
    m->token_dtype = GT_DTYPE_U16LE;
    m->vocab_size = p->vocab_size;
    m->token_count = total_tokens;
    m->chunk_size = chunk_size;
    m->chunk_count = (uint32_t)chunk_count;
    memcpy(m->holder_pub, keys->holder_pub, sizeof m->holder_pub);
}

gt_err gt_seal(const gt_seal_params *p, const gt_holder_keys *keys, gt_seal_result *result)
{
    memset(result, 0, sizeof *result);
    uint64_t chunk_size = 0, total_tokens = 0, chunk_count = 0;
    GT_TRY(seal_plan(p, &chunk_size, &total_tokens, &chunk_count));
    uint64_t total = 2 * total_tokens;

    gt_manifest m;
    memset(&m, 0, sizeof m);
    char staging[4096];
    uint8_t *buf = NULL;
    gt_buf encoded = {0};
    shard_source src = {.paths = p->shards, .count = p->shard_count};
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    src.map = p->threads != 1;  // the file's bytes are the little-endian tokens sealed
#endif
    gt_progress prog;
    gt_err err = GT_OK;
    bool staged = false;
    size_t out_len = strlen(p->out_dir);
    while (out_len > 1 && p->out_dir[out_len - 1] == '/') {
        out_len--;
    }
    GT_ENSURE(out_len + 16 < sizeof staging, GT_E_LIMIT, "path too long: %s", p->out_dir);
    snprintf(staging, sizeof staging, "%.*s.tmp-XXXXXX", (int)out_len, p->out_dir);

    manifest_start(&m, p, keys, total_tokens, chunk_size, chunk_count);
    m.chunks = calloc(m.chunk_count, sizeof *m.chunks);
    GT_ENSURE_GOTO(err, m.chunks != NULL, out, GT_E_NOMEM, "seal: out of memory");
    GT_TRY_GOTO(err, ring_alloc(&buf), out);
    for (uint32_t i = 0; i < m.chunk_count; i++) {
        m.chunks[i].plaintext_len = i + 1 < m.chunk_count ? chunk_size
                                                          : total - (uint64_t)i * chunk_size;
    }
    GT_TRY_GOTO(err, gt_random_bytes(m.dataset_id, sizeof m.dataset_id), out);
    GT_TRY_GOTO(err, gt_dataset_key_check(m.key_check, keys->dataset_key, m.dataset_id), out);

    GT_ENSURE_GOTO(err, mkdtemp(staging) != NULL, out, GT_E_IO, "%s: cannot create: %s", staging,
                   strerror(errno));
    staged = true;
    GT_ENSURE_GOTO(err, chmod(staging, 0755) == 0, out, GT_E_IO, "%s: chmod: %s", staging,
                   strerror(errno));
    gt_progress_start(&prog, "seal", total, !p->progress);
    for (uint32_t i = 0; i < m.chunk_count && err.code == GT_E_NONE; i++) {
        err = seal_chunk(&m, i, staging, &src, buf, keys, p->threads != 1, &prog);
    }
    gt_progress_finish(&prog);
    if (err.code != GT_E_NONE) {
        goto out;
    }
    GT_TRY_GOTO(err, gt_manifest_encode(&m, keys->holder_sec, &encoded), out);
    char path[4096];
    GT_TRY_GOTO(err, gt_path_join(path, sizeof path, staging, GT_MANIFEST_FILE), out);
    GT_TRY_GOTO(err, gt_file_write_atomic(path, encoded.data, encoded.len, 0644), out);
    GT_TRY_GOTO(err, fsync_path(staging), out);
    GT_ENSURE_GOTO(err, rename(staging, p->out_dir) == 0, out, GT_E_IO, "rename %s to %s: %s",
                   staging, p->out_dir, strerror(errno));
    staged = false;

    seal_result_fill(result, &m, total, encoded.len);
out:
    source_close(&src);
    if (staged) {
        remove_staging(staging, m.chunk_count);
    }
    ring_free(buf);  // held ciphertext, or plaintext on failure
    gt_buf_free_nowipe(&encoded);
    gt_manifest_free(&m);
    return err;
}

// ---- verifying (no key) ---------------------------------------------------------------------

static gt_err verify_chunk(const char *dsdir, const gt_manifest *m, uint32_t i, uint8_t *ring,
                           gt_progress *prog)
{
    char path[4096];
    int fd = -1;
    GT_TRY(chunk_open_checked(dsdir, m, i, &fd, path, sizeof path));
    gt_hash_ctx *h = NULL;
    gt_err err = GT_OK;
    uint8_t hdr[GT_CHUNK_HEADER_BYTES], digest[GT_SHA256_BYTES];
    memcpy(hdr, m->segment_bytes ? GT_CHUNK_V2_MAGIC : GT_CHUNK_MAGIC, 8);
    GT_TRY_GOTO(err, gt_chunk_aad_build(hdr + 8, m, i), out);  // equal to the checked header
    GT_TRY_GOTO(err, gt_hash_new(&h, GT_HASH_SHA256), out);
    GT_TRY_GOTO(err, gt_hash_update(h, hdr, sizeof hdr), out);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    stage st;
    stage_start(&st, ring, 1, (const stage_fn[]){hash_stage}, (void *const[]){h}, true);
    for (uint64_t left = gt_chunk_body_bytes(m->chunks[i].plaintext_len, m->segment_bytes);
         left > 0 && err.code == GT_E_NONE;) {
        size_t n = left < GT_SEAL_PIPE_BYTES ? (size_t)left : GT_SEAL_PIPE_BYTES;
        uint8_t *b = stage_next(&st);
        if (b == NULL) {
            break;
        }
        err = read_exact(fd, b, n, path);
        if (err.code != GT_E_NONE) {
            break;
        }
        stage_push(&st, n);
        gt_progress_add(prog, n);
        left -= n;
    }
    gt_err hashed = stage_finish(&st);
    if (err.code == GT_E_NONE) {
        err = hashed;
    }
    if (err.code != GT_E_NONE) {
        goto out;
    }
    GT_TRY_GOTO(err, gt_hash_final(h, digest), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(digest, m->chunks[i].file_sha256, sizeof digest), out,
                   GT_E_AUTH, "chunk %u is altered: its SHA-256 differs from the signed manifest",
                   i);
out:
    gt_hash_free(h);
    close(fd);
    return err;
}

gt_err gt_dataset_verify(const char *dsdir, const uint8_t *expect_holder, bool progress,
                         gt_manifest *m_out)
{
    gt_manifest m;
    GT_TRY(gt_manifest_load(&m, dsdir));
    gt_err err = GT_OK;
    uint8_t *buf = NULL;
    if (expect_holder != NULL && memcmp(expect_holder, m.holder_pub, sizeof m.holder_pub) != 0) {
        char got[2 * GT_ED25519_PUBLIC_BYTES + 1];
        gt_hex_encode(got, sizeof got, m.holder_pub, sizeof m.holder_pub);
        err = gt_errf(GT_E_AUTH, "manifest is signed by holder %s, not the expected holder", got);
        goto out;
    }
    GT_TRY_GOTO(err, ring_alloc(&buf), out);
    uint64_t total = 0;
    for (uint32_t i = 0; i < m.chunk_count; i++) {
        total += gt_chunk_body_bytes(m.chunks[i].plaintext_len, m.segment_bytes);
    }
    gt_progress prog;
    gt_progress_start(&prog, "verify", total, !progress);
    for (uint32_t i = 0; i < m.chunk_count && err.code == GT_E_NONE; i++) {
        err = verify_chunk(dsdir, &m, i, buf, &prog);
    }
    gt_progress_finish(&prog);
out:
    ring_free(buf);  // ciphertext only
    if (err.code == GT_E_NONE && m_out != NULL) {
        *m_out = m;
    } else {
        gt_manifest_free(&m);
    }
    return err;
}

// ---- unsealing ------------------------------------------------------------------------------

// Decrypts chunk i into the (temporary, unpublished) output file. Plaintext reaches only that
// file until every chunk has verified; the caller removes it on any failure.
// The unsealed shard as the writing thread fills it.
typedef struct {
    gt_atomic_file *f;
    uint64_t written, synced;
} unseal_out;

static gt_err unseal_write_stage(void *ctx, const uint8_t *p, size_t n)
{
    unseal_out *o = ctx;
    GT_TRY(gt_atomic_file_write(o->f, p, n));
    o->written += n;
    writeback_start(fileno(o->f->fp), o->written, &o->synced, false);
    return GT_OK;
}

static gt_err unseal_chunk(const char *dsdir, const gt_manifest *m, uint32_t i,
                           const gt_holder_keys *keys, unseal_out *out, uint8_t *ring,
                           gt_progress *prog)
{
    char path[4096];
    int fd = -1;
    GT_TRY(chunk_open_checked(dsdir, m, i, &fd, path, sizeof path));
    const gt_manifest_chunk *c = &m->chunks[i];
    uint8_t key[GT_AEAD_KEY_BYTES] = {0}, aad[GT_CHUNK_AAD_BYTES] = {0};
    uint8_t tag[GT_AEAD_TAG_BYTES] = {0};
    gt_chunk_stream *s = NULL;
    gt_err err = GT_OK;
    // The (last segment's) tag is in the signed manifest too: a chunk whose tag differs is
    // rejected before any decryption.
    off_t tag_at = (off_t)(gt_manifest_chunk_file_bytes(m, i) - GT_AEAD_TAG_BYTES);
    GT_ENSURE_GOTO(err, pread(fd, tag, sizeof tag, tag_at) == (ssize_t)sizeof tag, out,
                   GT_E_IO, "%s: cannot read the tag: %s", path, strerror(errno));
    GT_ENSURE_GOTO(err, gt_ct_equal(tag, c->tag, sizeof tag), out, GT_E_AUTH,
                   "chunk %u is altered: its tag differs from the signed manifest", i);
    GT_TRY_GOTO(err, gt_chunk_key_derive(key, keys->dataset_key, m, i), out);
    GT_TRY_GOTO(err, gt_chunk_aad_build(aad, m, i), out);
    GT_TRY_GOTO(err, gt_chunk_stream_new(&s, c->plaintext_len, m->segment_bytes, c->iv, aad, key),
                out);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    stage st;
    stage_start(&st, ring, 1, (const stage_fn[]){unseal_write_stage}, (void *const[]){out}, true);
    for (uint64_t left = gt_chunk_body_bytes(c->plaintext_len, m->segment_bytes);
         left > 0 && err.code == GT_E_NONE;) {
        if (gt_interrupted()) {  // as in seal_chunk: the partial output is removed on the way out
            err = gt_errf(GT_E_STATE, "stopped by a signal; nothing was unsealed");
            break;
        }
        size_t n = left < GT_SEAL_PIPE_BYTES ? (size_t)left : GT_SEAL_PIPE_BYTES;
        uint8_t *b = stage_next(&st);
        if (b == NULL) {
            break;
        }
        size_t plain = 0;
        err = read_exact(fd, b, n, path);
        if (err.code == GT_E_NONE) {
            err = gt_chunk_stream_update(s, b, n, b, &plain);  // in place, tags dropped
        }
        if (err.code != GT_E_NONE) {
            break;
        }
        stage_push(&st, plain);
        gt_progress_add(prog, plain);
        left -= n;
    }
    gt_err wrote = stage_finish(&st);
    if (err.code == GT_E_NONE) {
        err = wrote;
    }
    if (err.code == GT_E_NONE) {
        err = gt_chunk_stream_final(s);
    }
    if (err.code == GT_E_AUTH) {  // a segment's tag, in the loop or at the end
        err = gt_errf(GT_E_AUTH, "chunk %u is altered: authentication failed", i);
    }
out:
    gt_secure_zero(key, sizeof key);
    gt_chunk_stream_free(s);
    close(fd);
    return err;
}

gt_err gt_unseal(const char *dsdir, const gt_holder_keys *keys, const char *out_path,
                 bool progress, gt_manifest *m_out)
{
    gt_manifest m;
    GT_TRY(gt_manifest_load(&m, dsdir));
    gt_err err = GT_OK;
    uint8_t *buf = NULL;
    gt_atomic_file f;
    memset(&f, 0, sizeof f);
    bool opened = false;
    uint8_t check[GT_KEY_CHECK_BYTES] = {0};
    GT_TRY_GOTO(err, gt_dataset_key_check(check, keys->dataset_key, m.dataset_id), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(check, m.key_check, sizeof check), out, GT_E_AUTH,
                   "wrong dataset key: this dataset was not sealed with it");
    if (memcmp(m.holder_pub, keys->holder_pub, sizeof m.holder_pub) != 0) {
        gt_log_info("%s was signed by another holder identity than the key folder's; its dataset "
                    "key matches, so unsealing", dsdir);
    }
    GT_TRY_GOTO(err, ring_alloc(&buf), out);
    GT_TRY_GOTO(err, gt_atomic_file_open(&f, out_path, 0600), out);
    opened = true;
    uint8_t hdr[GT_SHARD_HEADER_BYTES];
    gt_shard_header_build(hdr, m.token_count);  // gt_manifest_check bounds it by INT32_MAX
    GT_TRY_GOTO(err, gt_atomic_file_write(&f, hdr, sizeof hdr), out);
    unseal_out uo = {.f = &f, .written = sizeof hdr};
    gt_progress prog;
    gt_progress_start(&prog, "unseal", 2 * m.token_count, !progress);
    for (uint32_t i = 0; i < m.chunk_count && err.code == GT_E_NONE; i++) {
        err = unseal_chunk(dsdir, &m, i, keys, &uo, buf, &prog);
    }
    gt_progress_finish(&prog);
    if (err.code != GT_E_NONE) {
        goto out;
    }
    opened = false;  // commit removes the temporary file itself on failure
    GT_TRY_GOTO(err, gt_atomic_file_commit(&f), out);
out:
    if (opened) {
        gt_atomic_file_abort(&f);
    }
    ring_free(buf);  // plaintext
    if (err.code == GT_E_NONE && m_out != NULL) {
        *m_out = m;
    } else {
        gt_manifest_free(&m);
    }
    return err;
}
