// The device buffer table (device.h "the buffer table"): handles, sizes, flags, owners and the
// memory limit for every backend and devd, with the checks that give every backend the same
// error codes. It never touches buffer memory: the backends own that.
#include <gputravel/device.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A slot holds one entry at a time; gen counts the entries it has held, so a handle names one
// (slot, generation) pair and a freed one never resolves again.
typedef struct {
    gt_buftab_entry e;
    uint32_t gen;  // 0: never used
    bool live;
} slot;

// Slots that can ever exist: a handle keeps slot + 1 in its low 32 bits.
#define BUFTAB_MAX_SLOTS 0xfffffff0u

// A label source: a dataset id and how many live buffers carry its bit (0: the bit is free).
typedef struct {
    uint8_t id[GT_LABEL_ID_BYTES];
    size_t carriers;
} label_source;

struct gt_buftab {
    label_source sources[GT_LABEL_MAX_SOURCES];
    slot *slots;
    size_t nslots, cap;
    uint32_t *free_slots;  // a stack of released, reusable slots
    size_t nfree;
    size_t live;
    uint64_t used;
    uint64_t limit;
    uint32_t max_buffers;
    const char *hint;
};

gt_err gt_buftab_new(gt_buftab **tab, const gt_buftab_config *cfg)
{
    *tab = NULL;
    gt_buftab *t = calloc(1, sizeof *t);
    GT_ENSURE(t != NULL, GT_E_NOMEM, "device: out of memory for the buffer table");
    t->limit = cfg->mem_limit == 0 || cfg->mem_limit > GT_BUFTAB_MAX_BYTES ? GT_BUFTAB_MAX_BYTES
                                                                           : cfg->mem_limit;
    t->max_buffers = cfg->max_buffers ? cfg->max_buffers : GT_BUFTAB_MAX_BUFFERS;
    t->hint = cfg->limit_hint ? cfg->limit_hint : "mem_limit";
    *tab = t;
    return GT_OK;
}

void gt_buftab_free(gt_buftab *tab)
{
    if (tab == NULL) {
        return;
    }
    free(tab->slots);  // sizes, flags, locations: nothing secret
    free(tab->free_slots);
    free(tab);
}

// A slot for a new entry: a released one if any, else a fresh one at the end.
static gt_err slot_take(gt_buftab *t, size_t *out)
{
    if (t->nfree > 0) {
        *out = t->free_slots[--t->nfree];
        return GT_OK;
    }
    GT_ENSURE(t->nslots < BUFTAB_MAX_SLOTS, GT_E_LIMIT, "device: no buffer slots left");
    if (t->nslots == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        slot *ns = realloc(t->slots, cap * sizeof *ns);
        GT_ENSURE(ns != NULL, GT_E_NOMEM, "device: out of memory for the buffer table");
        t->slots = ns;
        // The free stack never holds more than every slot; grown with them, so release never
        // has to allocate.
        uint32_t *nf = realloc(t->free_slots, cap * sizeof *nf);
        GT_ENSURE(nf != NULL, GT_E_NOMEM, "device: out of memory for the buffer table");
        t->free_slots = nf;
        memset(ns + t->cap, 0, (cap - t->cap) * sizeof *ns);
        t->cap = cap;
    }
    *out = t->nslots++;
    return GT_OK;
}

