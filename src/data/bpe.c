// GPT-2 byte-level BPE, as tiktoken's `gpt2` encoding (encode_ordinary): the GPT-2 pattern cuts
// the text into pieces (PCRE2, UTF mode), then each piece's bytes are merged pair by pair, the
// pair whose concatenation has the lowest rank first (leftmost on ties). For GPT-2 a token's
// rank is its id, so the llm.c tokenizer file (token bytes in id order) is the whole model.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gputravel/data.h>

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

// The GPT-2 pattern with \s spelled out as Unicode White_Space, the \s of tiktoken's Rust regex
// (PCRE2's \s leaves out U+0085; JavaScript's adds U+FEFF and leaves out U+0085).
#define WS "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
           "\\x{202F}\\x{205F}\\x{3000}"
static const char gpt2_pattern[] = "'(?:s|t|re|ve|m|ll|d)| ?\\p{L}+| ?\\p{N}+| ?[^" WS
                                   "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

// A match that ends this close to the end of the text given may still change when more text
// follows: an alternative may have failed for want of up to 3 more characters (`'ll`), or a run
// may continue. 3 characters of at most 4 bytes, plus one of lookahead, fit in 16.
enum { BPE_HOLD_BACK = 16 };
// Pieces up to this many bytes merge by scanning all pairs (tiktoken's way, fastest when short);
// longer ones through a heap, so that a long run stays O(n log n) instead of O(n^2).
enum { BPE_SCAN_MAX = 64 };
// Piece cache: pieces up to CACHE_KEY_MAX bytes; cleared when full, so its memory is fixed.
enum { CACHE_SLOTS = 1 << 16, CACHE_KEY_MAX = 48, CACHE_ARENA = 4 << 20 };

#define NO_RANK UINT32_MAX

struct gt_bpe {
    uint32_t vocab;
    const uint8_t *bytes;    // token i is bytes[off[i] .. off[i+1]) (copied from the tokenizer)
    uint32_t *off;
    uint8_t *bytes_owned;
    uint32_t *map;           // open addressing: token id + 1, 0 = empty
    size_t map_mask;
    pcre2_code *re;
    pcre2_match_data *md;
    // cache: slot -> arena offset + 1; entry = key length, token count, key, tokens (u32)
    uint32_t *cache_slot;
    uint32_t *cache_hash;
    uint8_t *cache_arena;
    size_t cache_used;
    size_t cache_count;
    // merge scratch, grown to the longest piece seen
    uint32_t *start, *rank, *next, *prev;
    uint64_t *heap;
    size_t scratch_cap;
    uint64_t invalid_bytes;
};

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a: keys are short, this is enough
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

static uint32_t rank_of(const gt_bpe *b, const uint8_t *p, size_t n)
{
    size_t i = (size_t)hash_bytes(p, n) & b->map_mask;
    for (;;) {
        uint32_t id1 = b->map[i];
        if (id1 == 0) {
            return NO_RANK;
        }
        uint32_t id = id1 - 1;
        if (b->off[id + 1] - b->off[id] == n && memcmp(b->bytes + b->off[id], p, n) == 0) {
            return id;
        }
        i = (i + 1) & b->map_mask;
    }
}

void gt_bpe_free(gt_bpe *b)
{
    if (b == NULL) {
        return;
    }
    pcre2_match_data_free(b->md);
    pcre2_code_free(b->re);
    free(b->bytes_owned);
    free(b->off);
    free(b->map);
    free(b->cache_slot);
    free(b->cache_hash);
    free(b->cache_arena);
    free(b->start);
    free(b->rank);
    free(b->next);
    free(b->prev);
    free(b->heap);
    free(b);
}

