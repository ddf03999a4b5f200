// gputravel-enclave-process FD: the enclave process (INSECURE SIMULATION of an SGX enclave),
// started by the host (gt_enclave_start, `gputravel enclave run`), never by hand: it serves one
// enclave over the socket FD (docs/enclave.md "Running enclaves"). The wrap leaf appraises the
// device it wraps to with travel's appraiser (agreement and device evidence parsers live there).
#include <gputravel/enclave.h>
#include <gputravel/travel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: gputravel-enclave-process FD\n"
                "The enclave process of `gputravel enclave run` (insecure-simulation): it loads,\n"
                "measures and EINIT-checks the enclave the host sends over the socket FD, then\n"
                "serves its ECALLs. Started by the host, not by hand.\n");
        return argc == 2 ? 0 : 2;
    }
    char *end = NULL;
    long fd = strtol(argv[1], &end, 10);
    if (*argv[1] == '\0' || *end != '\0' || fd < 0 || fd > 1024) {
        fprintf(stderr, "gputravel-enclave-process: FD must be a file descriptor number\n");
        return 2;
    }
    // The vendor root the wrap leaf appraises devices under: the sim root the host started this
    // process with (insecure-simulation: a real one would be the device vendor's, built in).
    const char *sim_root = getenv("GT_SIM_ROOT");
    if (sim_root != NULL && sim_root[0] != '\0' && !gt_is_ok(gt_sim_root_set(sim_root))) {
        fprintf(stderr, "gputravel-enclave-process: GT_SIM_ROOT %s is not usable\n", sim_root);
    }
    gt_enclave_set_wrap_appraiser(gt_release_wrap_appraise);
    return gt_enclave_process_main((int)fd);
}
