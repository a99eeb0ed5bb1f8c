"""Mutual TLS: which certificates a process uses and what a peer's lets it do (`config`,
`roles`), TLS over a socket stream for task-style bindings (`stream`), and
``dista certs`` (`certs`).
"""
