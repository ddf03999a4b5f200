// Pinned training programs (kernels.h "programs"): the signature of an op (its kind and shapes),
// and the byte form of a program, parsed only through gt_reader (devd parses a client's).
#include <gputravel/kernels.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool gt_op_writes_any(uint32_t kind)
{
    const gt_op_descriptor *d = gt_op_desc(kind);
    for (int i = 0; d != NULL && i < d->nrefs; i++) {
        if (gt_access_writes(d->refs[i].access)) {
            return true;
        }
    }
    return false;
}

bool gt_op_in_programs(uint32_t kind)
{
    const gt_op_descriptor *d = gt_op_desc(kind);
    return d != NULL && d->release == NULL && gt_op_writes_any(kind);
}

void gt_op_signature(const gt_op *op, gt_op_sig *sig)
{
    memset(sig, 0, sizeof *sig);
    sig->kind = op->kind;
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    for (int i = 0; d != NULL && i < d->nints; i++) {
        if (d->ints[i].shape) {
            sig->shape[sig->nshape++] = op->ints[i];
        }
    }
}

bool gt_op_sig_equal(const gt_op_sig *a, const gt_op_sig *b)
{
    if (a->kind != b->kind || a->nshape != b->nshape) {
        return false;
    }
    for (uint32_t i = 0; i < a->nshape; i++) {
        if (a->shape[i] != b->shape[i]) {
            return false;
        }
    }
    return true;
}

void gt_op_sig_describe(const gt_op_sig *sig, char *out, size_t cap)
{
    const gt_op_descriptor *d = gt_op_desc(sig->kind);
    size_t n = (size_t)snprintf(out, cap, "%s(", gt_op_name(sig->kind));
    for (uint32_t i = 0, k = 0; d != NULL && i < (uint32_t)d->nints && n < cap; i++) {
        if (d->ints[i].shape) {
            n += (size_t)snprintf(out + n, cap - n, "%s%s=%lld", k ? "," : "", d->ints[i].name,
                                  (long long)sig->shape[k]);
            k++;
        }
    }
    if (n < cap) {
        snprintf(out + n, cap - n, ")");
    }
}

gt_err gt_op_program_append(gt_writer *w, const gt_op *op)
{
    if (w->len == 0) {
        GT_TRY(gt_writer_bytes(w, GT_OP_PROGRAM_MAGIC, sizeof GT_OP_PROGRAM_MAGIC - 1));
    }
    gt_op_sig sig;
    gt_op_signature(op, &sig);
    GT_TRY(gt_writer_u32le(w, sig.kind));
    GT_TRY(gt_writer_u32le(w, sig.nshape));
    for (uint32_t i = 0; i < sig.nshape; i++) {
        GT_TRY(gt_writer_u64le(w, (uint64_t)sig.shape[i]));
    }
    return GT_OK;
}

gt_err gt_op_program_parse(gt_span bytes, gt_op_program *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(bytes.data, bytes.len);
    uint8_t magic[sizeof GT_OP_PROGRAM_MAGIC - 1];
    GT_TRY(gt_err_wrap(gt_reader_bytes(&r, magic, sizeof magic), "program"));
    GT_ENSURE(memcmp(magic, GT_OP_PROGRAM_MAGIC, sizeof magic) == 0, GT_E_FORMAT,
              "program: bad magic");
    gt_op_sig *ops = calloc(GT_OP_PROGRAM_MAX_OPS, sizeof *ops);
    GT_ENSURE(ops != NULL, GT_E_NOMEM, "program: out of memory");
    gt_err err = GT_OK;
    uint32_t n = 0;
    while (gt_reader_left(&r) > 0) {
        GT_ENSURE_GOTO(err, n < GT_OP_PROGRAM_MAX_OPS, fail, GT_E_LIMIT,
                       "program: more than %d ops", GT_OP_PROGRAM_MAX_OPS);
        gt_op_sig *s = &ops[n];
        GT_TRY_GOTO(err, gt_reader_u32le(&r, &s->kind), fail);
        GT_TRY_GOTO(err, gt_reader_u32le(&r, &s->nshape), fail);
        const gt_op_descriptor *d = gt_op_desc(s->kind);
        GT_ENSURE_GOTO(err, gt_op_in_programs(s->kind), fail, GT_E_FORMAT,
                       "program: op %u: kind %u is no op of a program", n, s->kind);
        uint32_t want = 0;
        for (int i = 0; i < d->nints; i++) {
            want += d->ints[i].shape;
        }
        GT_ENSURE_GOTO(err, s->nshape == want, fail, GT_E_FORMAT,
                       "program: op %u (%s): %u shapes, expected %u", n, d->name, s->nshape,
                       want);
        for (uint32_t i = 0; i < s->nshape; i++) {
            uint64_t v = 0;
            GT_TRY_GOTO(err, gt_reader_u64le(&r, &v), fail);
            GT_ENSURE_GOTO(err, v >= 1 && v < ((uint64_t)1 << 31), fail, GT_E_FORMAT,
                           "program: op %u (%s): shape %llu", n, d->name, (unsigned long long)v);
            s->shape[i] = (int64_t)v;
        }
        n++;
    }
    GT_ENSURE_GOTO(err, n > 0, fail, GT_E_FORMAT, "program: no ops");
    out->ops = ops;
    out->count = n;
    return GT_OK;
fail:
    free(ops);
    return gt_err_wrap(err, "program");
}

void gt_op_program_free(gt_op_program *p)
{
    free(p->ops);
    memset(p, 0, sizeof *p);
}
