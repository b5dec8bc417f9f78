"""One module per ``scalarlab`` subcommand.

Each module defines ``NAME`` (the subcommand), ``HELP`` (one line), ``add_arguments(parser)``
and ``run(args) -> int`` (the exit status).  ``experiments.cli`` discovers them, so adding
a command means adding one module here.
"""
