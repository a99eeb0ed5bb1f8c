"""The roles on any loop: an `engine.Engine` holds one sans-IO core and carries out its
decisions; `head`, `worker`, `driver` and `observer` are engines that feed their core what
only they know. `join` joins a cluster from blocking code; `wait` waits for a head not
there yet; `reconnect` reaches a lost head again; `liveness` reads the recovery settings;
`timer` keeps a core's pulled timer.
"""