static gt_err entry_new(gt_buftab *t, uint64_t bytes, uint32_t flags, uint64_t owner,
                        bool foreign, gt_dbuf *h, gt_buftab_entry **e)
{
    *h = 0;
    *e = NULL;
    GT_ENSURE(bytes > 0, GT_E_ARG, "device: alloc of 0 bytes");
    GT_ENSURE((flags & ~(uint32_t)GT_DBUF_NO_READBACK) == 0, GT_E_ARG,
              "device: unknown buffer flags 0x%x", flags);
    char want[32], used[32], limit[32];
    gt_format_size(want, sizeof want, bytes);
    gt_format_size(used, sizeof used, t->used);
    gt_format_size(limit, sizeof limit, t->limit);
    if (!foreign) {
        GT_ENSURE(bytes <= t->limit, GT_E_LIMIT,
                  "device memory: cannot allocate %s: larger than the device (%s, %s)", want,
                  limit, t->hint);
    }
    // Below the limit (at most 2^46) the rounding cannot wrap; a foreign size is checked by
    // its importer, but the rounding must not wrap for it either.
    GT_ENSURE(bytes <= UINT64_MAX - GT_BUFTAB_ALIGN, GT_E_ARG, "device: buffer of %s", want);
    uint64_t span = (bytes + GT_BUFTAB_ALIGN - 1) & ~(uint64_t)(GT_BUFTAB_ALIGN - 1);
    if (!foreign) {
        GT_ENSURE(span <= t->limit - t->used, GT_E_LIMIT,
                  "device memory exhausted: cannot allocate %s, %s of %s in use (raise %s)", want,
                  used, limit, t->hint);
    }
    GT_ENSURE(t->live < t->max_buffers, GT_E_LIMIT, "device: %u buffers already allocated",
              t->max_buffers);
    size_t s = 0;
    GT_TRY(slot_take(t, &s));
    slot *sl = &t->slots[s];
    sl->e = (gt_buftab_entry){.bytes = bytes, .span = span, .flags = flags, .foreign = foreign,
                              .owner = owner};
    sl->gen++;
    sl->live = true;
    t->live++;
    if (!foreign) {
        t->used += span;
    }
    *h = ((uint64_t)sl->gen << 32) | (uint64_t)(s + 1);
    *e = &sl->e;
    return GT_OK;
}

gt_err gt_buftab_alloc(gt_buftab *tab, uint64_t bytes, uint32_t flags, uint64_t owner,
                       gt_dbuf *h, gt_buftab_entry **e)
{
    return entry_new(tab, bytes, flags, owner, false, h, e);
}

gt_err gt_buftab_import(gt_buftab *tab, uint64_t bytes, uint32_t flags, uint64_t owner,
                        gt_dbuf *h, gt_buftab_entry **e)
{
    return entry_new(tab, bytes, flags, owner, true, h, e);
}

// The live slot h names, or NULL.
static slot *slot_of(const gt_buftab *t, gt_dbuf h)
{
    uint64_t s = h & 0xffffffffu;
    uint32_t gen = (uint32_t)(h >> 32);
    if (s < 1 || s > t->nslots) {
        return NULL;
    }
    slot *sl = &t->slots[s - 1];
    return sl->live && sl->gen == gen ? sl : NULL;
}

// The buffer that carried `label` is gone or rewritten: its sources lose a carrier each.
static void label_drop(gt_buftab *t, gt_label label)
{
    for (int b = 0; b < GT_LABEL_MAX_SOURCES; b++) {
        if (label & ((gt_label)1 << b)) {
            assert(t->sources[b].carriers > 0);
            t->sources[b].carriers--;
        }
    }
}

// Adds label to e, counting e as a carrier of each bit it did not have.
static void label_add(gt_buftab *t, gt_buftab_entry *e, gt_label label)
{
    gt_label fresh = label & ~e->label;
    for (int b = 0; fresh != 0 && b < GT_LABEL_MAX_SOURCES; b++) {
        if (fresh & ((gt_label)1 << b)) {
            t->sources[b].carriers++;
        }
    }
    e->label |= label;
}

void gt_buftab_release(gt_buftab *tab, gt_dbuf h)
{
    slot *sl = slot_of(tab, h);
    assert(sl != NULL);
    if (sl == NULL) {
        return;
    }
    if (!sl->e.foreign) {
        tab->used -= sl->e.span;
    }
    label_drop(tab, sl->e.label);
    sl->e = (gt_buftab_entry){0};
    sl->live = false;
    tab->live--;
    if (sl->gen != UINT32_MAX) {  // else retired: its next handle would repeat an old one
        tab->free_slots[tab->nfree++] = (uint32_t)(sl - tab->slots);
    }
}

gt_err gt_buftab_notfound(gt_dbuf h)
{
    return gt_errf(GT_E_NOTFOUND, "device: no buffer with handle %#llx", (unsigned long long)h);
}

