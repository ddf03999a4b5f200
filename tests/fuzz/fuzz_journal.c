// Fuzz: a trainer journal read back after a crash may be torn or corrupt.
#include <gputravel/orchestr.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/gt-fuzz-journal-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
        abort();
    }
    close(fd);
    gt_agreement a;
    memset(&a, 0, sizeof a);
    a.holder_count = 2;
    a.holders[0].token_budget = 1000;
    a.holders[0].max_uses_per_chunk = 3;
    a.holders[1].token_budget = 10;
    a.holders[1].max_uses_per_chunk = 1;
    static const uint64_t t0[2] = {100, 200}, t1[1] = {10};
    const uint64_t *tokens[2] = {t0, t1};
    const uint32_t counts[2] = {2, 1};
    gt_schedule *s = NULL;
    if (gt_is_ok(gt_schedule_create(&s, &a, counts, tokens))) {
        uint64_t replayed = 0, dropped = 0;
        gt_err e = gt_journal_replay(path, 1000, s, &replayed, &dropped);
        gt_holder_account acc;
        gt_schedule_account(s, 1, &acc);
        if (e.code == GT_E_NONE && acc.tokens_used > 10) {
            __builtin_trap();  // replay never exceeds a budget
        }
        gt_schedule_free(s);
    }
    unlink(path);
    return 0;
}
