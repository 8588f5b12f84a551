"""Which baselines compare mode may open, and the cached ``Comparison`` of each pair.

The browser only ever sends a *key* (a candidate's absolute path); the server opens a report
only if the key is one of ``candidates()``: the baseline the app was started with, or a report
directory (holding a tilescope manifest.json) one or two levels under the directory of a report
the app was started with. A path typed into the browser's storage is never opened.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from app import state
from app.comparison.comparison import Comparison
from report_format.ownership import read_own_manifest
from report_format.reader import ReportError
from report_format.vocabulary import Layer

#: At most this many candidates are listed (a huge directory must not stall the navbar).
MAX_CANDIDATES = 200


def candidates() -> dict[str, str]:
    """key (absolute path) -> label (path relative to the searched directory), active report excluded."""
    started = state.started_with()
    return _scan(started["active"], started["baseline"])


@lru_cache(maxsize=4)
def _scan(active: str | None, baseline: str | None) -> dict[str, str]:
    found: dict[str, str] = {}
    if baseline:
        found[baseline] = Path(baseline).name
    for given in (active, baseline):
        if not given:
            continue
        root = Path(given).parent
        for pattern in ("*/manifest.json", "*/*/manifest.json"):
            for manifest in sorted(root.glob(pattern)):
                key = str(manifest.parent.absolute())
                if key == active or key in found or len(found) >= MAX_CANDIDATES:
                    continue
                if read_own_manifest(manifest.parent) is not None:  # a report by its own manifest, not the name
                    found[key] = str(manifest.parent.relative_to(root))
    return found


def default_key() -> str | None:
    """The baseline given with ``serve --compare`` (compare mode starts on), else None."""
    return state.started_with()["baseline"]


def is_allowed(key: str | None) -> bool:
    return bool(key) and key in candidates()


def label(key: str) -> str:
    return candidates().get(key, Path(key).name)


def comparison(key: str, *, layer: str | None = Layer.POPLIBS, run: int | None = None) -> Comparison:
    """The comparison of the active report against baseline ``key`` (ValueError if not allowed)."""
    if not is_allowed(key):
        raise ValueError(f"not a baseline this viewer was started with: {key}")
    return _comparison(key, state.started_with()["active"], layer, run)


@lru_cache(maxsize=16)
def _comparison(key: str, active: str, layer: str | None, run: int | None) -> Comparison:
    return Comparison(state.load(key), state.load(active), layer=layer, run=run)


def load_error(key: str) -> str | None:
    """One line if baseline ``key`` cannot be opened, else None (the report is loaded and cached)."""
    try:
        state.load(key)
    except (ReportError, OSError) as exc:
        return f"cannot open baseline {label(key)}: {exc}"
    return None
