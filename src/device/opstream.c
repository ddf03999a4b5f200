// The op stream (opstream.h): a ring of the last launches (their page spans and a signature) and
// a table from (previous launch, this launch) signatures to where that pair last occurred. Keying
// on the pair rather than the launch alone tells apart two identical launches in different
// places of a step. While each launch is the one that followed the previous last time, the
// stream stays on that track; a launch off the track is a misprediction: the stream looks the
// pair up again (relearning), and predicts nothing when the pair is new.
#include "opstream.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t sig;
    int n;
    gt_page_span s[GT_OP_MAX_REFS];
} launch_rec;

typedef struct {
    uint64_t key;  // 0: empty
    uint64_t at;   // the sequence number of the pair's last occurrence (its second launch)
} pair_slot;

struct gt_opstream {
    launch_rec *ring;
    uint64_t mask;      // ring size - 1
    pair_slot *tab;
    uint64_t tab_mask;  // table size - 1 (twice the ring)
    uint64_t tab_used;
    uint64_t seq;       // launches recorded so far
    uint64_t prev_sig;
    bool tracking;      // cursor is the current launch's last earlier occurrence
    uint64_t cursor;
    uint64_t mispredicts;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t spans_sig(const gt_page_span *s, int n)
{
    uint64_t h = (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h = mix(h, (uint64_t)s[i].lo << 32 | s[i].hi);
    }
    return h;
}

gt_err gt_opstream_new(gt_opstream **out, uint32_t launches)
{
    *out = NULL;
    GT_ENSURE(launches >= 64 && (launches & (launches - 1)) == 0, GT_E_ARG,
              "paging: an op history of %u launches (a power of two, >= 64)", launches);
    gt_opstream *os = calloc(1, sizeof *os);
    GT_ENSURE(os != NULL, GT_E_NOMEM, "paging: out of memory for the op history");
    os->ring = calloc(launches, sizeof *os->ring);
    os->tab = calloc(2 * (size_t)launches, sizeof *os->tab);
    if (os->ring == NULL || os->tab == NULL) {
        gt_opstream_free(os);
        return gt_errf(GT_E_NOMEM, "paging: out of memory for the op history");
    }
    os->mask = launches - 1;
    os->tab_mask = 2 * (uint64_t)launches - 1;
    *out = os;
    return GT_OK;
}

void gt_opstream_free(gt_opstream *os)
{
    if (os != NULL) {
        free(os->ring);
        free(os->tab);
        free(os);
    }
}

void gt_opstream_reset(gt_opstream *os)
{
    memset(os->tab, 0, (os->tab_mask + 1) * sizeof *os->tab);
    os->tab_used = os->seq = os->prev_sig = os->cursor = 0;
    os->tracking = false;
}

static pair_slot *slot_for(gt_opstream *os, uint64_t key)
{
    for (uint64_t i = key & os->tab_mask;; i = (i + 1) & os->tab_mask) {
        if (os->tab[i].key == key || os->tab[i].key == 0) {
            return &os->tab[i];
        }
    }
}

bool gt_opstream_launch(gt_opstream *os, const gt_page_span *spans, int n)
{
    uint64_t sig = spans_sig(spans, n), key = mix(os->prev_sig, sig) | 1;
    bool hit = os->tracking && os->cursor + 1 < os->seq &&
               os->ring[(os->cursor + 1) & os->mask].sig == sig;
    if (hit) {
        os->cursor++;
    } else {
        os->mispredicts += os->tracking;
        pair_slot *sl = slot_for(os, key);
        // A pair seen within the ring's reach: predict from there (the ring still holds what
        // followed it); else nothing is predicted until the stream repeats.
        os->tracking = sl->key == key && os->seq - sl->at <= os->mask;
        os->cursor = sl->at;
    }
    if (os->tab_used >= os->mask + 1) {  // half full: more distinct pairs than a step has
        memset(os->tab, 0, (os->tab_mask + 1) * sizeof *os->tab);
        os->tab_used = 0;
    }
    pair_slot *sl = slot_for(os, key);
    os->tab_used += sl->key == 0;
    *sl = (pair_slot){.key = key, .at = os->seq};
    launch_rec *r = &os->ring[os->seq & os->mask];
    r->sig = sig;
    r->n = n;
    memcpy(r->s, spans, (size_t)n * sizeof *spans);
    os->prev_sig = sig;
    os->seq++;
    return hit;
}

int gt_opstream_ahead(const gt_opstream *os, uint32_t k, const gt_page_span **spans)
{
    // The ring holds seq - mask - 1 .. seq - 1; the current launch is seq - 1.
    uint64_t at = os->cursor + k;
    if (!os->tracking || k == 0 || at >= os->seq || os->seq - at > os->mask) {
        return -1;
    }
    const launch_rec *r = &os->ring[at & os->mask];
    *spans = r->s;
    return r->n;
}

uint64_t gt_opstream_mispredicts(const gt_opstream *os) { return os->mispredicts; }
