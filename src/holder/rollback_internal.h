// Private to holder/: the sim counter file's format, exposed for its fuzz target.
#ifndef GT_HOLDER_ROLLBACK_INTERNAL_H
#define GT_HOLDER_ROLLBACK_INTERNAL_H

#include <gputravel/util.h>

// The counter file holds exactly GT_SIM_COUNTER_PREFIX, the value in decimal (no leading zeros,
// at most 20 digits, fits 64 bits) and '\n'.
#define GT_SIM_COUNTER_PREFIX "gputravel insecure-simulation rollback counter "

GT_MUST_USE gt_err gt_sim_counter_parse(const uint8_t *data, size_t len, uint64_t *value);

#endif
