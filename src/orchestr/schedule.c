// Trip planning and per-holder token accounting.
#include <gputravel/orchestr.h>

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t chunk_count;
    uint64_t *chunk_tokens;
    uint32_t *uses;
    bool *skipped;  // failed in this run (gt_schedule_skip): not offered again by it
    bool *held;     // taken by another rank in this round (gt_schedule_hold)
    uint64_t held_tokens;  // their tokens: the budget left to the round's other picks is less
    bool excluded;  // the holder failed in this run (gt_schedule_exclude)
    uint64_t tokens_used;
    uint64_t token_budget;
    uint32_t max_uses;
} holder_state;

struct gt_schedule {
    uint32_t holder_count;
    uint32_t next_holder;  // round-robin cursor: the holder after the last one offered or recorded
    holder_state *holders;
};

void gt_schedule_free(gt_schedule *s)
{
    if (s == NULL) {
        return;
    }
    for (uint32_t h = 0; h < s->holder_count; h++) {
        free(s->holders[h].chunk_tokens);
        free(s->holders[h].uses);
        free(s->holders[h].skipped);
        free(s->holders[h].held);
    }
    free(s->holders);
    free(s);
}

gt_err gt_schedule_create(gt_schedule **out, const gt_agreement *a, const uint32_t *chunk_counts,
                          const uint64_t *const *chunk_tokens)
{
    *out = NULL;
    gt_schedule *s = calloc(1, sizeof *s);
    GT_ENSURE(s != NULL, GT_E_NOMEM, "schedule: out of memory");
    gt_err err = GT_OK;
    s->holders = calloc(a->holder_count ? a->holder_count : 1, sizeof *s->holders);
    GT_ENSURE_GOTO(err, s->holders != NULL, fail, GT_E_NOMEM, "schedule: out of memory");
    s->holder_count = a->holder_count;
    for (uint32_t h = 0; h < a->holder_count; h++) {
        holder_state *hs = &s->holders[h];
        uint32_t n = chunk_counts[h];
        hs->chunk_count = n;
        hs->token_budget = a->holders[h].token_budget;
        hs->max_uses = a->holders[h].max_uses_per_chunk;
        hs->chunk_tokens = calloc(n ? n : 1, sizeof *hs->chunk_tokens);
        hs->uses = calloc(n ? n : 1, sizeof *hs->uses);
        hs->skipped = calloc(n ? n : 1, sizeof *hs->skipped);
        hs->held = calloc(n ? n : 1, sizeof *hs->held);
        GT_ENSURE_GOTO(err, hs->chunk_tokens != NULL && hs->uses != NULL && hs->skipped != NULL &&
                                hs->held != NULL,
                       fail, GT_E_NOMEM,
                       "schedule: out of memory");
        if (n > 0) {
            memcpy(hs->chunk_tokens, chunk_tokens[h], n * sizeof *hs->chunk_tokens);
        }
    }
    *out = s;
    return GT_OK;
fail:
    gt_schedule_free(s);
    return err;
}

// The least-used offerable chunk of holder h, or UINT32_MAX. A holder's budget is a hard cap on
// the tokens it releases (a chunk that would cross it is refused whole), so only chunks that
// fit in what is left are offered.
static uint32_t pick_chunk(const holder_state *hs)
{
    if (hs->excluded || hs->tokens_used >= hs->token_budget) {
        return UINT32_MAX;
    }
    if (hs->tokens_used + hs->held_tokens >= hs->token_budget) {
        return UINT32_MAX;
    }
    uint64_t left = hs->token_budget - hs->tokens_used - hs->held_tokens;
    uint32_t best = UINT32_MAX;
    for (uint32_t c = 0; c < hs->chunk_count; c++) {
        if (hs->uses[c] < hs->max_uses && hs->chunk_tokens[c] > 0 && !hs->skipped[c] &&
            !hs->held[c] && hs->chunk_tokens[c] <= left &&
            (best == UINT32_MAX || hs->uses[c] < hs->uses[best])) {
            best = c;
        }
    }
    return best;
}

gt_err gt_schedule_next(gt_schedule *s, uint32_t *holder, uint32_t *chunk,
                        uint64_t *tokens_allowed)
{
    for (uint32_t i = 0; i < s->holder_count; i++) {
        uint32_t h = (s->next_holder + i) % s->holder_count;
        holder_state *hs = &s->holders[h];
        uint32_t c = pick_chunk(hs);
        if (c == UINT32_MAX) {
            continue;
        }
        *holder = h;
        *chunk = c;
        *tokens_allowed = hs->chunk_tokens[c];  // it fits: pick_chunk
        s->next_holder = (h + 1) % s->holder_count;
        return GT_OK;
    }
    return gt_errf(GT_E_NOTFOUND, "schedule: every chunk is used up, or what is left of its "
                                  "holder's budget is smaller than it");
}

