// Fuzz: the pager's untrusted store (docs/paging.md). Two buffers under a 4-page cap are paged
// out; the input then overwrites part of the store (byte 0: 0 = page 0's blob, 1 = the version
// tree, 2 = page 0's blob truncated to the input's length) and page 0 is faulted in. Whatever
// the store holds, the fault-in either refuses (GT_E_AUTH, the pager failed, nothing resident)
// or gives back exactly the bytes that were written; it never crashes.
#include <gputravel/device.h>

#include "device/pager_test.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PAGE 4096u
#define BUF (8u * PAGE)

static void must(bool cond)
{
    if (!cond) {
        __builtin_trap();
    }
}

static void tamper(gt_pager *pg, const uint8_t *data, size_t size)
{
    const char *pages = NULL, *tree = NULL;
    gt_pager_test_paths(pg, &pages, &tree);
    int fd = open(data[0] == 1 ? tree : pages, O_WRONLY);
    must(fd >= 0);
    if (data[0] == 2) {
        must(ftruncate(fd, (off_t)(size - 1)) == 0);
    } else {
        // tree: the input's next two bytes pick where it lands among the first 64 KiB
        size_t at = data[0] == 1 && size >= 3 ? ((size_t)data[1] << 8 | data[2]) : 0;
        size_t skip = data[0] == 1 && size >= 3 ? 3 : 1;
        must(pwrite(fd, data + skip, size - skip, (off_t)at) == (ssize_t)(size - skip));
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 2 * PAGE || data[0] > 2) {
        return 0;
    }
    char dir[] = "/tmp/fuzz-pager-XXXXXX";
    must(mkdtemp(dir) != NULL);
    gt_buftab *tab = NULL;
    gt_buftab_config tc = {0};
    must(gt_is_ok(gt_buftab_new(&tab, &tc)));
    gt_pager *pg = NULL;
    gt_pager_config pc = {.cap = 4 * PAGE, .virt = 2 * BUF, .page_bytes = PAGE,
                          .store_dir = dir, .tab = tab};
    must(gt_is_ok(gt_pager_new(&pg, &pc)));
    static uint8_t pattern[BUF];
    memset(pattern, 0xa5, sizeof pattern);
    uint64_t off[2];
    for (int i = 0; i < 2; i++) {
        gt_dbuf h = 0;
        gt_buftab_entry *e = NULL;
        must(gt_is_ok(gt_buftab_alloc(tab, BUF, 0, 0, &h, &e)));
        must(gt_is_ok(gt_pager_place(pg, h, 0, BUF, &off[i])));
        for (uint64_t p = 0; p < BUF; p += PAGE) {
            must(gt_is_ok(gt_pager_hold(pg, off[i] + p, PAGE, true)));
            memcpy(gt_pager_base(pg) + off[i] + p, pattern, PAGE);
        }
    }
    tamper(pg, data, size);
    gt_err e = gt_pager_hold(pg, off[0], PAGE, false);
    gt_pager_stats st;
    gt_pager_stats_get(pg, &st);
    if (gt_is_ok(e)) {
        must(memcmp(gt_pager_base(pg) + off[0], pattern, PAGE) == 0);
    } else {
        must(e.code == GT_E_AUTH && gt_pager_failed(pg) && st.resident_bytes == 0);
    }
    gt_pager_free(pg);
    gt_buftab_free(tab);
    rmdir(dir);
    return 0;
}
