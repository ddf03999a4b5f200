// Internal to orchestr/: what trip.c needs of a holder connection (fetch.c owns it).
#ifndef GT_ORCHESTR_INTERNAL_H
#define GT_ORCHESTR_INTERNAL_H

#include <gputravel/orchestr.h>

gt_channel *gt_holder_conn_channel(gt_holder_conn *c);
const char *gt_holder_conn_name(const gt_holder_conn *c);

#endif
