"""The dashboard's web side: the `Board` a watcher feeds with the head's snapshots, and the
server (`serve`) that shows it live in a browser, as JSON and as Prometheus metrics.

    board = Board()
    server = serve(board, "127.0.0.1", 8265, ssl_context)   # then board.update(...) from a watcher
"""

from .board import Board, Row
from .server import Server, serve

__all__ = ["Board", "Row", "Server", "serve"]
