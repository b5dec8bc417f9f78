"""The ``scalarlab`` command line and the experiment scripts (the only package that prints)."""