gt_err gt_buftab_find(const gt_buftab *tab, gt_dbuf h, uint64_t owner, gt_buftab_entry **e)
{
    slot *sl = slot_of(tab, h);
    if (sl == NULL || sl->e.owner != owner) {
        return gt_buftab_notfound(h);
    }
    *e = &sl->e;
    return GT_OK;
}

gt_err gt_buftab_range(const gt_buftab_entry *e, gt_dbuf h, uint64_t offset, uint64_t len,
                       const char *what)
{
    // never `offset + len > bytes`: that sum can wrap
    GT_ENSURE(offset <= e->bytes && len <= e->bytes - offset, GT_E_ARG,
              "device: %s of %llu bytes at offset %llu outside buffer %#llx (%llu bytes)", what,
              (unsigned long long)len, (unsigned long long)offset, (unsigned long long)h,
              (unsigned long long)e->bytes);
    return GT_OK;
}

gt_err gt_buftab_access(const gt_buftab *tab, gt_dbuf h, uint64_t owner, uint64_t offset,
                        uint64_t len, const char *what, gt_buftab_entry **e)
{
    gt_buftab_entry *x = NULL;
    GT_TRY(gt_buftab_find(tab, h, owner, &x));
    GT_TRY(gt_buftab_range(x, h, offset, len, what));
    *e = x;
    return GT_OK;
}

gt_err gt_buftab_read_out(const gt_buftab *tab, gt_dbuf h, uint64_t owner, uint64_t offset,
                          uint64_t len, gt_buftab_entry **e)
{
    gt_buftab_entry *x = NULL;
    GT_TRY(gt_buftab_find(tab, h, owner, &x));
    if (x->label != 0) {  // named first: the label says whose data it is
        char what[160];
        gt_buftab_label_describe(tab, x->label, what, sizeof what);
        return gt_errf(GT_E_POLICY,
                       "device: buffer %#llx holds data labelled %s (holder data leaves only as "
                       "a declared output): copy_out refused",
                       (unsigned long long)h, what);
    }
    GT_ENSURE(!(x->flags & GT_DBUF_NO_READBACK), GT_E_POLICY,
              "device: buffer %#llx is NO_READBACK: copy_out refused", (unsigned long long)h);
    GT_TRY(gt_buftab_range(x, h, offset, len, "copy_out"));
    *e = x;
    return GT_OK;
}

gt_buftab_entry *gt_buftab_next(const gt_buftab *tab, size_t *cursor, gt_dbuf *h)
{
    while (*cursor < tab->nslots) {
        slot *sl = &tab->slots[(*cursor)++];
        if (sl->live) {
            *h = ((uint64_t)sl->gen << 32) | (uint64_t)*cursor;
            return &sl->e;
        }
    }
    *h = 0;
    return NULL;
}

uint64_t gt_buftab_used(const gt_buftab *tab) { return tab->used; }

uint64_t gt_buftab_limit(const gt_buftab *tab) { return tab->limit; }

size_t gt_buftab_live(const gt_buftab *tab) { return tab->live; }

// ---- labels -----------------------------------------------------------------------------------

// The bit of dataset id: the one it has, else a free one (the caller adds it to a buffer at
// once, so the bit is carried before any other registration could hand it out again).
static gt_err source_bit(gt_buftab *tab, const uint8_t id[GT_LABEL_ID_BYTES], gt_label *bit)
{
    int free_bit = -1;
    for (int b = 0; b < GT_LABEL_MAX_SOURCES; b++) {
        label_source *src = &tab->sources[b];
        if (src->carriers > 0 && memcmp(src->id, id, GT_LABEL_ID_BYTES) == 0) {
            *bit = (gt_label)1 << b;
            return GT_OK;
        }
        if (src->carriers == 0 && free_bit < 0) {
            free_bit = b;
        }
    }
    GT_ENSURE(free_bit >= 0, GT_E_LIMIT, "device: %d datasets already label buffers",
              GT_LABEL_MAX_SOURCES);
    memcpy(tab->sources[free_bit].id, id, GT_LABEL_ID_BYTES);
    *bit = (gt_label)1 << free_bit;
    return GT_OK;
}

