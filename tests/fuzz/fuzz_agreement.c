// Fuzz: a training agreement arrives from other parties and is untrusted until parsed.
#include <gputravel/travel.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void count_problem(void *ctx, const char *problem)
{
    (void)problem;
    ++*(unsigned *)ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_agreement a;
    gt_err e = gt_agreement_parse(&a, data, size);
    // the transfer list is never empty, and names only known modes
    bool transfers_ok = a.transfers != 0 && (a.transfers >> GT_TRANSFER_MODE_COUNT) == 0;
    if (e.code == GT_E_NONE &&
        (a.holder_count == 0 || a.channels % a.heads != 0 || !transfers_ok)) {
        __builtin_trap();  // an accepted agreement satisfies its own rules
    }
    // The lint and the parser judge the shape alike: an accepted document has no shape problem,
    // and the lint reports exactly as many problems as it says (never more than asked for).
    unsigned seen = 0, count = 0;
    gt_err l = gt_agreement_lint(data, size, count_problem, &seen, 8, &count);
    if (gt_is_ok(l) && (seen != count || count > 8)) {
        __builtin_trap();
    }
    if (e.code == GT_E_NONE && (!gt_is_ok(l) || count != 0)) {
        __builtin_trap();
    }
    return 0;
}
