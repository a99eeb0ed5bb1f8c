"""The embedded local cluster: its workers as child processes (`local_cluster`), kept
alive by a supervisor (`supervise`) that also runs ``dista worker --processes N``.
"""
