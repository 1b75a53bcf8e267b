"""Embedders: one interface (``Embedder``), implementations chosen through ``build_embedder``."""

from tiermem.embedding.base import Embedder, EmbedMode
from tiermem.embedding.registry import build_embedder, register_embedder

__all__ = ["EmbedMode", "Embedder", "build_embedder", "register_embedder"]
