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
// With prefetch: each launch first waits until the worker has done what it can of its plan, so
// that counts of prefetch hits do not depend on how the two threads were scheduled.
void gt_pager_test_sync_prefetch(gt_pager *pg, bool on);
// Returns once the worker has nothing left to do in its plan (and nothing is moving).
void gt_pager_test_settle(gt_pager *pg);

#endif
