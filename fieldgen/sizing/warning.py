"""The warning a build gives when the estimated error of its field exceeds the accuracy asked
(docs/model.md §2.10)."""

from __future__ import annotations

from fieldgen.fe.estimate import ErrorEstimate, error_percent, worst_error
from fieldgen.sizing.accuracy import MAX_TETS
from fieldgen.sizing.band import BAND_MAX_TETS
from fieldgen.sizing.skin_grading import SKIN_MAX_TETS


def accuracy_warning(estimate: ErrorEstimate, accuracy: float, sizing: dict | None, tets: int, *,
                     sized_by: str | None = None) -> list[str]:
    """A warning when the estimated error of the field exceeds ``accuracy`` (docs/cli.md, "Sized by
    accuracy"), with why: ``sizing`` is the asset's ``mesher.sizing`` (:meth:`SizedMesh.report`,
    ``stopped``; ``law`` when the mesh was sized for another law). The sizing stops at a tet
    budget, so a thin-walled part or a skin can end above what was asked. ``sized_by``: what
    sized a mesh the accuracy did not size, estimated on request (``--estimate``): ``"size"`` (an
    edge length or volume given) or ``"skin"`` (fTetWild under a skin, at half the skin). Empty
    when within it."""
    worst = worst_error(estimate)
    if worst <= accuracy:
        return []
    if sized_by is not None:
        given = sized_by == "size"
        mesh = "the size given" if given else "fTetWild's mesh under the skin (its edge half the skin)"
        return [f"estimated discretisation error {_errors(estimate, accuracy, tets)} "
                f"exceeds the accuracy asked, {100 * accuracy:g}%, on {mesh}: a smaller --edge-length "
                f"{'(or --max-volume) ' if given else ''}lowers it (P1's error falls about as the edge squared)"
                + (", and without a size the accuracy chooses the mesh" if given else "")]
    sizing = sizing or {}
    reasons = []
    if sizing.get("stopped") == "tet budget":
        budget = _budget(sizing)
        reasons.append(f"the sizing stopped at its tet budget (about {budget:,} tets to solve on"
                       + ("; its last refinement ended past it" if tets > budget else "") + ")")
    elif sizing.get("stopped") == "pass limit":
        reasons.append("the sizing stopped at its last pass")
    if "law" in sizing:
        reasons.append("the mesh was sized for the law before the fit (a starting law of the fitted "
                       "shape in the spec sizes it for this one)")
    return [f"estimated discretisation error {_errors(estimate, accuracy, tets)} "
            f"exceeds the accuracy asked, {100 * accuracy:g}%: {'; '.join(reasons) or 'the sizing stopped short'}; "
            "a larger accuracy (--accuracy, or `accuracy` in a spec) accepts it, an edge length "
            "(--edge-length, `edge_length`) chooses the mesh yourself"]


#: A mesh this many times its sizing's tet budget is warned of, the accuracy met or not.
OVER_BUDGET = 1.5


def budget_warning(sizing: dict | None, tets: int) -> list[str]:
    """A warning when the mesh the accuracy sized holds more than ``OVER_BUDGET`` times the sizing's
    tet budget (``sizing``: the asset's ``mesher.sizing``; None when not sized by accuracy): its
    first mesh, TetGen's within the input surface's own triangles (a dense scan's), already held
    them, and the asset is that much heavier to query. Empty otherwise."""
    if not sizing:
        return []
    budget = _budget(sizing)
    graded = {str(p.get("meshed_by")) for p in sizing.get("passes", [])}
    if any(kind.startswith("size field") or kind == "uniform edge" for kind in graded):
        budget = max(budget, SKIN_MAX_TETS)        # a graded skin's passes aim at the skin's budget
    if tets <= OVER_BUDGET * budget:
        return []
    return [f"the mesh has {tets:,} tets, {tets / budget:.1f} times the sizing's budget (about {budget:,}): "
            "its first mesh, made within the surface's own triangles, already held them (a finely "
            "tessellated surface), so every contact query on the asset costs that much more; a "
            "--surface-tolerance lets the surface be remeshed coarser first, an --edge-length chooses "
            "the mesh yourself"]


def _budget(sizing: dict) -> int:
    """The tet budget of the sizing that made ``sizing`` (the band's, a bisected skin's, or the part's)."""
    meshed_by = {p.get("meshed_by") for p in sizing.get("passes", [])}
    return BAND_MAX_TETS if "band" in meshed_by else SKIN_MAX_TETS if "bisection" in meshed_by else MAX_TETS


def _errors(estimate: ErrorEstimate, accuracy: float, tets: int) -> str:
    """E.g. "1.25% (e 1.25%, p 1.25%, L 0.91%, on 279,454 tets)", each shown above ``accuracy`` where it is."""
    parts = (estimate.extent, estimate.pressure, estimate.characteristic_length)
    e, p, length = (error_percent(value, accuracy) for value in parts)
    return f"{error_percent(worst_error(estimate), accuracy)} (e {e}, p {p}, L {length}, on {tets:,} tets)"
