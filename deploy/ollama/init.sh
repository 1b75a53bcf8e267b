#!/bin/sh
# One shot (compose service ollama-init): pull the selector's base model, create
# tiermem-selector, and pull the embedding model ($EMBEDDER, the [embedder] model of
# deploy/tiermem.toml.example) on the Ollama server at $OLLAMA_HOST.
#
# The model is built from Modelfile.selector, which `tiermem train selector --ollama-from ...`
# writes: FROM the base the LoRA was trained on, ADAPTER ./adapter.gguf (a path relative to
# the Modelfile, so adapter.gguf must sit beside it in deploy/ollama/). Without the adapter the
# script stops with an error, unless TIERMEM_SELECTOR_BASE_ONLY=1 asks for the untuned base
# under the same name (a first bring-up before training; the pointwise fusion bounds what a
# weak model can do to the first-stage order, see slm.pointwise_weight).
set -eu

DIR=${MODELS_DIR:-/models} # where compose mounts deploy/ollama
MODELFILE=$DIR/Modelfile.selector
ADAPTER=$DIR/adapter.gguf
NAME=tiermem-selector
EMBEDDER=nomic-embed-text

BASE=$(sed -n 's/^FROM[[:space:]]\{1,\}//p' "$MODELFILE" | head -n 1)
if [ -z "$BASE" ]; then
    echo "ollama-init: $MODELFILE has no FROM line" >&2
    exit 1
fi

echo "ollama-init: pulling $BASE"
ollama pull "$BASE"

if [ -f "$ADAPTER" ]; then
    echo "ollama-init: creating $NAME from $MODELFILE"
    ollama create "$NAME" -f "$MODELFILE"
elif [ "${TIERMEM_SELECTOR_BASE_ONLY:-0}" = "1" ]; then
    echo "ollama-init: WARNING: no $ADAPTER; $NAME is the untuned base $BASE" >&2
    BASE_ONLY=$(mktemp)
    printf 'FROM %s\nPARAMETER temperature 0\nPARAMETER num_predict 1\n' "$BASE" >"$BASE_ONLY"
    ollama create "$NAME" -f "$BASE_ONLY"
    rm -f "$BASE_ONLY"
else
    echo "ollama-init: no $ADAPTER. Train and export the selector (see $MODELFILE), copy" >&2
    echo "  adapter.gguf into deploy/ollama/, or set TIERMEM_SELECTOR_BASE_ONLY=1 in" >&2
    echo "  deploy/.env to serve the untuned base as $NAME for now." >&2
    exit 1
fi

echo "ollama-init: pulling the embedder $EMBEDDER"
ollama pull "$EMBEDDER"

ollama show "$NAME" >/dev/null
echo "ollama-init: $NAME is ready"
