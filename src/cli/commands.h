// The subcommand table: GT_CLI_COMMAND(name, one-line summary), in the order `--help` lists them.
// Each entry has its cmd_<name>.c. (No include guard: cli.h and main.c expand it differently.)
GT_CLI_COMMAND(version, "print the version and build configuration")
GT_CLI_COMMAND(attest, "collect evidence (sim, or tdx/snp via configfs-tsm) bound to report_data")
GT_CLI_COMMAND(verify, "verify and appraise evidence: exit 0 accepted, 1 rejected, 2 invalid")
GT_CLI_COMMAND(train, "train GPT-2 on llm.c shards (llm.c checkpoints, resumable)")
GT_CLI_COMMAND(sample, "generate tokens from a GPT-2 checkpoint")
GT_CLI_COMMAND(devd, "run the emulated confidential GPU (sim device) on a Unix socket")
