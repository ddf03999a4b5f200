// The cuda executor (GPUTRAVEL_CUDA only): decodes an op from the table (gt_op_decode) with the
// backend's resolver, refuses misaligned refs, checks tokens against V on the device, and calls
// the launcher of the op's kernel family (src/kernels/cuda/*.cu) with the args' named fields.
// Plain C: the .cu files stay free of util.h, and this file of CUDA kernels.
#include <gputravel/kernels.h>
#include <gputravel/kernels_cuda.h>

// A launcher's answer (NULL or a static message) as a gt_err.
static gt_err ran(const char *msg, const char *op)
{
    if (msg == NULL) {
        return GT_OK;
    }
    return gt_errf(GT_E_IO, "cuda: %s: %s", op, msg);
}

// A misaligned access on the GPU is a fatal error that poisons the whole context, so every ref
// must sit at a multiple of its element size (u16 token data 2, the f64 sum 8, the rest 4; the
// cpu backend tolerates it; cudaMalloc bases are 256-aligned, so the offset decides).
static gt_err check_alignment(const gt_op *op)
{
    const gt_op_descriptor *d = gt_op_desc(op->kind);
    for (int i = 0; i < d->nrefs; i++) {
        uint64_t al = gt_elem_size(d->refs[i].elem);
        GT_ENSURE(op->refs[i].buf == 0 || op->refs[i].offset % al == 0, GT_E_ARG,
                  "%s: ref %d at offset %llu is not %llu-byte aligned", d->name, i,
                  (unsigned long long)op->refs[i].offset, (unsigned long long)al);
    }
    return GT_OK;
}

static gt_err check_i32(gt_cuda_ctx *cx, const char *name, const char *what, const int32_t *x,
                        size_t n, int64_t V)
{
    size_t bad = 0;
    GT_TRY(ran(gt_cuda_first_bad_i32(cx, &bad, x, n, V), name));
    GT_ENSURE(bad == n, GT_E_FORMAT, "%s: %s %zu is outside [0, %lld)", name, what, bad,
              (long long)V);
    return GT_OK;
}

// Ops that index by token or target: checked first, on the device.
static gt_err run_indexed(gt_cuda_ctx *cx, uint32_t kind, const gt_op_args *u, const char *name)
{
    switch (kind) {
    case GT_OP_ENCODER_FWD: {
        const gt_encoder_fwd_args *a = &u->encoder_fwd;
        GT_TRY(check_i32(cx, name, "token", a->inp, (size_t)a->B * a->T, a->V));
        return ran(gt_cuda_encoder_forward(cx, a->out, a->inp, a->wte, a->wpe, a->B, a->T, a->C),
                   name);
    }
    case GT_OP_ENCODER_BWD: {
        const gt_encoder_bwd_args *a = &u->encoder_bwd;
        GT_TRY(check_i32(cx, name, "token", a->inp, (size_t)a->B * a->T, a->V));
        return ran(gt_cuda_encoder_backward(cx, a->dwte, a->dwpe, a->dout, a->inp, a->B, a->T,
                                            a->C, a->Vp),
                   name);
    }
    case GT_OP_SOFTMAX_XENT: {
        const gt_softmax_xent_args *a = &u->softmax_xent;
        size_t BT = (size_t)a->B * (size_t)a->T;
        GT_ENSURE(BT <= 0x7fffffffu, GT_E_ARG, "%s: %zu rows", name, BT);
        GT_TRY(check_i32(cx, name, "target", a->targets, BT, a->V));
        return ran(gt_cuda_softmax_crossentropy(cx, a->losses, a->logits, a->targets, (int)BT,
                                                a->V, a->Vp, a->grad, a->dloss),
                   name);
    }
    case GT_OP_TOKENS_GATHER: {
        const gt_tokens_gather_args *a = &u->tokens_gather;
        size_t n = (size_t)a->N, bad = 0;
        const uint16_t *src = a->data + a->offset;
        GT_TRY(ran(gt_cuda_first_bad_u16(cx, &bad, src, n + 1, a->V), name));
        GT_ENSURE(bad == n + 1, GT_E_FORMAT, "%s: token at %lld is not below vocab %d", name,
                  (long long)(a->offset + (int64_t)bad), a->V);
        return ran(gt_cuda_tokens_gather(cx, a->inp, a->tgt, src, n), name);
    }
    case GT_OP_TOKENS_CHECK: {
        const gt_tokens_check_args *a = &u->tokens_check;
        size_t n = (size_t)a->N, bad = 0;
        GT_TRY(ran(gt_cuda_first_bad_u16(cx, &bad, a->data, n, a->V), name));
        GT_ENSURE(bad == n, GT_E_FORMAT, "%s: token at %zu is not below vocab %d", name, bad,
                  a->V);
        return GT_OK;
    }
    default:
        return gt_errf(GT_E_ARG, "op: unknown kind %u", kind);
    }
}

