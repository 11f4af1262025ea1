"""Meshing open, non-manifold or self-intersecting surfaces with fTetWild (``--robust``).

fTetWild (``pytetwild``, MPL-2.0; the optional extra ``fieldgen[robust]``) meshes the solid a
triangle soup encloses by its generalised winding number, so holes are closed and overlapping
pieces are united. It returns no facet markers, so each boundary face of its mesh takes the
condition of the input face nearest to its centroid (the selector masks are evaluated on the
input surface, D 5.1.1). Measured with pytetwild 0.4.2: it imports pyvista
unconditionally, needs ``vtk_ordering=True`` for positive tets, is about 10x slower per tet
than TetGen, and its output differs from run to run even on one thread: assets built this way
are not reproducible bit for bit (their metadata says ``deterministic: false``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

from fieldgen.errors import BuildError, OptionError
from fieldgen.install import install_hint
from fieldgen.io.vtk_data import distance_to_triangles
from fieldgen.meshing.process import child_env, die_with_starter, run_child, scratch_folder
from fieldgen.meshing.tetmesh import TetMesh, boundary_faces_of, orient_positive, tet_volumes

#: fTetWild's default target edge length, as a fraction of the bounding-box diagonal.
DEFAULT_EDGE_FRACTION = 0.05
#: Envelope (how far fTetWild may move the input surface) as a fraction of the bounding-box
#: diagonal: EPSILON_PER_EDGE of the edge length up to DEFAULT_EPSILON, the envelope of the
#: default edge (5 % of the diagonal); above the default edge COARSE_EPSILON_PER_EDGE of it, if
#: more; always within [MIN_EPSILON, MAX_EPSILON]. fTetWild's time goes into fitting the input's
#: triangles into the envelope: on the self-intersecting counter part at a 6 mm edge, edge / 5.5
#: (2.5 times fTetWild's default there) cut its CPU time by 28 % with better worst tets
#: (docs/design/meshing.md). Default and coarser edges keep the envelope they had.
EPSILON_PER_EDGE = 1.0 / 5.5
COARSE_EPSILON_PER_EDGE = 1.0 / 20.0
DEFAULT_EPSILON = COARSE_EPSILON_PER_EDGE * DEFAULT_EDGE_FRACTION
MIN_EPSILON = 1e-3   # fTetWild's default
MAX_EPSILON = 1e-2
#: fTetWild's mesh improvement: at most OPTIMIZE_PASSES passes, ending once no tet's conformal
#: AMIPS energy exceeds STOP_ENERGY (3 is a regular tet). fTetWild's own values: on a
#: self-intersecting counter part the passes were a fifth of the time (inserting the input's
#: triangles took the rest), and fewer cost the worst tets' quality (docs/design/meshing.md).
OPTIMIZE_PASSES = 80
STOP_ENERGY = 10.0
NONDETERMINISTIC_WARNING = ("--robust: fTetWild's output differs from run to run, so this asset is "
                            "not reproducible bit for bit (metadata: deterministic = false)")


@dataclass(frozen=True)
class RobustOptions:
    """fTetWild controls; lengths in m."""

    edge_length: float | None = None   #: target edge length; None: 1/20 of the bounding-box diagonal
    epsilon: float | None = None       #: envelope as a fraction of the diagonal; None: from the edge length
    optimize_iterations: int = OPTIMIZE_PASSES   #: fTetWild's mesh-improvement passes, at most
    stop_energy: float = STOP_ENERGY   #: passes end once the worst tet's AMIPS energy is below this
    simplify: bool = False             #: let fTetWild simplify the input first (slower on scans, measured)
    threads: int = 0                   #: 0 = every core

    def resolved(self, diagonal: float) -> tuple[float, float]:
        """(edge length in m, envelope fraction of the diagonal)."""
        edge = self.edge_length if self.edge_length is not None else DEFAULT_EDGE_FRACTION * diagonal
        if not (np.isfinite(edge) and edge > 0):
            raise OptionError(f"the robust mesher's edge length must be positive, got {edge!r} m",
                              fix="give --edge-length > 0")
        eps = self.epsilon
        if eps is None:
            fraction = edge / diagonal
            eps = max(COARSE_EPSILON_PER_EDGE * fraction, min(EPSILON_PER_EDGE * fraction, DEFAULT_EPSILON))
            eps = float(np.clip(eps, MIN_EPSILON, MAX_EPSILON))
        return float(edge), float(eps)


def default_threads() -> int:
    """1 when the process was limited to one thread (OMP_NUM_THREADS=1, as batch workers are), else 0."""
    return 1 if os.environ.get("OMP_NUM_THREADS") == "1" else 0


def import_pytetwild(path: str | None = None):
    """The pytetwild module, or OptionError naming the install command."""
    try:
        import pytetwild  # lazy: optional extra 'robust'
    except ImportError as error:
        raise OptionError(f"--robust needs fTetWild, which is not installed ({error})", path=path,
                          fix=f"install the optional mesher with {install_hint('robust')}") from None
    return pytetwild


def _ftetwild_worker(folder: str) -> None:
    """Child-process side: read ``input.npz`` in ``folder``, run fTetWild there (its log on
    stdout), write ``output.npz`` or ``error.txt``."""
    die_with_starter()                # killed with the build that started it
    pytetwild = import_pytetwild()
    data = np.load(os.path.join(folder, "input.npz"))
    kwargs = json.loads(str(data["kwargs"]))
    try:
        points, tets = pytetwild.tetrahedralize(np.array(data["vertices"], dtype=np.float64, order="C"),
                                                np.array(data["faces"], dtype=np.int32, order="C"), **kwargs)
    except Exception as error:  # the extension raises RuntimeError/ValueError on bad input
        with open(os.path.join(folder, "error.txt"), "w") as handle:
            handle.write(str(error))
        return
    np.savez(os.path.join(folder, "output.npz"), points=np.asarray(points), tets=np.asarray(tets))


class _LogRelay:
    """fTetWild's log lines as progress messages, keeping the last few for an error message."""

    def __init__(self, progress=None):
        self.progress = progress
        self.start = time.monotonic()
        self.tail: list[str] = []

    def __call__(self, line: str) -> None:
        line = line.rstrip()
        if not line:
            return
        self.tail = (self.tail + [line])[-5:]
        if self.progress is not None:
            # spdlog's "[date time] [float-tetwild] [info] " prefix carries nothing new.
            text = re.sub(r"^(\[[^\]]*\] ){3}", "", line)
            self.progress.message(f"fTetWild [{time.monotonic() - self.start:6.1f} s] {text[-160:]}")


