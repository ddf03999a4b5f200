// util/: plots are real PNG files when gnuplot exists, and nothing is left behind otherwise.
#include "testlib.h"

#include <stdlib.h>
#include <string.h>

static void lines_and_bars_make_pngs(void **state)
{
    (void)state;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        skip();
    }
    char dir[256], lines[512], bars[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(lines, sizeof lines, dir, "loss.png"));
    GT_ASSERT_OK(gt_path_join(bars, sizeof bars, dir, "bars.png"));
    double x[5] = {1, 2, 3, 4, 5}, y[5] = {5.5, 4.1, 3.2, 2.9, 2.7};
    gt_plot_series s[2] = {{"train", x, y, 5}, {"it's val", x, y, 3}};
    gt_plot_style st = {.title = "loss", .xlabel = "step", .ylabel = "loss"};
    GT_ASSERT_OK(gt_plot_lines(lines, &st, s, 2));
    const char *groups[] = {"64.0 MiB", "512 \"M\""}, *names[] = {"conventional", "travel"};
    double v[4] = {1.0, 8.0, 0.2, 1.6}, lo[4] = {0.9, 7.5, 0.1, 1.5}, hi[4] = {1.1, 8.5, 0.3, 1.7};
    GT_ASSERT_OK(gt_plot_bars(bars, &st, groups, 2, names, 2, v, lo, hi));
    GT_ASSERT_OK(gt_plot_bars(bars, &st, groups, 2, names, 2, v, NULL, NULL));
    const char *pngs[] = {lines, bars};
    for (int i = 0; i < 2; i++) {
        gt_buf b = {0};
        GT_ASSERT_OK(gt_file_read_all(pngs[i], 10 << 20, &b));
        assert_true(b.len > 1000);
        assert_memory_equal(b.data, "\x89PNG", 4);
        gt_buf_free(&b);
    }
    assert_int_equal(gt_test_count_files(dir), 2);  // no temporary files left
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lines_and_bars_make_pngs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