// The model's layers, forward and backward.
static const char *run_layer(gt_cuda_ctx *cx, uint32_t kind, const gt_op_args *u)
{
    switch (kind) {
    case GT_OP_LAYERNORM_FWD: {
        const gt_layernorm_fwd_args *a = &u->layernorm_fwd;
        return gt_cuda_layernorm_forward(cx, a->out, a->mean, a->rstd, a->inp, a->weight,
                                         a->bias, a->N, a->C);
    }
    case GT_OP_LAYERNORM_BWD: {
        const gt_layernorm_bwd_args *a = &u->layernorm_bwd;
        return gt_cuda_layernorm_backward(cx, a->dinp, a->dweight, a->dbias, a->dout, a->inp,
                                          a->weight, a->mean, a->rstd, a->N, a->C);
    }
    case GT_OP_MATMUL_FWD: {
        const gt_matmul_fwd_args *a = &u->matmul_fwd;
        return gt_cuda_matmul_forward(cx, a->out, a->inp, a->weight, a->bias, a->N, a->C, a->OC);
    }
    case GT_OP_MATMUL_BWD: {
        const gt_matmul_bwd_args *a = &u->matmul_bwd;
        return gt_cuda_matmul_backward(cx, a->dinp, a->dweight, a->dbias, a->dout, a->inp,
                                       a->weight, a->N, a->C, a->OC, a->dinp_accumulate);
    }
    case GT_OP_ATTENTION_FWD: {
        const gt_attention_fwd_args *a = &u->attention_fwd;
        return gt_cuda_attention_forward(cx, a->out, a->att, a->inp, a->B, a->T, a->C, a->NH);
    }
    case GT_OP_ATTENTION_BWD: {
        const gt_attention_bwd_args *a = &u->attention_bwd;
        return gt_cuda_attention_backward(cx, a->dinp, a->dout, a->inp, a->att, a->B, a->T, a->C,
                                          a->NH);
    }
    default:
        return "not a layer op";
    }
}

// Elementwise ops, the gradient norm and the optimizer.
static const char *run_elementwise(gt_cuda_ctx *cx, uint32_t kind, const gt_op_args *u)
{
    switch (kind) {
    case GT_OP_GELU_FWD:
        return gt_cuda_gelu_forward(cx, u->gelu_fwd.out, u->gelu_fwd.inp, (size_t)u->gelu_fwd.N);
    case GT_OP_GELU_BWD: {
        const gt_gelu_bwd_args *a = &u->gelu_bwd;
        return gt_cuda_gelu_backward(cx, a->dinp, a->inp, a->dout, (size_t)a->N);
    }
    case GT_OP_RESIDUAL_FWD: {
        const gt_residual_fwd_args *a = &u->residual_fwd;
        return gt_cuda_residual_forward(cx, a->out, a->inp1, a->inp2, (size_t)a->N);
    }
    case GT_OP_RESIDUAL_BWD: {
        const gt_residual_bwd_args *a = &u->residual_bwd;
        return gt_cuda_residual_backward(cx, a->dinp1, a->dinp2, a->dout, (size_t)a->N);
    }
    case GT_OP_SUMSQ:
        return gt_cuda_sum_of_squares(cx, u->sumsq.out, u->sumsq.x, (size_t)u->sumsq.N);
    case GT_OP_LOSS_MEAN: {
        const gt_loss_mean_args *a = &u->loss_mean;
        return gt_cuda_loss_mean(cx, a->out, a->losses, a->N, a->bits);
    }
    case GT_OP_NORM_RELEASE:
        return gt_cuda_norm_release(cx, u->norm_release.out, u->norm_release.sumsq,
                                    u->norm_release.bits);
    case GT_OP_CLIP_GRADS: {
        const gt_clip_grads_args *a = &u->clip_grads;
        return gt_cuda_clip_grads(cx, a->grads, a->sumsq, (size_t)a->N, a->clip);
    }
    case GT_OP_ADAMW: {
        const gt_adamw_args *a = &u->adamw;
        return gt_cuda_adamw(cx, a->params, a->m, a->v, a->grads, (size_t)a->N, a->lr, a->beta1,
                             a->beta2, a->eps, a->weight_decay, a->bc1, a->bc2, a->grad_scale);
    }
    default:
        return "not an elementwise op";
    }
}

gt_err gt_ops_cuda_run(gt_cuda_ctx *cx, const gt_op *op, gt_dref_resolve_fn resolve, void *ctx)
{
    gt_op_args args;
    GT_TRY(gt_op_decode(op, resolve, ctx, &args));  // refuses unknown kinds
    GT_TRY(check_alignment(op));
    const char *name = gt_op_name(op->kind);
    switch ((gt_op_kind)op->kind) {
    case GT_OP_ENCODER_FWD:
    case GT_OP_ENCODER_BWD:
    case GT_OP_SOFTMAX_XENT:
    case GT_OP_TOKENS_GATHER:
    case GT_OP_TOKENS_CHECK:
        return run_indexed(cx, op->kind, &args, name);
    case GT_OP_LAYERNORM_FWD:
    case GT_OP_LAYERNORM_BWD:
    case GT_OP_MATMUL_FWD:
    case GT_OP_MATMUL_BWD:
    case GT_OP_ATTENTION_FWD:
    case GT_OP_ATTENTION_BWD:
        return ran(run_layer(cx, op->kind, &args), name);
    case GT_OP_GELU_FWD:
    case GT_OP_GELU_BWD:
    case GT_OP_RESIDUAL_FWD:
    case GT_OP_RESIDUAL_BWD:
    case GT_OP_SUMSQ:
    case GT_OP_ADAMW:
    case GT_OP_LOSS_MEAN:
    case GT_OP_NORM_RELEASE:
    case GT_OP_CLIP_GRADS:
        return ran(run_elementwise(cx, op->kind, &args), name);
    case GT_OP_SUM_F64:  // ZeRO-1's partial sums; cuda peers are not done (docs/collective.md)
        return gt_errf(GT_E_UNSUPPORTED, "%s: not on cuda yet (ZeRO-1 runs on cpu and sim)", name);
    case GT_OP_NONE_:
    case GT_OP_COUNT_:
    default:
        return gt_errf(GT_E_ARG, "op: unknown kind %u", op->kind);
    }
}