// Copies t's token bytes and fills the rank map; the end-of-text token is special, not a rank.
static gt_err bpe_build_map(gt_bpe *b, const gt_tokenizer *t)
{
    uint32_t v = gt_tokenizer_vocab_size(t);
    int32_t eot = gt_tokenizer_eot(t);
    size_t total = 0;
    for (uint32_t i = 0; i < v; i++) {
        gt_span s = {0};
        GT_TRY(gt_tokenizer_decode(t, i, &s));
        total += s.len;
    }
    size_t slots = 1;
    while (slots < (size_t)v * 2) {
        slots <<= 1;
    }
    b->vocab = v;
    b->bytes_owned = malloc(total ? total : 1);
    b->off = calloc((size_t)v + 1, sizeof *b->off);
    b->map = calloc(slots, sizeof *b->map);
    GT_ENSURE(b->bytes_owned && b->off && b->map, GT_E_NOMEM, "bpe: out of memory");
    b->bytes = b->bytes_owned;
    b->map_mask = slots - 1;
    uint32_t at = 0;
    for (uint32_t i = 0; i < v; i++) {
        gt_span s = {0};
        GT_TRY(gt_tokenizer_decode(t, i, &s));
        memcpy(b->bytes_owned + at, s.data, s.len);
        b->off[i] = at;
        at += (uint32_t)s.len;
        b->off[i + 1] = at;
        if ((int32_t)i == eot || rank_of(b, s.data, s.len) != NO_RANK) {
            continue;  // a repeated byte string keeps its lowest id
        }
        size_t h = (size_t)hash_bytes(s.data, s.len) & b->map_mask;
        while (b->map[h] != 0) {
            h = (h + 1) & b->map_mask;
        }
        b->map[h] = i + 1;
    }
    for (unsigned c = 0; c < 256; c++) {
        uint8_t byte = (uint8_t)c;
        GT_ENSURE(rank_of(b, &byte, 1) != NO_RANK, GT_E_FORMAT,
                  "bpe: the tokenizer has no token for byte 0x%02x, so it is not a byte-level BPE "
                  "vocabulary (GPT-2's gpt2_tokenizer.bin has all 256)",
                  c);
    }
    return GT_OK;
}

static gt_err bpe_compile(gt_bpe *b)
{
    int code = 0;
    PCRE2_SIZE at = 0;
    b->re = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
    if (b->re == NULL) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(code, msg, sizeof msg);
        return gt_errf(GT_E_UNSUPPORTED, "bpe: pattern at %zu: %s", (size_t)at, (const char *)msg);
    }
    // JIT is an optimisation: without it (an architecture PCRE2 has no JIT for) the
    // interpreter gives the same matches.
    (void)pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE);
    b->md = pcre2_match_data_create_from_pattern(b->re, NULL);
    GT_ENSURE(b->md != NULL, GT_E_NOMEM, "bpe: out of memory");
    return GT_OK;
}

gt_err gt_bpe_new(gt_bpe **out, const gt_tokenizer *t)
{
    *out = NULL;
    gt_bpe *b = calloc(1, sizeof *b);
    GT_ENSURE(b != NULL, GT_E_NOMEM, "bpe: out of memory");
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, bpe_build_map(b, t), fail);
    GT_TRY_GOTO(err, bpe_compile(b), fail);
    b->cache_slot = calloc(CACHE_SLOTS, sizeof *b->cache_slot);
    b->cache_hash = calloc(CACHE_SLOTS, sizeof *b->cache_hash);
    b->cache_arena = malloc(CACHE_ARENA);
    GT_ENSURE_GOTO(err, b->cache_slot && b->cache_hash && b->cache_arena, fail, GT_E_NOMEM,
                   "bpe: out of memory");
    *out = b;
    return GT_OK;
fail:
    gt_bpe_free(b);
    return err;
}

uint64_t gt_bpe_invalid_utf8_bytes(const gt_bpe *b) { return b->invalid_bytes; }

void gt_token_buf_free(gt_token_buf *tb)
{
    free(tb->data);
    *tb = (gt_token_buf){0};
}

gt_err gt_token_buf_push(gt_token_buf *tb, uint32_t token)
{
    if (tb->len == tb->cap) {
        size_t cap = tb->cap ? tb->cap * 2 : 1024;
        uint32_t *d = realloc(tb->data, cap * sizeof *d);
        GT_ENSURE(d != NULL, GT_E_NOMEM, "tokens: out of memory for %zu tokens", cap);
        tb->data = d;
        tb->cap = cap;
    }
    tb->data[tb->len++] = token;
    return GT_OK;
}

static gt_err scratch_reserve(gt_bpe *b, size_t n)
{
    if (n + 1 <= b->scratch_cap) {
        return GT_OK;
    }
    size_t cap = b->scratch_cap ? b->scratch_cap : 256;
    while (cap < n + 1) {
        cap *= 2;
    }
    uint32_t *s = realloc(b->start, cap * sizeof *s);
    b->start = s ? s : b->start;
    uint32_t *r = realloc(b->rank, cap * sizeof *r);
    b->rank = r ? r : b->rank;
    uint32_t *nx = realloc(b->next, cap * sizeof *nx);
    b->next = nx ? nx : b->next;
    uint32_t *pv = realloc(b->prev, cap * sizeof *pv);
    b->prev = pv ? pv : b->prev;
    uint64_t *h = realloc(b->heap, 3 * cap * sizeof *h);  // each merge pushes at most 2
    b->heap = h ? h : b->heap;
    GT_ENSURE(s && r && nx && pv && h, GT_E_NOMEM, "bpe: out of memory for a %zu-byte piece", n);
    b->scratch_cap = cap;
    return GT_OK;
}