gt_err gt_buftab_label_add(gt_buftab *tab, gt_dbuf h, const uint8_t id[GT_LABEL_ID_BYTES])
{
    slot *sl = slot_of(tab, h);
    assert(sl != NULL);
    GT_ENSURE(sl != NULL, GT_E_NOTFOUND, "device: no buffer with handle %#llx",
              (unsigned long long)h);
    gt_label bit = 0;
    GT_TRY(source_bit(tab, id, &bit));
    label_add(tab, &sl->e, bit);
    return GT_OK;
}

size_t gt_buftab_label_ids(const gt_buftab *tab, gt_label label,
                           uint8_t (*ids)[GT_LABEL_ID_BYTES], size_t cap)
{
    size_t n = 0;
    for (int b = 0; b < GT_LABEL_MAX_SOURCES; b++) {
        if (label & ((gt_label)1 << b)) {
            if (n < cap) {
                memcpy(ids[n], tab->sources[b].id, GT_LABEL_ID_BYTES);
            }
            n++;
        }
    }
    return n;
}

void gt_buftab_label_describe(const gt_buftab *tab, gt_label label, char *out, size_t cap)
{
    uint8_t ids[2][GT_LABEL_ID_BYTES];
    size_t n = gt_buftab_label_ids(tab, label, ids, 2);
    char a[2 * GT_LABEL_ID_BYTES + 1] = "", b[2 * GT_LABEL_ID_BYTES + 1] = "";
    gt_hex_encode(a, sizeof a, ids[0], GT_LABEL_ID_BYTES);
    if (n >= 2) {
        gt_hex_encode(b, sizeof b, ids[1], GT_LABEL_ID_BYTES);
    }
    if (n <= 1) {
        snprintf(out, cap, "dataset %s", n ? a : "(none)");
    } else if (n == 2) {
        snprintf(out, cap, "datasets %s and %s", a, b);
    } else {
        snprintf(out, cap, "datasets %s, %s and %zu more", a, b, n - 2);
    }
}

// Release ops: may this one let its result out now? (labels above gt_buftab_launch_labels)
static gt_err release_allowed(const gt_buftab *tab, const char *what, gt_label in,
                              gt_release_state *rel, uint64_t **budget, uint32_t *bits)
{
    char from[160];
    gt_buftab_label_describe(tab, in, from, sizeof from);
    GT_ENSURE(rel != NULL && rel->declared, GT_E_POLICY,
              "device: %s computed from data labelled %s: no outputs are declared, so it stays "
              "on the device", what, from);
    gt_device_outputs *r = &rel->rules;
    bool listed = strcmp(what, "loss") == 0 ? r->loss : strcmp(what, "grad_norm") == 0 && r->grad_norm;
    GT_ENSURE(listed, GT_E_POLICY,
              "device: %s is not a declared output: computed from data labelled %s, it stays on "
              "the device", what, from);
    bool loss = strcmp(what, "loss") == 0;
    *budget = loss ? &r->loss_budget : &r->grad_norm_budget;
    GT_ENSURE(**budget > 0, GT_E_POLICY,
              "device: the declared %s releases are all spent (one per declared step)", what);
    *bits = loss ? r->loss_mantissa_bits : 23;
    return GT_OK;
}

// A pinned program: the op must be the program's next one (it then advances, cyclically).
static gt_err program_next(gt_release_state *rel, const gt_op *op)
{
    GT_ENSURE(rel->program.count > 0, GT_E_POLICY,
              "device: the agreement pins the training program and none has been given: no op "
              "runs on labelled data");
    gt_op_sig got, *want = &rel->program.ops[rel->position];
    gt_op_signature(op, &got);
    if (!gt_op_sig_equal(&got, want)) {
        char g[160], w[160];
        gt_op_sig_describe(&got, g, sizeof g);
        gt_op_sig_describe(want, w, sizeof w);
        return gt_errf(GT_E_POLICY,
                       "device: op outside the pinned program: %s on labelled data, where op %u "
                       "of the step is %s", g, rel->position, w);
    }
    rel->position = (rel->position + 1) % rel->program.count;
    return GT_OK;
}