gt_err gt_schedule_record(gt_schedule *s, uint32_t holder, uint32_t chunk, uint64_t tokens)
{
    GT_ENSURE(holder < s->holder_count, GT_E_ARG, "schedule: holder %u out of range", holder);
    holder_state *hs = &s->holders[holder];
    GT_ENSURE(chunk < hs->chunk_count, GT_E_ARG, "schedule: holder %u has no chunk %u", holder,
              chunk);
    GT_ENSURE(hs->uses[chunk] < hs->max_uses, GT_E_POLICY,
              "holder %u chunk %u: already used %u time(s), the agreement allows %u", holder,
              chunk, hs->uses[chunk], hs->max_uses);
    GT_ENSURE(tokens <= hs->chunk_tokens[chunk], GT_E_POLICY,
              "holder %u chunk %u: %llu tokens trained but the chunk has %llu", holder, chunk,
              (unsigned long long)tokens, (unsigned long long)hs->chunk_tokens[chunk]);
    GT_ENSURE(tokens <= hs->token_budget - hs->tokens_used, GT_E_POLICY,
              "holder %u: %llu more tokens would exceed its budget (%llu of %llu used)", holder,
              (unsigned long long)tokens, (unsigned long long)hs->tokens_used,
              (unsigned long long)hs->token_budget);
    hs->uses[chunk]++;
    hs->tokens_used += tokens;
    // The turn passes on from the holder whose use this is: the same as after the
    // gt_schedule_next that offered it, and what a journal replay needs to leave the cursor
    // where an uninterrupted run had it.
    s->next_holder = (holder + 1) % s->holder_count;
    return GT_OK;
}

void gt_schedule_account(const gt_schedule *s, uint32_t holder, gt_holder_account *out)
{
    memset(out, 0, sizeof *out);
    if (holder >= s->holder_count) {
        return;
    }
    const holder_state *hs = &s->holders[holder];
    out->tokens_used = hs->tokens_used;
    out->token_budget = hs->token_budget;
    out->chunks = hs->chunk_count;
    for (uint32_t c = 0; c < hs->chunk_count; c++) {
        out->uses += hs->uses[c];
    }
}

uint32_t gt_schedule_uses(const gt_schedule *s, uint32_t holder, uint32_t chunk)
{
    if (holder >= s->holder_count || chunk >= s->holders[holder].chunk_count) {
        return 0;
    }
    return s->holders[holder].uses[chunk];
}


void gt_schedule_skip(gt_schedule *s, uint32_t holder, uint32_t chunk)
{
    if (holder < s->holder_count && chunk < s->holders[holder].chunk_count) {
        s->holders[holder].skipped[chunk] = true;
    }
}

void gt_schedule_exclude(gt_schedule *s, uint32_t holder)
{
    if (holder < s->holder_count) {
        s->holders[holder].excluded = true;
    }
}

void gt_schedule_hold(gt_schedule *s, uint32_t holder, uint32_t chunk)
{
    if (holder < s->holder_count && chunk < s->holders[holder].chunk_count) {
        holder_state *hs = &s->holders[holder];
        hs->held_tokens += hs->held[chunk] ? 0 : hs->chunk_tokens[chunk];
        hs->held[chunk] = true;
    }
}

void gt_schedule_unhold(gt_schedule *s)
{
    for (uint32_t h = 0; h < s->holder_count; h++) {
        memset(s->holders[h].held, 0, s->holders[h].chunk_count * sizeof *s->holders[h].held);
        s->holders[h].held_tokens = 0;
    }
}

gt_schedule_left gt_schedule_why_none(const gt_schedule *s, uint32_t holder)
{
    if (holder >= s->holder_count) {
        return GT_SCHEDULE_LEFT_USES;
    }
    const holder_state *hs = &s->holders[holder];
    // Which limit holds the unused chunks back, in the order a reader asks: are there any, did
    // this run fail on them, do they fit the budget.
    bool unused = false, unskipped = false;
    for (uint32_t c = 0; c < hs->chunk_count; c++) {
        if (hs->uses[c] < hs->max_uses && hs->chunk_tokens[c] > 0) {
            unused = true;
            unskipped = unskipped || !hs->skipped[c];
        }
    }
    if (!unused) {
        return GT_SCHEDULE_LEFT_USES;
    }
    if (hs->excluded || !unskipped) {
        return GT_SCHEDULE_LEFT_FAILED;
    }
    return pick_chunk(hs) == UINT32_MAX ? GT_SCHEDULE_LEFT_BUDGET : GT_SCHEDULE_LEFT_OPEN;
}
