"""One module per CLI command; each exposes ``main(cfg, args) -> int``."""
