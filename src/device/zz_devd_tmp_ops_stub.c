// TEMPORARY (branch devd only): until branch `trainer` lands gt_ops_cpu_run (src/device/ops*.c),
// launch answers "unsupported". Removed at that merge.
#include "backend.h"

gt_err gt_ops_cpu_run(const gt_op *op, gt_dref_resolve_fn resolve, void *ctx)
{
    (void)resolve;
    (void)ctx;
    return gt_errf(GT_E_UNSUPPORTED, "device: op %u: kernels not built yet", op->kind);
}
