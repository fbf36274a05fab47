"""Names sqlrp makes for its own short-lived tables and views: one generator, so that every scratch
object is recognisable (``_sqlrp_`` and what it is for) and never collides with a user's name.

A scratch name carries the process that made it (its id, and a tag of its host): a process killed with a
scratch table still in the database (OOM killer, ``kill -9``, a power cut) leaves it behind, and the next
command that writes there drops it (:func:`sqlrp.backends.staging.sweep_scratch_tables`) -- only if it
is this host's and that process is gone, so a live writer's table, here or on another machine sharing
the database, is never taken (issue 42)."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import uuid

PREFIX = "_sqlrp_"

#: ``_sqlrp_{kind}_{pid}_{host}_{12 hex}``: what it is for, whose it is, unique
_SCRATCH = re.compile(r"^_sqlrp_(?P<kind>[a-z]+)_(?P<pid>\d+)_(?P<host>[0-9a-f]{6})_[0-9a-f]{12}$")


def host_tag() -> str:
    """Six hex digits naming this machine (a digest of its host name): short enough for any engine's
    identifier limit, and the same for every process here."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


def scratch_name(kind: str) -> str:
    """``_sqlrp_{kind}_{pid}_{host}_{12 hex digits}``: a fresh name for a staging table, a registered
    frame, a calibration sample... (``kind`` says which, the process id and host tag whose it is, for
    whoever finds one left by a killed process)."""
    return f"{PREFIX}{kind}_{os.getpid()}_{host_tag()}_{uuid.uuid4().hex[:12]}"


def alive(pid: int) -> bool:
    """Whether the process ``pid`` of this machine is running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except (OverflowError, ValueError):
        return False
    return True


def orphaned(name: str, mine: bool = False) -> bool:
    """True if ``name`` is a scratch name (:func:`scratch_name`) made on this host by a process that is no
    longer running (or, with ``mine``, by this one: a cleanup an interrupt cut short).  Another host's,
    a live process's and any other name: False."""
    found = _SCRATCH.match(name)
    if not found or found["host"] != host_tag():
        return False
    pid = int(found["pid"])
    return (mine and pid == os.getpid()) or (pid != os.getpid() and not alive(pid))
