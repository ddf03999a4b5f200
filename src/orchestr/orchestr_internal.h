// Internal to orchestr/: what trip.c needs of a holder connection (fetch.c owns it).
#ifndef GT_ORCHESTR_INTERNAL_H
#define GT_ORCHESTR_INTERNAL_H

#include <gputravel/orchestr.h>

gt_channel *gt_holder_conn_channel(gt_holder_conn *c);
const char *gt_holder_conn_name(const gt_holder_conn *c);
// A REFUSE body (u32le code | text) as GT_E_POLICY "holder NAME refused: text".
GT_MUST_USE gt_err gt_holder_conn_refused(const gt_buf *body, const char *holder);

#endif
