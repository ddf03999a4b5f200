// gputravel demo, step 7: every holder checks its ledger; the plots are drawn.
#include "demo.h"

#include <string.h>

// The enclave-mode holder's ledger names its enclave ("enclave" entry, docs/holder-enclave.md).
static void find_enclave(void *ctx, const char *kind, const cJSON *detail)
{
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(detail, "mrenclave"));
    if (kind != NULL && strcmp(kind, "enclave") == 0 && m != NULL) {
        snprintf(ctx, 65, "%s", m);
    }
}

gt_err demo_step_ledgers(demo *d, const gt_collab_report *rep)
{
    step_begin(d, 7, "Every holder checks its ledger; the plots are drawn");
    for (int i = 0; i < HOLDERS; i++) {
        gt_ledger_summary s;
        GT_TRY(gt_ledger_verify_file(d->h[i].ledger, d->h[i].k.holder_pub, NULL, &s));
        say(d, "    %-9s ledger verified: %llu signed, hash-chained entries "
               "(gputravel ledger show %s)\n",
            holder_names[i], (unsigned long long)s.entries, d->h[i].ledger);
        char mre[65] = "";
        if (i == DEMO_ENCLAVE_HOLDER && d->transfer == GT_TRANSFER_TRAVEL) {
            GT_TRY(gt_ledger_replay(d->h[i].ledger, d->h[i].k.holder_pub, find_enclave, mre));
            GT_ENSURE(mre[0] != '\0', GT_E_STATE, "demo: %s's ledger does not name its enclave",
                      holder_names[i]);
            say(d, "              its release decisions were made in holder enclave MRENCLAVE %.16s...\n"
                   "              (the ledger's \"enclave\" entry, insecure-simulation)\n", mre);
        }
    }
    // What the trainer kept: `gputravel inspect` names every file of its state folder, and
    // fails (exit 1) if one holds plaintext model data.
    say(d, "    The trainer's state folder (gputravel inspect %s):\n", d->state);
    int rc = gt_cli_inspect_state(d->state, d->quiet ? NULL : stdout);
    GT_ENSURE(rc == 0, GT_E_POLICY, "demo: the trainer's state folder %s holds plaintext model "
                                    "data (gputravel inspect)", d->state);
    char png[4200];
    snprintf(png, sizeof png, "%s/loss.png", d->dir);
    gt_plot_series ls = {"training loss", d->curve_x, d->curve_y, d->curve_n};
    gt_plot_style st = {.title = "gputravel demo: one GPT-2, three holders' data",
                        .xlabel = "step", .ylabel = "cross-entropy loss"};
    gt_err perr = d->curve_n ? gt_plot_lines(png, &st, &ls, 1) : gt_errf(GT_E_STATE, "no steps");
    if (gt_is_ok(perr)) {
        say(d, "    loss curve: %s\n", png);
    } else {
        say(d, "    (no loss plot: %s)\n", perr.msg);
    }
    const char *groups[HOLDERS];
    double mib[HOLDERS], rate[HOLDERS];
    for (int i = 0; i < HOLDERS; i++) {
        groups[i] = holder_names[i];
        const gt_collab_holder_report *h = &rep->holders[i];
        mib[i] = (double)h->bytes_moved / (1 << 20);
        rate[i] = h->transfer_seconds > 0 ? mib[i] / h->transfer_seconds : 0;
    }
    snprintf(png, sizeof png, "%s/transfer.png", d->dir);
    const char *series[] = {"MiB/s into device memory"};
    gt_plot_style ts = {.title = "chunk transfer rate by holder (loopback)", .xlabel = "holder",
                        .ylabel = "MiB/s"};
    perr = gt_plot_bars(png, &ts, groups, HOLDERS, series, 1, rate, NULL, NULL);
    if (gt_is_ok(perr)) {
        say(d, "    transfer plot: %s\n", png);
    }
    step_end(d);
    return GT_OK;
}