def _run_ftetwild(vertices, faces, kwargs: dict, *, path, progress=None, timeout: float = 7200.0):
    """Run fTetWild in a child process (in a scratch folder: it writes files into the current
    one), relaying its log lines as progress; return its points and tets."""
    with scratch_folder("fieldgen-ftetwild-") as folder:
        np.savez(os.path.join(folder, "input.npz"), vertices=vertices, faces=faces,
                 kwargs=np.array(json.dumps(kwargs)))
        relay = _LogRelay(progress)
        try:
            code = run_child("fieldgen.meshing.ftetwild", folder, timeout=timeout, env=child_env(), on_line=relay)
        except subprocess.TimeoutExpired:
            raise BuildError(f"fTetWild did not finish within {timeout:g} s (its wall-time limit)", path=path,
                             fix="mesh coarser (a larger --edge-length), give more --threads, or repair the "
                                 "surface and drop --robust (TetGen is faster)") from None
        error_path = os.path.join(folder, "error.txt")
        if os.path.exists(error_path):
            with open(error_path) as handle:
                failure = handle.read()
            raise BuildError(f"fTetWild could not mesh the surface ({failure})", path=path,
                             fix="check that the surface encloses a volume")
        if code != 0 or not os.path.exists(os.path.join(folder, "output.npz")):
            raise BuildError(f"fTetWild crashed (exit code {code}): {' | '.join(relay.tail)}", path=path,
                             fix="check that the surface encloses a volume, or mesh coarser (--edge-length)")
        with np.load(os.path.join(folder, "output.npz")) as out:
            return np.array(out["points"], dtype=np.float64), np.array(out["tets"], dtype=np.int64)


