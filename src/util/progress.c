// A one-line progress bar on stderr for long transfers; silent when stderr is not a terminal.
#include <gputravel/util.h>

#include <unistd.h>

static void draw(gt_progress *p, bool final)
{
    double now = gt_now_seconds();
    if (!final && now - p->last_draw < 0.1) {
        return;
    }
    p->last_draw = now;
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    if (frac > 1.0) {
        frac = 1.0;
    }
    char done[32], total[32], speed[32];
    gt_format_size(done, sizeof done, p->done);
    gt_format_size(total, sizeof total, p->total);
    gt_format_size(speed, sizeof speed, (uint64_t)rate);
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    int filled = (int)(frac * WIDTH);
    for (int i = 0; i < WIDTH; i++) {
        bar[i] = i < filled ? '#' : '.';
    }
    bar[WIDTH] = '\0';
    double eta = rate > 0 ? (double)(p->total - (p->done < p->total ? p->done : p->total)) / rate : 0;
    fprintf(stderr, "\r%-10s [%s] %5.1f%% %s / %s  %s/s  ETA %4.0fs ", p->label, bar, 100 * frac,
            done, total, speed, final ? 0.0 : eta);
    if (final) {
        fputc('\n', stderr);
    }
    fflush(stderr);
}

void gt_progress_start(gt_progress *p, const char *label, uint64_t total, bool quiet)
{
    p->label = label;
    p->total = total;
    p->done = 0;
    p->start = gt_now_seconds();
    p->last_draw = 0;
    p->enabled = !quiet && isatty(STDERR_FILENO);
}

void gt_progress_add(gt_progress *p, uint64_t bytes)
{
    p->done += bytes;
    if (p->enabled) {
        draw(p, false);
    }
}

void gt_progress_finish(gt_progress *p)
{
    if (p->enabled) {
        draw(p, true);
    }
    p->enabled = false;
}
