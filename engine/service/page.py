"""The inspector page: ``GET /inspect``, one static HTML page with its script and style,
shipped as package data (``tiermem/service/static``), no build step.

The page holds no data and needs no key to load: like ``/docs``, it is the same for every
deployment. Everything it shows it fetches from ``/v1`` with the API key the user gives it
(kept in the tab's ``sessionStorage``, sent as ``Authorization: Bearer``), so the gate,
the tenancy and the limits of ``/v1`` apply to it unchanged. Its content security policy
lets it run only its own script and talk only to its own origin; the script writes every
value as text, never as HTML, so a memory's text cannot run in the page.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import Response
from starlette.exceptions import HTTPException

PAGE_PATH = "/inspect"
_ASSETS = {
    "inspect.html": "text/html; charset=utf-8",
    "inspect.js": "text/javascript; charset=utf-8",
    "inspect.css": "text/css; charset=utf-8",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _asset(name: str) -> Response:
    body = files("tiermem.service").joinpath("static", name).read_bytes()
    return Response(body, media_type=_ASSETS[name], headers=_HEADERS)


def page_router() -> APIRouter:
    """``/inspect`` and its two assets, read once from the package."""
    pages = {name: _asset(name) for name in _ASSETS}
    router = APIRouter(include_in_schema=False)

    @router.get(PAGE_PATH)
    def inspect_page() -> Response:
        return pages["inspect.html"]

    @router.get(PAGE_PATH + "/{name}")
    def inspect_asset(name: str) -> Response:
        if name not in pages or name == "inspect.html":
            raise HTTPException(404, "no such page")
        return pages[name]

    return router
