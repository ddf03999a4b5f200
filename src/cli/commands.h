// The subcommand table: GT_CLI_COMMAND(name, one-line summary), in the order `--help` lists them.
// Each entry has its cmd_<name>.c ('_' in a name is typed '-'). (No include guard: cli.h and
// main.c expand it differently.)
GT_CLI_COMMAND(demo, "end-to-end demo: corpus, shards, keys, seal, verify, unseal")
GT_CLI_COMMAND(tokenize, "tokenize text files byte-level into an llm.c token shard")
GT_CLI_COMMAND(keygen, "create a holder key folder: Ed25519 identity and dataset key")
GT_CLI_COMMAND(seal, "seal llm.c shards into a signed, encrypted, chunked dataset")
GT_CLI_COMMAND(inspect, "show a sealed dataset's manifest (no key needed)")
GT_CLI_COMMAND(verify_dataset, "check a sealed dataset's signature and every chunk (no key needed)")
GT_CLI_COMMAND(unseal, "decrypt a sealed dataset into one llm.c shard")
GT_CLI_COMMAND(ledger, "verify or show a holder's hash-chained decision ledger")
GT_CLI_COMMAND(version, "print the version and build configuration")
GT_CLI_COMMAND(train, "train GPT-2 on llm.c shards (llm.c checkpoints, resumable)")
GT_CLI_COMMAND(sample, "generate tokens from a GPT-2 checkpoint")
