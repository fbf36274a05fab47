"""Print constraints.txt: the installed version of every package ``sqlrp[test]`` needs, as ``name==version``.

CI installs with ``pip install -c constraints.txt '.[test]'`` so that its verdict (and the fuzzer's fixed,
derandomized examples, which depend on the installed hypothesis) never moves with the day's releases.
After a deliberate upgrade (``pip install -U '.[test]'``, the suite green): ``python .ci/pins.py > constraints.txt``.
"""

from __future__ import annotations

import importlib.metadata as md
import re

from packaging.markers import default_environment
from packaging.requirements import Requirement


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str, extras: tuple[str, ...]) -> list[md.Distribution]:
    """The installed distributions ``root[extras]`` needs, transitively (markers evaluated here)."""
    installed = {_norm(d.metadata["Name"]): d for d in md.distributions()}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    todo = [(_norm(root), extras)]
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen or name not in installed:
            continue
        seen.add((name, wanted))
        for text in installed[name].requires or []:
            req = Requirement(text)
            envs = [{**default_environment(), "extra": extra} for extra in ("", *wanted)]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((_norm(req.name), tuple(sorted(req.extras))))
    return sorted({installed[n] for n, _ in seen if n != _norm(root)}, key=lambda d: _norm(d.metadata["Name"]))


if __name__ == "__main__":
    print("# The versions CI installs (bash .ci/run: pip install -c constraints.txt '.[test]'): what the tests and")
    print("# the fuzzer's fixed examples were checked with, so a CI verdict never depends on the day's releases.")
    print("# Regenerate after a deliberate upgrade: pip install -U '.[test]' && python .ci/pins.py > constraints.txt")
    for dist in closure("sqlrp", ("test",)):
        print(f"{dist.metadata['Name']}=={dist.version}")