def ftetwild_mesh(vertices: np.ndarray, faces: np.ndarray, options: RobustOptions = RobustOptions(),
                  *, path: str | None = None, progress=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Run fTetWild on a triangle soup (m); return points, positive tets and the parameters used.

    fTetWild runs in a child process with its own thread count (``options.threads``; 0 = every
    core) and its log relayed to ``progress`` (a crash cannot take the build down with it).
    """
    import_pytetwild(path)   # a clear message before anything starts
    vertices = np.array(vertices, dtype=np.float64, order="C")
    faces = np.array(faces, dtype=np.int32, order="C")
    diagonal = float(np.linalg.norm(vertices.max(axis=0) - vertices.min(axis=0)))
    edge, eps = options.resolved(diagonal)
    kwargs = {"edge_length_abs": edge, "epsilon": eps, "optimize": True, "simplify": bool(options.simplify),
              "num_opt_iter": int(options.optimize_iterations), "stop_energy": float(options.stop_energy),
              "num_threads": int(options.threads),
              "vtk_ordering": True, "quiet": progress is None or not getattr(progress, "enabled", False),
              "loglevel": 2}
    points, tets = _run_ftetwild(vertices, faces, kwargs, path=path, progress=progress)
    tets = tets.reshape(-1, 4)
    if not len(tets):
        raise BuildError("fTetWild found no enclosed volume (0 tets)", path=path,
                         fix="give a surface that encloses a solid; a flat sheet has no inside")
    used = np.zeros(len(points), dtype=bool)
    used[tets.ravel()] = True
    points = points[used]
    tets = orient_positive(points, (np.cumsum(used) - 1)[tets])
    flat = int(np.sum(tet_volumes(points, tets) <= 0))
    if flat:
        raise BuildError(f"fTetWild returned {flat} tets of zero volume", path=path,
                         fix="mesh finer (--edge-length) or repair the surface")
    parameters = {"mesher": "fTetWild (pytetwild)", "edge_length": edge, "epsilon": eps,
                  "optimize_iterations": int(options.optimize_iterations), "stop_energy": float(options.stop_energy),
                  "simplify": bool(options.simplify), "threads": int(options.threads)}
    return points, tets, parameters


def classify_boundary(points: np.ndarray, faces: np.ndarray, surface_vertices: np.ndarray,
                      surface_faces: np.ndarray, surface_markers: np.ndarray) -> np.ndarray:
    """Condition of each boundary face: that of the input face nearest to its centroid (D 5.1.1).

    Only the condition is needed, not the face: with one condition on every input face that is
    the answer; otherwise the centroids' distance to the faces of each condition comes from
    VTK (:func:`fieldgen.io.vtk_data.distance_to_triangles`, one call per condition) and the nearest
    condition wins, the smaller code on an exact tie (FREE before RIGID before INSULATED). On a
    CAD part's boundary faces a nearest-face search in numpy was much slower.
    """
    codes = np.asarray(surface_markers, dtype=np.int64).ravel()
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    kinds = np.unique(codes)
    if len(kinds) == 1 or not len(faces):
        return np.full(len(faces), kinds[0], dtype=np.int64)
    centroids = np.asarray(points, dtype=np.float64)[faces].mean(axis=1)
    surface_faces = np.asarray(surface_faces, dtype=np.int64).reshape(-1, 3)
    used, compact = np.unique(surface_faces, return_inverse=True)   # only the vertices faces use
    vertices = np.asarray(surface_vertices, dtype=np.float64)[used]
    compact = compact.reshape(-1, 3)
    distances = np.stack([distance_to_triangles(centroids, vertices, compact[codes == kind]) for kind in kinds])
    return kinds[np.argmin(distances, axis=0)]


def robust_tetrahedralize(vertices: np.ndarray, faces: np.ndarray, markers: np.ndarray,
                          options: RobustOptions = RobustOptions(), *,
                          path: str | None = None, progress=None) -> tuple[TetMesh, dict]:
    """Mesh what the (possibly open or self-intersecting) surface encloses; carry the markers over.

    ``vertices`` (n, 3) m, ``faces`` (m, 3), ``markers`` (m,) FREE/RIGID/INSULATED per input face.
    Returns the TetMesh (positive tets, outward boundary faces) and the fTetWild parameters used.
    Not deterministic (fTetWild is not).
    """
    points, tets, parameters = ftetwild_mesh(vertices, faces, options, path=path, progress=progress)
    boundary = boundary_faces_of(tets)
    boundary_markers = classify_boundary(points, boundary, np.asarray(vertices, dtype=np.float64),
                                         np.asarray(faces, dtype=np.int64), markers)
    return TetMesh(points=points, tets=tets, boundary_faces=boundary,
                   boundary_markers=boundary_markers), parameters


if __name__ == "__main__":  # the fTetWild child process, see _run_ftetwild
    _ftetwild_worker(sys.argv[1])
