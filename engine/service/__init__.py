"""``tiermem serve``: one process owns the memory's stores and serves it over HTTP to any
number of clients (``tiermem.remote.RemoteMemory``), each tenant by its API key.

This package imports FastAPI only where the app is built (``tiermem.service.app``): the wire
format (``tiermem.service.wire``) and the error codes (``tiermem.service.codes``) are shared
with the client, which needs only httpx and pydantic.

``/inspect`` is the inspector page (``tiermem.service.page``) over ``/v1`` and
``/v1/inspect`` (``tiermem.service.inspect_api``); ``tiermem inspect DATA_DIR`` serves the
same app over an embedded directory, read-only (``tiermem.service.embedded``).
"""
