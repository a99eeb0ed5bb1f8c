"""The network and the loop: what a binding implements (`loop`), the streams and links an
engine writes and reads (`streams`, `sockets`, `memlink`), addresses, and the caps on
incoming connections (`limits`, `admission`).
"""
