// Test hooks into the pager (device/pager.c): where its untrusted store is, so that tests can
// attack it. Not part of the device API; nothing but tests includes this.
#ifndef GT_DEVICE_PAGER_TEST_H
#define GT_DEVICE_PAGER_TEST_H

#include <gputravel/device.h>

// A cpu device's pager (NULL: not paging, or another backend).
gt_pager *gt_device_test_pager(gt_device *dev);
// The store's two files: sealed pages (page p's blob, ciphertext || tag, at
// gt_pager_test_blob_at(p)) and the version tree.
void gt_pager_test_paths(const gt_pager *pg, const char **pages, const char **tree);
uint64_t gt_pager_test_blob_at(const gt_pager *pg, uint64_t page);
uint64_t gt_pager_test_blob_bytes(const gt_pager *pg);  // page bytes + tag
// The arena page holding byte `offset` of the buffer at arena offset buf_off (what
// gt_pager_place returned; cpu: the entry's host pointer minus gt_pager_base).
uint64_t gt_pager_test_page_of(const gt_pager *pg, uint64_t arena_off);

#endif