// Rank of the pair of parts starting at start[i] and ending at start[i+2].
static uint32_t pair_rank(const gt_bpe *b, const uint8_t *p, const uint32_t *start, size_t i,
                          size_t parts)
{
    if (i + 2 > parts) {
        return NO_RANK;
    }
    return rank_of(b, p + start[i], start[i + 2] - start[i]);
}

// tiktoken's merge: parts are start[0..parts) with start[parts] = n; each pass merges the
// lowest-ranked adjacent pair (the first one on ties).
static gt_err merge_scan(gt_bpe *b, const uint8_t *p, size_t n, gt_token_buf *out)
{
    uint32_t *start = b->start, *rank = b->rank;
    size_t parts = n;
    for (size_t i = 0; i <= n; i++) {
        start[i] = (uint32_t)i;
    }
    for (size_t i = 0; i + 1 < parts; i++) {
        rank[i] = pair_rank(b, p, start, i, parts);
    }
    while (parts > 1) {
        uint32_t best = NO_RANK;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts; i++) {
            if (rank[i] < best) {
                best = rank[i];
                at = i;
            }
        }
        if (best == NO_RANK) {
            break;
        }
        memmove(start + at + 1, start + at + 2, (parts - at - 1) * sizeof *start);
        memmove(rank + at + 1, rank + at + 2, (parts > at + 3 ? parts - at - 3 : 0) * sizeof *rank);
        parts--;
        rank[at] = pair_rank(b, p, start, at, parts);
        if (at > 0) {
            rank[at - 1] = pair_rank(b, p, start, at - 1, parts);
        }
    }
    for (size_t i = 0; i < parts; i++) {
        GT_TRY(gt_token_buf_push(out, rank_of(b, p + start[i], start[i + 1] - start[i])));
    }
    return GT_OK;
}

// Heap entries order by (rank, start of the left part): the same choice as merge_scan. An entry
// is stale when its left part has grown or died since; the pair's end tells.
static inline uint64_t heap_key(uint32_t rank, uint32_t pos) { return (uint64_t)rank << 32 | pos; }

static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) {
            break;
        }
        if (c + 1 < *n && h[c + 1] < h[c]) {
            c++;
        }
        if (h[c] >= v) {
            break;
        }
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) {
        h[i] = v;
    }
    return top;
}

// Parts form a list over byte positions: next[s] is the start of the part after the one at s
// (n at the end), prev[s] the one before; rank[s] is the rank of the pair starting at s when
// pushed. A dead part has next[s] == 0.
static gt_err merge_heap(gt_bpe *b, const uint8_t *p, size_t n, gt_token_buf *out)
{
    uint32_t *next = b->next, *prev = b->prev, *rank = b->rank;
    uint64_t *h = b->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = i > 0 ? (uint32_t)(i - 1) : UINT32_MAX;
        rank[i] = i + 1 < n ? rank_of(b, p + i, 2) : NO_RANK;
        if (rank[i] != NO_RANK) {
            heap_push(h, &hn, heap_key(rank[i], (uint32_t)i));
        }
    }
    while (hn > 0) {
        uint64_t top = heap_pop(h, &hn);
        uint32_t s = (uint32_t)top, r = (uint32_t)(top >> 32);
        if (next[s] == 0 || rank[s] != r || next[s] >= n) {
            continue;  // stale: part gone, or its pair changed since the push
        }
        uint32_t mid = next[s], end = next[mid];
        if (rank_of(b, p + s, end - s) != r) {
            continue;
        }
        next[s] = end;  // merge the part at mid into the one at s
        next[mid] = 0;
        if (end < n) {
            prev[end] = s;
        }
        rank[s] = end < n ? rank_of(b, p + s, next[end] - s) : NO_RANK;
        if (rank[s] != NO_RANK) {
            heap_push(h, &hn, heap_key(rank[s], s));
        }
        uint32_t before = prev[s];
        if (before != UINT32_MAX) {
            rank[before] = rank_of(b, p + before, end - before);
            if (rank[before] != NO_RANK) {
                heap_push(h, &hn, heap_key(rank[before], before));
            }
        }
    }
    for (uint32_t s = 0; s < n; s = next[s]) {
        GT_TRY(gt_token_buf_push(out, rank_of(b, p + s, next[s] - s)));
    }
    return GT_OK;
}

