// gputravel demo, step 1: three holders' text (the fortunes databases, dealt out by file).
#include "demo.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char builtin_text[] =
    "Three organisations kept text that none of them could show the others: a hospital its\n"
    "discharge notes, a bank its letters to customers, a laboratory its notebooks. Together\n"
    "they wanted one language model. Each sealed its text under its own keys, and a\n"
    "confidential accelerator travelled to each of them in turn, took on one chunk at a\n"
    "time inside its protected memory, and carried nothing home but what the training\n"
    "agreement allowed.\n";

static int text_file(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    bool dat = n > 4 && strcmp(e->d_name + n - 4, ".dat") == 0;
    bool u8 = n > 3 && strcmp(e->d_name + n - 3, ".u8") == 0;
    return e->d_name[0] != '.' && !dat && !u8;
}

// Deals the fortune files out to the holders in turn, so each has its own topics.
static gt_err corpus_from_fortunes(demo *d)
{
    struct dirent **names = NULL;
    int n = scandir(FORTUNE_DIR, &names, text_file, alphasort);
    GT_ENSURE(n > 0, GT_E_NOTFOUND, "%s: no fortune files", FORTUNE_DIR);
    gt_err err = GT_OK;
    int files[HOLDERS] = {0}, dealt = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (gt_is_ok(err) && gt_is_ok(gt_path_join(path, sizeof path, FORTUNE_DIR,
                                                   names[i]->d_name)) &&
            lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (16 << 20)) {
            demo_holder *h = &d->h[dealt % HOLDERS];
            gt_buf one = {0};
            err = gt_file_read_all(path, 16u << 20, &one);
            if (gt_is_ok(err)) {
                err = gt_buf_append(&h->text, one.data, one.len);
                size_t used = strlen(h->from);
                snprintf(h->from + used, sizeof h->from - used, "%s%s", used ? ", " : "",
                         names[i]->d_name);
                files[dealt % HOLDERS]++;
                dealt++;
            }
            gt_buf_free_nowipe(&one);
        }
        free(names[i]);
    }
    free(names);
    GT_TRY(err);
    GT_ENSURE(files[HOLDERS - 1] > 0, GT_E_NOTFOUND, "too few fortune files");
    return GT_OK;
}

gt_err demo_step_corpus(demo *d)
{
    step_begin(d, 1, "Three data holders, each with private text");
    if (!gt_is_ok(corpus_from_fortunes(d))) {
        for (int i = 0; i < HOLDERS; i++) {
            gt_buf_free_nowipe(&d->h[i].text);
            for (int r = 0; r < 600; r++) {
                GT_TRY(gt_buf_append(&d->h[i].text, builtin_text, sizeof builtin_text - 1));
            }
            snprintf(d->h[i].from, sizeof d->h[i].from,
                     "built-in text (install fortunes for a richer corpus)");
        }
    }
    for (int i = 0; i < HOLDERS; i++) {
        char size[32];
        gt_format_size(size, sizeof size, d->h[i].text.len);
        say(d, "    %-9s %9s of text (%.60s%s)\n", holder_names[i], size, d->h[i].from,
            strlen(d->h[i].from) > 60 ? "..." : "");
    }
    step_end(d);
    return GT_OK;
}
