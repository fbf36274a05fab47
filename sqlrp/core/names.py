"""Names sqlrp makes for its own short-lived tables and views: one generator, so that every scratch
object is recognisable (``_sqlrp_`` and what it is for) and never collides with a user's name."""

from __future__ import annotations

import uuid

PREFIX = "_sqlrp_"


def scratch_name(kind: str) -> str:
    """``_sqlrp_{kind}_{12 hex digits}``: a fresh name for a staging table, a registered frame, a
    calibration sample... (``kind`` says which, for whoever finds one left by a killed process)."""
    return f"{PREFIX}{kind}_{uuid.uuid4().hex[:12]}"
