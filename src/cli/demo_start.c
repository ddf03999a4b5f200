// gputravel demo, step 5: the emulated confidential GPU (devd) and the holders' agents start as
// processes (util's gt_proc), each logging to the work folder's logs/.
#include "demo.h"

#include <signal.h>

// Starts argv logging to log and waits until the log says "serving" (15 s at most). A child
// given a listener (NULL: none) inherits its socket.
static gt_err start_one(gt_proc *p, const char *log, char *const argv[], const char *what,
                        const gt_listener *l)
{
    int fd = l != NULL ? gt_listener_fd(l) : -1;
    gt_proc_spec spec = {.argv = argv, .log_path = log, .inherit_fds = &fd,
                         .inherit_count = l != NULL};
    GT_TRY(gt_proc_spawn(p, &spec));
    gt_proc_ready r = {.kind = GT_PROC_READY_LOG_LINE, .path = log, .text = "serving",
                       .timeout_ms = 15000, .what = what};
    gt_err e = gt_proc_wait_ready(p, &r);
    GT_ENSURE(gt_is_ok(e), e.code, "%s: see %s", e.msg, log);
    return GT_OK;
}

// One holder runs in enclave mode (docs/holder-enclave.md): its dataset key goes into the
// holder enclave, sealed under its MRSIGNER policy on an enclave platform of its own, and the
// plain key file is deleted; the holder then never holds it.
static gt_err enclave_holder_prepare(demo *d, demo_holder *h, char *platform, size_t cap)
{
    snprintf(platform, cap, "%s/enclave-platform-%s", d->dir, holder_names[DEMO_ENCLAVE_HOLDER]);
    say(d, "    holder %s runs in enclave mode: its dataset key moves into the holder enclave\n"
           "    (built with the repository's SGX SDK, run by gputravel-enclave-process:\n"
           "    INSECURE SIMULATION, a process standing in for an enclave VM), sealed to the\n"
           "    enclave's MRSIGNER; %s/dataset.key is deleted.\n"
           "    Its release decisions run in the enclave, and chunk keys leave it only wrapped\n"
           "    to the attested devd.\n",
        holder_names[DEMO_ENCLAVE_HOLDER], h->keys);
    return gt_cli_holder_enclave_import(h->keys, NULL, platform, d->sim_root,
                                        d->quiet ? NULL : "    ");
}

gt_err demo_step_start(demo *d)
{
    step_begin(d, 5, "The emulated confidential GPU and the holders' agents start");
    char limit[32] = "512MiB", cap[32];
    char *devd_argv[] = {d->self, "devd", "--socket", d->socket, "--mem-limit", limit,
                         NULL, NULL, NULL};
    if (d->mem_limit != 0) {  // paging: the store is host storage, which devd does not trust
        snprintf(limit, sizeof limit, "%llu", (unsigned long long)d->mem_limit);
        snprintf(d->paging, sizeof d->paging, "%s/paging", d->dir);
        GT_TRY(gt_rmtree_below(d->paging, d->dir));  // an earlier demo's store
        GT_TRY(gt_mkdir_p(d->paging, 0700));
        devd_argv[6] = "--paging-store";
        devd_argv[7] = d->paging;
    }
    GT_TRY(start_one(&d->devd, d->devd_log, devd_argv, "devd", NULL));
    gt_format_size(cap, sizeof cap, d->mem_limit != 0 ? d->mem_limit : 512ull << 20);
    say(d, "    devd (pid %d): %s of device memory reserved, identity key certified by the\n"
           "    simulated vendor root; reachable only through attested, encrypted sessions.\n",
        (int)d->devd.pid, cap);
    if (d->mem_limit != 0) {
        say(d, "    Paging: the model, its optimizer state and the chunks may exceed those %s.\n"
               "    Cold pages leave protected memory only sealed (AES-256-GCM under a key of\n"
               "    this device session, their versions in a hash tree whose root stays inside),\n"
               "    into %s: host storage, trusted for nothing.\n",
            cap, d->paging);
    }
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        // Each holder's ledger head is anchored in a TPM counter: a software TPM here, standing
        // in for its confidential VM's vTPM.
        char tpm_dir[4200], tpm_log[4300];
        snprintf(tpm_dir, sizeof tpm_dir, "%s/tpm-%s", d->dir, holder_names[i]);
        snprintf(tpm_log, sizeof tpm_log, "%s/logs/swtpm-%s.log", d->dir, holder_names[i]);
        int tpm_port = 0;
        gt_err t = gt_rollback_swtpm_start(tpm_dir, tpm_log, &h->tpm, &tpm_port, h->tpm_spec,
                                           sizeof h->tpm_spec);
        if (!gt_is_ok(t)) {
            snprintf(h->tpm_spec, sizeof h->tpm_spec, "none");
            say(d, "    (no software TPM for %s: %s; its ledger is not anchored)\n",
                holder_names[i], t.msg);
        }
        char listen[32];
        snprintf(listen, sizeof listen, "fd:%d", gt_listener_fd(h->listener));
        char *argv[] = {d->self, "holder", "--dataset", h->dataset, "--key", h->keys,
                        "--agreement", d->agreement_path, "--policy", d->policy,
                        "--ledger", h->ledger, "--root", d->root_pub,
                        "--rollback-guard", h->tpm_spec, "--listen", listen,
                        NULL, NULL, NULL, NULL, NULL};
        char platform[4200];
        if (i == DEMO_ENCLAVE_HOLDER && d->transfer == GT_TRANSFER_TRAVEL) {
            GT_TRY(enclave_holder_prepare(d, h, platform, sizeof platform));
            argv[18] = "--enclave-platform";
            argv[19] = platform;
            argv[20] = "--sim-root";
            argv[21] = d->sim_root;
        }
        GT_TRY(start_one(&h->proc, h->log, argv, holder_names[i], h->listener));
        gt_listener_close(h->listener);  // the agent serves on its own copy
        h->listener = NULL;
        say(d, "    holder %-9s (pid %d) serves on 127.0.0.1:%d, ledger %s%s\n", holder_names[i],
            (int)h->proc.pid, h->port, h->ledger,
            gt_is_ok(t) ? ", its head anchored in a TPM counter (swtpm)" : "");
    }
    step_end(d);
    return GT_OK;
}

void demo_stop_processes(demo *d)
{
    // SIGTERM to all first, so that they wind down side by side; then each is reaped.
    gt_proc *procs[HOLDERS + 1] = {&d->devd};
    for (int i = 0; i < HOLDERS; i++) {
        procs[i + 1] = &d->h[i].proc;
    }
    for (int i = 0; i <= HOLDERS; i++) {
        if (procs[i]->pid > 0) {
            kill(procs[i]->pid, SIGTERM);
        }
    }
    for (int i = 0; i <= HOLDERS; i++) {
        gt_proc_stop(procs[i], 30000);
    }
    // The TPMs last: a holder's close may still increment its counter.
    for (int i = 0; i < HOLDERS; i++) {
        gt_listener_close(d->h[i].listener);  // a holder that never started
        d->h[i].listener = NULL;
        if (d->h[i].tpm.pid > 0) {
            gt_proc_stop(&d->h[i].tpm, 5000);
        }
    }
}
