"""Reading Dash component trees in tests (what a callback returned, without a browser)."""

from __future__ import annotations

from typing import Any


def text(component: Any) -> str:
    """All text in a Dash component tree."""
    if component is None or isinstance(component, (bool, int, float)):
        return "" if component is None or isinstance(component, bool) else str(component)
    if isinstance(component, str):
        return component
    if isinstance(component, (list, tuple)):
        return " ".join(text(c) for c in component)
    return text(getattr(component, "children", None))


def find(component: Any, component_id: Any) -> Any:
    """The component with this id in a tree (None if absent)."""
    if isinstance(component, (list, tuple)):
        for c in component:
            hit = find(c, component_id)
            if hit is not None:
                return hit
        return None
    if not hasattr(component, "_prop_names"):  # not a Dash component
        return None
    if getattr(component, "id", None) == component_id:
        return component
    return find(getattr(component, "children", None), component_id)
