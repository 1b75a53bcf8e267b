"""The online roles' contracts: what the controller, the selector and the writer take and
return (``PlanIntent``, ``Candidate``, ``CandidateEntry``), their protocols, and the
model-free defaults that stand in when no model is configured. ``tiermem.slm.roles`` holds the
model-backed implementations; ``tiermem.pipeline`` runs whichever is configured. This package
imports neither, so the three never form an import cycle."""
