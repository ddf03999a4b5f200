// The trainer's journal of committed chunk uses (format in orchestr.h).
#include <gputravel/orchestr.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JOURNAL_MAX_BYTES (256u << 20)

struct gt_journal {
    int fd;
    char path[4096];
};

gt_err gt_journal_open(gt_journal **out, const char *path)
{
    *out = NULL;
    gt_journal *j = calloc(1, sizeof *j);
    GT_ENSURE(j != NULL, GT_E_NOMEM, "journal: out of memory");
    snprintf(j->path, sizeof j->path, "%s", path);
    j->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (j->fd < 0) {
        gt_err err = gt_errf(GT_E_IO, "%s: %s", path, strerror(errno));
        free(j);
        return err;
    }
    *out = j;
    return GT_OK;
}

gt_err gt_journal_append_use(gt_journal *j, uint64_t step, uint32_t holder, uint32_t chunk,
                             uint64_t tokens)
{
    char line[96];
    int n = snprintf(line, sizeof line, "use %" PRIu64 " %u %u %" PRIu64 "\n", step, holder,
                     chunk, tokens);
    // One write of a short line: with O_APPEND it lands whole or (on a crash) torn at the end.
    GT_ENSURE(write(j->fd, line, (size_t)n) == n, GT_E_IO, "%s: write: %s", j->path,
              strerror(errno));
    GT_ENSURE(fsync(j->fd) == 0, GT_E_IO, "%s: fsync: %s", j->path, strerror(errno));
    return GT_OK;
}

void gt_journal_close(gt_journal *j)
{
    if (j != NULL) {
        close(j->fd);
        free(j);
    }
}

// Parses one decimal field (no sign, no leading '+', at most 20 digits) up to `stop`.
static gt_err field_u64(gt_reader *r, char stop, uint64_t *out)
{
    uint64_t v = 0;
    size_t digits = 0;
    for (;;) {
        uint8_t c = 0;
        GT_TRY(gt_reader_u8(r, &c));
        if (c == (uint8_t)stop && digits > 0) {
            break;
        }
        GT_ENSURE(c >= '0' && c <= '9' && digits < 19, GT_E_FORMAT, "journal: bad number");
        v = v * 10 + (uint64_t)(c - '0');
        digits++;
    }
    *out = v;
    return GT_OK;
}

gt_err gt_journal_replay(const char *path, uint64_t max_step, gt_schedule *s,
                         uint64_t *replayed, uint64_t *dropped)
{
    *replayed = 0;
    *dropped = 0;
    gt_buf b = {0};
    gt_err err = gt_file_read_all(path, JOURNAL_MAX_BYTES, &b);
    if (err.code == GT_E_NOTFOUND) {
        return GT_OK;  // no journal yet: a fresh run
    }
    GT_TRY(err);
    gt_reader r = gt_reader_init(b.data, b.len);
    size_t keep = 0;  // bytes of the file that stay (records up to max_step)
    uint64_t line_no = 0;
    while (gt_reader_left(&r) > 0) {
        line_no++;
        size_t start = r.pos;
        if (memchr(b.data + start, '\n', b.len - start) == NULL) {
            break;  // a torn last record was never committed
        }
        uint8_t tag[4] = {0};
        uint64_t step = 0, holder = 0, chunk = 0, tokens = 0;
        GT_TRY_GOTO(err, gt_reader_bytes(&r, tag, 4), bad);
        GT_ENSURE_GOTO(err, memcmp(tag, "use ", 4) == 0, bad, GT_E_FORMAT, "unknown record");
        GT_TRY_GOTO(err, field_u64(&r, ' ', &step), bad);
        GT_TRY_GOTO(err, field_u64(&r, ' ', &holder), bad);
        GT_TRY_GOTO(err, field_u64(&r, ' ', &chunk), bad);
        GT_TRY_GOTO(err, field_u64(&r, '\n', &tokens), bad);
        if (step > max_step) {
            (*dropped)++;
            continue;
        }
        GT_ENSURE_GOTO(err, holder <= UINT32_MAX && chunk <= UINT32_MAX, bad, GT_E_FORMAT,
                       "index out of range");
        GT_TRY_GOTO(err, gt_schedule_record(s, (uint32_t)holder, (uint32_t)chunk, tokens), bad);
        (*replayed)++;
        keep = r.pos;
    }
    if (keep < b.len) {
        // Uncommitted records (beyond the checkpoint, or torn) go, so they cannot count later.
        GT_ENSURE_GOTO(err, truncate(path, (off_t)keep) == 0, out, GT_E_IO, "%s: truncate: %s",
                       path, strerror(errno));
    }
    err = GT_OK;
    goto out;
bad:
    err = gt_err_wrap(err, "%s line %llu", path, (unsigned long long)line_no);
out:
    gt_buf_free_nowipe(&b);
    return err;
}
