// Sizes with binary suffixes, and a monotonic clock.
#include <gputravel/util.h>

#include <signal.h>

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

gt_err gt_parse_size(const char *s, uint64_t *out)
{
    char *end = NULL;
    GT_ENSURE(s != NULL && isdigit((unsigned char)s[0]), GT_E_ARG, "size '%s': not a number",
              s ? s : "");
    double v = strtod(s, &end);
    uint64_t mult = 1;
    if (*end != '\0') {
        switch (toupper((unsigned char)*end)) {
        case 'K': mult = 1ull << 10; break;
        case 'M': mult = 1ull << 20; break;
        case 'G': mult = 1ull << 30; break;
        case 'T': mult = 1ull << 40; break;
        case 'B': mult = 1; end--; break;  // plain "4096B"
        default:
            return gt_errf(GT_E_ARG, "size '%s': unknown unit", s);
        }
        end++;
        if (*end == 'i' || *end == 'I') {
            end++;
        }
        if (*end == 'b' || *end == 'B') {
            end++;
        }
        GT_ENSURE(*end == '\0', GT_E_ARG, "size '%s': unknown unit", s);
    }
    double bytes = v * (double)mult;
    GT_ENSURE(isfinite(bytes) && bytes >= 0 && bytes < 18446744073709551616.0, GT_E_ARG,
              "size '%s': out of range", s);
    *out = (uint64_t)bytes;
    return GT_OK;
}

void gt_format_size(char *out, size_t cap, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) {
        snprintf(out, cap, "%llu B", (unsigned long long)bytes);
    } else {
        snprintf(out, cap, "%.1f %s", v, units[u]);
    }
}

double gt_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile int interrupt_signal;

static void on_interrupt(int sig)
{
    if (interrupt_signal == 0) {
        interrupt_signal = sig;  // the first one asked: a SIGTERM after a SIGINT does not rename it
    }
    signal(sig, SIG_DFL);  // a second one is not asked twice
}

void gt_interrupt_install(void)
{
    interrupt_signal = 0;
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);
}

int gt_interrupted(void)
{
    return interrupt_signal;
}

const volatile int *gt_interrupt_flag(void)
{
    return &interrupt_signal;
}
