"""The user API: ``@task``, ``@actor``, refs, ``put``/``get``/``wait``, ``init`` and the
timeline, as ``import dista_runtime as dista`` gives them (the front re-exports them).
"""
