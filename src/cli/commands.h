// The subcommand table: GT_CLI_COMMAND(name, one-line summary), in the order `--help` lists them.
// Each entry has its cmd_<name>.c. (No include guard: cli.h and main.c expand it differently.)
GT_CLI_COMMAND(version, "print the version and build configuration")
GT_CLI_COMMAND(tokenize, "tokenize text files byte-level into an llm.c token shard")
GT_CLI_COMMAND(ledger, "verify or show a holder's hash-chained decision ledger")
