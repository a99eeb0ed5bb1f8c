"""The parts of the ``dista`` command (`dista_runtime.cli` is its front): one module a
subcommand, and how a command's process runs (its loop, task modules, TLS flags).
"""
