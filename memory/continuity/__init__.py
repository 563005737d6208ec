"""Continuity: the preamble a new session is handed, from the prior sessions that matter.

One way through, each stage importing only what came before it:

- ``data``: the values every stage shares (the typed knobs, a candidate as read);
- ``read``: every query (the candidates with their features and summaries, the terms
  their words hold, the pins), returning plain data;
- ``decide``: the scores and the choices, pure (no query, no model);
- ``render``: the preamble's text from the decision, pure;
- ``record``: the inherited pins and the record of the answer, written.

``memory.services.continuity`` runs them in that order for a request.
"""