gt_err gt_release_pin(gt_release_state *rel, gt_span program)
{
    GT_ENSURE(rel->declared && rel->rules.program_pinned, GT_E_STATE,
              "device: no program is pinned by the declared agreement");
    GT_ENSURE(rel->program.count == 0, GT_E_STATE, "device: the program is given once");
    uint8_t hash[GT_SHA256_BYTES];
    GT_TRY(gt_hash(GT_HASH_SHA256, hash, program.data, program.len));
    GT_ENSURE(gt_ct_equal(hash, rel->rules.program_hash, GT_SHA256_BYTES), GT_E_POLICY,
              "device: this program is not the one the agreement pins");
    GT_TRY(gt_op_program_parse(program, &rel->program));
    rel->position = 0;
    return GT_OK;
}

void gt_release_state_free(gt_release_state *rel) { gt_op_program_free(&rel->program); }

static int int_index(const gt_op_descriptor *d, const char *name)
{
    for (int i = 0; i < d->nints; i++) {
        if (strcmp(d->ints[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

gt_err gt_buftab_launch_labels(gt_buftab *tab, uint64_t owner, gt_op *op, gt_release_state *rel)
{
    uint64_t bytes[GT_OP_MAX_REFS];
    int nrefs = 0;
    GT_TRY(gt_op_ref_sizes(op, bytes, &nrefs));
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    gt_buftab_entry *e[GT_OP_MAX_REFS] = {0};
    gt_label in = 0;
    for (int i = 0; i < nrefs; i++) {
        if (op->refs[i].buf == 0) {
            GT_ENSURE(d->refs[i].optional, GT_E_ARG, "%s: ref %d (%s) is empty", d->name, i,
                      d->refs[i].name);
            continue;
        }
        GT_TRY(gt_buftab_access(tab, op->refs[i].buf, owner, op->refs[i].offset, bytes[i],
                                "op operand", &e[i]));
        // What the op reads, and what it adds to or rewrites in place, flows into its outputs.
        if (d->refs[i].access != GT_ACCESS_WRITE) {
            in |= e[i]->label;
        }
    }
    if (in != 0 && rel != NULL && rel->data_fault) {
        return gt_errf(GT_E_STATE, "device: %s refused: an earlier op on labelled data failed on "
                       "the data, and this session runs no more ops on it", d->name);
    }
    if (in != 0 && rel != NULL && rel->declared && rel->rules.program_pinned &&
        gt_op_in_programs(op->kind)) {
        GT_TRY(program_next(rel, op));
    }
    if (rel != NULL) {
        rel->labelled_launch = in != 0;
    }
    if (d->release != NULL && in != 0) {
        uint64_t *budget = NULL;
        uint32_t bits = 0;
        GT_TRY(release_allowed(tab, d->release, in, rel, &budget, &bits));
        // The whole output buffer is rewritten, so emptying its label leaves nothing behind.
        GT_ENSURE(op->refs[0].offset == 0 && e[0]->bytes == bytes[0], GT_E_POLICY,
                  "device: %s releases into a whole buffer of %llu bytes (buffer %#llx holds "
                  "%llu, the ref is at offset %llu)",
                  d->name, (unsigned long long)bytes[0], (unsigned long long)op->refs[0].buf,
                  (unsigned long long)e[0]->bytes, (unsigned long long)op->refs[0].offset);
        int bi = int_index(d, "bits");
        assert(bi >= 0);
        op->ints[bi] = bits;
        (*budget)--;
        label_drop(tab, e[0]->label);
        e[0]->label = 0;
        return GT_OK;
    }
    for (int i = 0; i < nrefs; i++) {
        if (e[i] != NULL && gt_access_writes(d->refs[i].access)) {
            label_add(tab, e[i], in);
        }
    }
    return GT_OK;
}

gt_err gt_buftab_launch_done(gt_release_state *rel, gt_err result)
{
    if (rel->labelled_launch && result.code == GT_E_FORMAT) {
        rel->data_fault = true;
    }
    rel->labelled_launch = false;
    return result;
}
