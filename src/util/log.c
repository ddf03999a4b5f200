// Levelled logging. The level and stream are process settings that main() sets once before any
// thread starts (STYLE.md §6); everything else only reads them.
#include <gputravel/util.h>

#include <time.h>

static gt_log_level log_level = GT_LOG_INFO;
static FILE *log_stream = NULL;

void gt_log_set_level(gt_log_level level) { log_level = level; }
void gt_log_set_stream(FILE *stream) { log_stream = stream; }
gt_log_level gt_log_get_level(void) { return log_level; }

void gt_log(gt_log_level level, const char *fmt, ...)
{
    if (level > log_level) {
        return;
    }
    static const char *const names[] = {"error", "warn", "info", "debug"};
    FILE *out = log_stream ? log_stream : stderr;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    // One fprintf per line so that concurrent writers do not interleave inside a line.
    fprintf(out, "[%s] %s\n", names[level], line);
    fflush(out);
}
