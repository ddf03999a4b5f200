// Fuzz target: a pinned training program's bytes (kernels.h "programs"), which devd parses from
// its client. A program that parses must write back, op by op, to exactly the same bytes.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gputravel/kernels.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_op_program p;
    if (!gt_is_ok(gt_op_program_parse((gt_span){data, size}, &p))) {
        return 0;
    }
    gt_writer w = gt_writer_init_dynamic();
    for (uint32_t i = 0; i < p.count; i++) {
        gt_op op = {.kind = p.ops[i].kind};
        const gt_op_descriptor *d = gt_op_desc(op.kind);
        for (int k = 0, s = 0; k < d->nints; k++) {
            if (d->ints[k].shape) {
                op.ints[k] = p.ops[i].shape[s++];
            }
        }
        if (!gt_is_ok(gt_op_program_append(&w, &op))) {
            abort();
        }
    }
    if (w.len != size || memcmp(w.data, data, size) != 0) {
        abort();
    }
    gt_writer_free(&w);
    gt_op_program_free(&p);
    return 0;
}
