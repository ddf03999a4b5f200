// PNG plots through gnuplot. The script and data go down a pipe; gnuplot writes a temporary
// file that is renamed over the target only if gnuplot succeeded.
#include <gputravel/util.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool gnuplot_available(void)
{
    return access("/usr/bin/gnuplot", X_OK) == 0 || system("command -v gnuplot >/dev/null 2>&1") == 0;
}

// gnuplot strings are single-quoted: drop quotes from titles rather than escape them.
static void put_quoted(FILE *fp, const char *s)
{
    fputc('\'', fp);
    for (; s && *s; s++) {
        if (*s != '\'' && *s != '\\' && *s != '\n') {
            fputc(*s, fp);
        }
    }
    fputc('\'', fp);
}

// Inline data take double-quoted strings (a label may hold spaces: "64.0 MiB").
static void put_data_label(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; s && *s; s++) {
        if (*s != '"' && *s != '\\' && *s != '\n') {
            fputc(*s, fp);
        }
    }
    fputc('"', fp);
}

static gt_err plot_open(FILE **fp, char *tmp, size_t cap, const char *png_path,
                        const gt_plot_style *st)
{
    GT_ENSURE(gnuplot_available(), GT_E_UNSUPPORTED,
              "gnuplot is not installed (apt-get install gnuplot-nox): %s not drawn", png_path);
    int n = snprintf(tmp, cap, "%s.tmp-%d", png_path, (int)getpid());
    GT_ENSURE(n > 0 && (size_t)n < cap, GT_E_LIMIT, "plot: path too long");
    *fp = popen("gnuplot 2>/dev/null", "w");
    GT_ENSURE(*fp != NULL, GT_E_IO, "plot: cannot start gnuplot: %s", strerror(errno));
    fprintf(*fp, "set terminal pngcairo size 960,600 noenhanced font 'sans,11'\n");
    fprintf(*fp, "set output ");
    put_quoted(*fp, tmp);
    fprintf(*fp, "\nset title ");
    put_quoted(*fp, st->title);
    fprintf(*fp, "\nset xlabel ");
    put_quoted(*fp, st->xlabel);
    fprintf(*fp, "\nset ylabel ");
    put_quoted(*fp, st->ylabel);
    fprintf(*fp, "\nset grid\nset key outside right top\n");
    if (st->log_y) {
        fprintf(*fp, "set logscale y\n");
    }
    return GT_OK;
}

static gt_err plot_close(FILE *fp, const char *tmp, const char *png_path)
{
    int status = pclose(fp);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        unlink(tmp);
        return gt_errf(GT_E_IO, "plot: gnuplot failed drawing %s", png_path);
    }
    if (rename(tmp, png_path) != 0) {
        gt_err err = gt_errf(GT_E_IO, "plot: %s: %s", png_path, strerror(errno));
        unlink(tmp);
        return err;
    }
    return GT_OK;
}

gt_err gt_plot_lines(const char *png_path, const gt_plot_style *style,
                     const gt_plot_series *series, size_t nseries)
{
    GT_ENSURE(nseries > 0, GT_E_ARG, "plot: no series");
    FILE *fp = NULL;
    char tmp[4200];
    GT_TRY(plot_open(&fp, tmp, sizeof tmp, png_path, style));
    fprintf(fp, "plot ");
    for (size_t s = 0; s < nseries; s++) {
        fprintf(fp, "%s'-' using 1:2 with %s lw 2 title ", s ? ", " : "",
                style->points ? "linespoints" : "lines");
        put_quoted(fp, series[s].name);
    }
    fputc('\n', fp);
    for (size_t s = 0; s < nseries; s++) {
        for (size_t i = 0; i < series[s].n; i++) {
            fprintf(fp, "%.9g %.9g\n", series[s].x[i], series[s].y[i]);
        }
        fprintf(fp, "e\n");
    }
    return plot_close(fp, tmp, png_path);
}

gt_err gt_plot_bars(const char *png_path, const gt_plot_style *style,
                    const char *const *group_labels, size_t ngroups,
                    const char *const *series_names, size_t nseries, const double *values,
                    const double *lo, const double *hi)
{
    GT_ENSURE(nseries > 0 && ngroups > 0, GT_E_ARG, "plot: no bars");
    FILE *fp = NULL;
    char tmp[4200];
    GT_TRY(plot_open(&fp, tmp, sizeof tmp, png_path, style));
    bool errors = lo != NULL && hi != NULL;
    fprintf(fp, "set style data histogram\nset style histogram %s gap 1\n",
            errors ? "errorbars lw 1" : "clustered");
    fprintf(fp, "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset yrange [0:*]\n");
    fprintf(fp, "plot ");
    for (size_t s = 0; s < nseries; s++) {
        fprintf(fp, "%s'-' using 2%s:xtic(1) title ", s ? ", " : "", errors ? ":3:4" : "");
        put_quoted(fp, series_names[s]);
    }
    fputc('\n', fp);
    for (size_t s = 0; s < nseries; s++) {
        for (size_t g = 0; g < ngroups; g++) {
            put_data_label(fp, group_labels[g]);
            size_t i = s * ngroups + g;
            if (errors) {
                fprintf(fp, " %.9g %.9g %.9g\n", values[i], lo[i], hi[i]);
            } else {
                fprintf(fp, " %.9g\n", values[i]);
            }
        }
        fprintf(fp, "e\n");
    }
    return plot_close(fp, tmp, png_path);
}
