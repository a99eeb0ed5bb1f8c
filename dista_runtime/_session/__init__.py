"""A driver's view of the cluster (also a task's, on a worker): its `session.Session` of
objects and waiters, its actors (`driver_actors`), the process's current session
(`context`), and ``await ref`` on whatever loop the caller runs (`awaiting`).
"""
