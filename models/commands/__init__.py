"""The subcommands of ``minigrad``: one module each, with ``register(subparsers)``."""
