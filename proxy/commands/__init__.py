"""The `toolshim` subcommands other than serving: validate, probe, check, init.

The layer above the app: a command may build the app (validate runs the proxy in
process); nothing below imports a command."""