static bool cache_get(gt_bpe *b, const uint8_t *p, size_t n, uint32_t hash, gt_token_buf *out,
                      gt_err *err)
{
    for (size_t i = hash & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        uint32_t at1 = b->cache_slot[i];
        if (at1 == 0) {
            return false;
        }
        const uint8_t *e = b->cache_arena + at1 - 1;
        if (b->cache_hash[i] != hash || e[0] != n || memcmp(e + 2, p, n) != 0) {
            continue;
        }
        for (size_t k = 0; k < e[1]; k++) {
            uint32_t tok = 0;
            memcpy(&tok, e + 2 + n + 4 * k, 4);
            *err = gt_token_buf_push(out, tok);
            if (!gt_is_ok(*err)) {
                return true;
            }
        }
        return true;
    }
}

static void cache_put(gt_bpe *b, const uint8_t *p, size_t n, uint32_t hash, const uint32_t *tok,
                      size_t ntok)
{
    size_t need = 2 + n + 4 * ntok;
    if (b->cache_count >= CACHE_SLOTS / 2 || b->cache_used + need > CACHE_ARENA) {
        memset(b->cache_slot, 0, CACHE_SLOTS * sizeof *b->cache_slot);
        b->cache_used = 0;
        b->cache_count = 0;
    }
    uint8_t *e = b->cache_arena + b->cache_used;
    e[0] = (uint8_t)n;
    e[1] = (uint8_t)ntok;
    memcpy(e + 2, p, n);
    memcpy(e + 2 + n, tok, 4 * ntok);
    size_t i = hash & (CACHE_SLOTS - 1);
    while (b->cache_slot[i] != 0) {
        i = (i + 1) & (CACHE_SLOTS - 1);
    }
    b->cache_slot[i] = (uint32_t)(b->cache_used + 1);
    b->cache_hash[i] = hash;
    b->cache_used += need;
    b->cache_count++;
}

gt_err gt_bpe_encode_piece(gt_bpe *b, const uint8_t *p, size_t n, gt_token_buf *out)
{
    if (n == 0) {
        return GT_OK;
    }
    uint32_t whole = rank_of(b, p, n);
    if (whole != NO_RANK) {
        return gt_token_buf_push(out, whole);
    }
    uint32_t hash = 0;
    if (n <= CACHE_KEY_MAX) {
        hash = (uint32_t)hash_bytes(p, n);
        gt_err err = GT_OK;
        if (cache_get(b, p, n, hash, out, &err)) {
            return err;
        }
    }
    GT_TRY(scratch_reserve(b, n));
    size_t before = out->len;
    GT_TRY(n <= BPE_SCAN_MAX ? merge_scan(b, p, n, out) : merge_heap(b, p, n, out));
    if (n <= CACHE_KEY_MAX) {
        cache_put(b, p, n, hash, out->data + before, out->len - before);
    }
    return GT_OK;
}

gt_err gt_bpe_encode(gt_bpe *b, const uint8_t *text, size_t len, bool final, gt_token_buf *out,
                     size_t *used)
{
    size_t pos = 0;
    gt_err err = GT_OK;
    while (pos < len) {
        int rc = pcre2_match(b->re, text, len, pos, 0, b->md, NULL);
        size_t ms = len, me = len;
        if (rc >= 0) {
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(b->md);
            ms = ov[0];
            me = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(rc, msg, sizeof msg);
            err = gt_errf(GT_E_UNSUPPORTED, "bpe: match at byte %zu: %s", pos, (const char *)msg);
            break;
        }
        // The pattern matches every valid character, so a gap is bytes that are not UTF-8
        // (tiktoken takes only text): they are one piece of their own, bytes kept as they are.
        // An incomplete character at the end may be completed by the next text.
        if (ms > pos) {
            if (!final && ms + BPE_HOLD_BACK > len) {
                break;
            }
            b->invalid_bytes += ms - pos;
            GT_TRY(gt_bpe_encode_piece(b, text + pos, ms - pos, out));
            pos = ms;
        }
        if (rc < 0 || (!final && me + BPE_HOLD_BACK > len)) {
            break;
        }
        GT_TRY(gt_bpe_encode_piece(b, text + ms, me - ms, out));
        pos = me;
    }
    *used = pos;
    return err;
}
