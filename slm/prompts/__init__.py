"""One module per SLM task: output schema, prompt builder, version. ``training/`` renders
examples from the same modules, so serving and training cannot drift."""
