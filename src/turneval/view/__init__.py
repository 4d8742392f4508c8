"""``turneval view``: a local web app over the run store (runs, rows, conversations, labels).

``create_app(store)`` is the Starlette application; ``serve(...)`` runs it on uvicorn.
Server-rendered pages and a little inline JavaScript, nothing loaded from the network. Needs
the ``view`` extra (and the ``store`` extra).
"""

from turneval.view._app import create_app
from turneval.view._serve import serve

__all__ = ["create_app", "serve"]
