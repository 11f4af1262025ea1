"""TetGen meshing: markers kept, core carved, positive tets, zero-pressure tets refined away."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import trimesh

from fieldgen.errors import BuildError, InputError, OptionError
from fieldgen.meshing.tetmesh import FREE, INSULATED, RIGID, TetMesh, boundary_faces_of, find_faces, tet_volumes
from fieldgen.meshing.tetmesh import face_keys as _face_keys
from fieldgen.meshing.refine import refine_zero_tets
from fieldgen.meshing.statistics import mesh_statistics
from fieldgen.meshing.tetgen import MeshingOptions, interior_point, tetrahedralize
from fieldgen.meshing.tetmesh import zero_tets

A, B = 0.02, 0.05


def shell(options=MeshingOptions(edge_length=0.008)):
    outer = trimesh.creation.icosphere(subdivisions=3, radius=B)
    core = trimesh.creation.icosphere(subdivisions=2, radius=A)
    mesh = tetrahedralize(outer.vertices, outer.faces, np.full(len(outer.faces), FREE),
                          core_vertices=core.vertices, core_faces=core.faces, options=options)
    return outer, core, mesh


def canonical_faces(faces):
    faces = np.sort(np.asarray(faces), axis=1)
    return faces[np.lexsort(faces.T[::-1])]


def test_shell_markers_orientation_and_volume():
    outer, core, mesh = shell()
    assert np.all(tet_volumes(mesh.points, mesh.tets) > 0)
    # Faces wound out of the volume: outer faces point away from the centre, core faces into the core.
    tri = mesh.points[mesh.boundary_faces]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    outward = np.einsum("ij,ij->i", normal, tri.mean(axis=1)) > 0
    radius = np.linalg.norm(tri.mean(axis=1), axis=1)
    assert np.all(mesh.boundary_markers[outward] == FREE)
    assert np.all(mesh.boundary_markers[~outward] == RIGID)
    assert np.all(radius[mesh.boundary_markers == RIGID] < A * 1.001)
    assert np.all(radius[mesh.boundary_markers == FREE] > B * 0.9)
    # The boundary is exactly the faces used once, and the volume is the polyhedral shell's.
    assert np.array_equal(canonical_faces(mesh.boundary_faces), canonical_faces(boundary_faces_of(mesh.tets)))
    volume = tet_volumes(mesh.points, mesh.tets).sum()
    assert volume == pytest.approx(outer.volume - core.volume, rel=1e-12)
    # The volume bound from the edge length holds for nearly all tets (TetGen's final smoothing
    # lets about 0.6% of them grow up to ~1.35x the bound; measured).
    volumes = tet_volumes(mesh.points, mesh.tets)
    bound = 0.008 ** 3 / (6 * np.sqrt(2))
    assert np.percentile(volumes, 99) <= bound and volumes.max() <= 2 * bound


def test_mixed_markers_kept_on_a_box():
    box = trimesh.creation.box(extents=(0.1, 0.06, 0.02))
    normals = box.face_normals
    markers = np.where(normals[:, 2] > 0.5, FREE, np.where(normals[:, 2] < -0.5, RIGID, INSULATED))
    mesh = tetrahedralize(box.vertices, box.faces, markers, options=MeshingOptions(max_volume=2e-7))
    tri = mesh.points[mesh.boundary_faces]
    z = tri[..., 2]
    assert np.all(mesh.boundary_markers[np.all(z > 0.0099, axis=1)] == FREE)
    assert np.all(mesh.boundary_markers[np.all(z < -0.0099, axis=1)] == RIGID)
    sides = ~(np.all(z > 0.0099, axis=1) | np.all(z < -0.0099, axis=1))
    assert np.all(mesh.boundary_markers[sides] == INSULATED)
    assert set(np.unique(mesh.boundary_markers)) == {FREE, RIGID, INSULATED}


def test_deterministic_silent_and_leaves_cwd_clean(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, _, first = shell()
    _, _, second = shell()
    for name in ("points", "tets", "boundary_faces", "boundary_markers"):
        assert np.array_equal(getattr(first, name), getattr(second, name))
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    assert os.getcwd() == str(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_options_volume_bound_and_switches():
    assert MeshingOptions().volume_bound() is None
    a = 0.01
    assert MeshingOptions(edge_length=a).volume_bound() == pytest.approx(a ** 3 / (6 * np.sqrt(2)))
    assert MeshingOptions(edge_length=a, max_volume=1e-8).volume_bound() == 1e-8
    assert MeshingOptions(edge_length=a, max_volume=1.0).volume_bound() == pytest.approx(a ** 3 / (6 * np.sqrt(2)))
    assert MeshingOptions(max_volume=1e-8).switches() == "pq1.414/10.0a0.00000001Q"  # never exponent notation
    with pytest.raises(OptionError, match="radius_edge"):
        MeshingOptions(radius_edge=0.5).switches()
    with pytest.raises(OptionError, match="max_volume"):
        MeshingOptions(max_volume=-1.0).switches()


def test_volume_bound_reaches_tetgen():
    # A metre-scale slab: the switch string must carry the bound to TetGen (tiny volumes included).
    box = trimesh.creation.box(extents=(0.1, 0.1, 0.01))
    markers = np.full(len(box.faces), FREE)
    counts = []
    for bound in (3.2e-8, 3.2e-9):
        mesh = tetrahedralize(box.vertices, box.faces, markers, options=MeshingOptions(max_volume=bound))
        volumes = tet_volumes(mesh.points, mesh.tets)
        assert np.percentile(volumes, 99) <= bound
        assert volumes.mean() < bound                    # the bulk is bounded, not only the tail
        counts.append(len(volumes))
    assert counts[1] > 5 * counts[0]
    assert float(MeshingOptions(max_volume=3.2e-9).switches().split("a")[1][:-1]) == 3.2e-9   # round trip


def test_interior_point_of_nonconvex_core():
    # A torus: the centroid of its vertices is outside, so the point must come from the faces.
    ring = trimesh.creation.torus(major_radius=0.03, minor_radius=0.01)
    assert not ring.contains([ring.vertices.mean(axis=0)])[0]
    for faces in (ring.faces, ring.faces[:, ::-1]):          # either winding
        point = interior_point(ring.vertices, faces)
        assert ring.contains([point])[0]
        assert abs(np.hypot(point[0], point[1]) - 0.03) ** 2 + point[2] ** 2 < 0.01 ** 2


def test_refuses_open_surface():
    box = trimesh.creation.box(extents=(1, 1, 1))
    with pytest.raises(InputError, match="not closed"):
        tetrahedralize(box.vertices, box.faces[:-1], np.full(len(box.faces) - 1, FREE))


def test_refuses_bad_marker():
    box = trimesh.creation.box(extents=(1, 1, 1))
    with pytest.raises(InputError, match="markers"):
        tetrahedralize(box.vertices, box.faces, np.full(len(box.faces), 7))


def test_refuses_self_intersection_with_clear_error():
    one = trimesh.creation.box(extents=(1, 1, 1))
    two = trimesh.creation.box(extents=(1, 1, 1), transform=trimesh.transformations.translation_matrix((0.5, 0.3, 0.2)))
    vertices = np.vstack([one.vertices, two.vertices])
    faces = np.vstack([one.faces, two.faces + len(one.vertices)])
    with pytest.raises((InputError, BuildError), match="TetGen"):
        tetrahedralize(vertices, faces, np.full(len(faces), FREE))


def test_core_touching_outer_is_refused():
    outer = trimesh.creation.icosphere(subdivisions=2, radius=0.05)
    core = trimesh.creation.icosphere(subdivisions=2, radius=0.03)
    core.apply_translation((0.04, 0, 0))   # pokes through the outer surface
    with pytest.raises(InputError, match="TetGen refused the surface: .*self-intersections") as info:
        tetrahedralize(outer.vertices, outer.faces, np.full(len(outer.faces), FREE),
                       core_vertices=core.vertices, core_faces=core.faces)
    assert "overlap between outer surface and core" in info.value.fix     # the fix names the cause


def check_refined(before: TetMesh, after: TetMesh):
    """Conforming, positive, same volume, same boundary faces, no tet with 4 FREE vertices."""
    assert np.all(tet_volumes(after.points, after.tets) > 0)
    assert tet_volumes(after.points, after.tets).sum() == pytest.approx(
        tet_volumes(before.points, before.tets).sum(), rel=1e-12)
    assert np.array_equal(after.points[: before.n_points], before.points)
    assert np.array_equal(canonical_faces(boundary_faces_of(after.tets)), canonical_faces(before.boundary_faces))
    assert len(zero_tets(after)) == 0


def test_refine_interior_edge_of_an_octahedron():
    # Four tets around the interior axis (0,0,-1)-(0,0,1); every vertex is on the FREE surface.
    points = np.array([[1, 0, 0], [0, 1, 0], [-1, 0, 0], [0, -1, 0], [0, 0, -1], [0, 0, 1]], float)
    tets = np.array([[4, 5, i, (i + 1) % 4] for i in range(4)])
    from fieldgen.meshing.tetmesh import orient_positive
    tets = orient_positive(points, tets)
    faces = boundary_faces_of(tets)
    mesh = TetMesh(points, tets, faces, np.full(len(faces), FREE))
    assert len(zero_tets(mesh)) == 4
    refined, count = refine_zero_tets(mesh)
    assert count == 4 and refined.n_tets == 8 and refined.n_points == 7
    assert np.allclose(refined.points[6], 0.0)          # midpoint of the axis
    check_refined(mesh, refined)


def test_refine_corner_tets_by_interior_face():
    # A bipyramid: two tets, all nine edges on the boundary; only the shared face is interior.
    points = np.array([[1, 0, 0], [-0.5, 0.8, 0], [-0.5, -0.8, 0], [0, 0, 1], [0, 0, -1]], float)
    from fieldgen.meshing.tetmesh import orient_positive
    tets = orient_positive(points, np.array([[0, 1, 2, 3], [0, 1, 2, 4]]))
    faces = boundary_faces_of(tets)
    mesh = TetMesh(points, tets, faces, np.full(len(faces), FREE))
    refined, count = refine_zero_tets(mesh)
    assert count == 2 and refined.n_tets == 6
    assert np.allclose(refined.points[5], points[:3].mean(axis=0))
    check_refined(mesh, refined)


def test_refine_lone_tet_at_centroid():
    points = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    tets = np.array([[0, 1, 2, 3]])
    faces = boundary_faces_of(tets)
    mesh = TetMesh(points, tets, faces, np.full(4, FREE))
    refined, count = refine_zero_tets(mesh)
    assert count == 1 and refined.n_tets == 4
    check_refined(mesh, refined)


def test_rigid_vertices_do_not_count_as_zero():
    points = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    tets = np.array([[0, 1, 2, 3]])
    faces = boundary_faces_of(tets)
    markers = np.array([FREE, FREE, FREE, FREE])
    markers[np.flatnonzero(~np.any(faces == 3, axis=1))] = RIGID   # face (0,1,2) rigid; vertices still on FREE faces
    mesh = TetMesh(points, tets, faces, markers)
    assert len(zero_tets(mesh)) == 1                     # FREE wins on shared vertices
    markers = np.full(4, RIGID)
    markers[0] = FREE
    assert len(zero_tets(TetMesh(points, tets, faces, markers))) == 0


@pytest.mark.slow
def test_real_cad_part_has_no_zero_pressure_tet(meshes):
    part = trimesh.load(meshes / "featuretype.STL")
    part.apply_scale(1e-3)
    assert part.is_watertight
    mesh = tetrahedralize(part.vertices, part.faces, np.full(len(part.faces), FREE),
                          options=MeshingOptions(radius_edge=2.0))
    assert len(zero_tets(mesh)) > 0                      # thin CAD features do produce them
    assert tet_volumes(mesh.points, mesh.tets).sum() == pytest.approx(part.volume, rel=1e-9)
    refined, count = refine_zero_tets(mesh)
    assert count == len(zero_tets(mesh))
    check_refined(mesh, refined)
    stats = mesh_statistics(refined)
    assert stats["zero_pressure_tets"] == 0 and stats["n_tets"] == refined.n_tets
    assert stats["min_tet_volume"] > 0


def test_mesh_statistics_of_a_regular_tet():
    points = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], float)
    from fieldgen.meshing.tetmesh import orient_positive
    tets = orient_positive(points, np.array([[0, 1, 2, 3]]))
    faces = boundary_faces_of(tets)
    stats = mesh_statistics(TetMesh(points, tets, faces, np.full(4, FREE)))
    json.dumps(stats)
    assert stats["radius_edge_max"] == pytest.approx(np.sqrt(6) / 4)
    assert stats["min_dihedral_angle"] == pytest.approx(np.degrees(np.arccos(1 / 3)))
    assert stats["volume"] == pytest.approx(8 / 3)
    assert stats["n_tets"] == 1 and stats["n_points"] == 4 and stats["n_boundary_faces"] == 4
    assert stats["boundary_faces_by_condition"] == {"free": 4, "rigid": 0, "insulated": 0}
    assert stats["zero_pressure_tets"] == 1


def test_timeout_is_a_build_error():
    box = trimesh.creation.box(extents=(1, 1, 1))
    with pytest.raises(BuildError, match="did not finish"):
        tetrahedralize(box.vertices, box.faces, np.full(len(box.faces), FREE), timeout=1e-3)


def test_cad_part_tetgen_cannot_mesh_gives_a_clear_error(meshes):
    # box.STL (closed, 8954 faces) makes TetGen fail in recoversubfaces; in-process this corrupted
    # the heap, so TetGen runs in a child process and the failure must come back as an error.
    part = trimesh.load(meshes / "box.STL")
    part.apply_scale(1e-3)
    assert part.is_watertight
    with pytest.raises((BuildError, InputError), match="TetGen") as info:
        tetrahedralize(part.vertices, part.faces, np.full(len(part.faces), FREE))
    assert info.value.fix


def test_face_keys_agree_above_the_integer_limit():
    # Large meshes (>= 2**21 vertices) use record keys; both kinds must match faces the same way.
    rng = np.random.default_rng(7)
    faces = rng.integers(0, 50, size=(200, 3))
    queries = np.vstack([faces[::3][:, ::-1], rng.integers(0, 50, size=(50, 3))])
    small = np.isin(_face_keys(queries, 50), _face_keys(faces, 50))
    large = np.isin(_face_keys(queries, 50, limit=0), _face_keys(faces, 50, limit=0))
    assert np.array_equal(small, large) and small[: len(faces[::3])].all()
    assert len(np.unique(_face_keys(faces, 50))) == len(np.unique(_face_keys(faces, 50, limit=0)))


def test_find_faces_matches_in_any_vertex_order_with_either_kind_of_key():
    """The lookup the mesher, the skin cut and bisection share: found flags and rows against a
    brute force, with integer keys and with the record keys of meshes past 2**21 vertices."""
    rng = np.random.default_rng(3)
    known = np.unique(np.sort(rng.integers(0, 40, size=(120, 3)), axis=1), axis=0)
    known = known[(known[:, 0] != known[:, 1]) & (known[:, 1] != known[:, 2])]
    known = np.array([rng.permutation(f) for f in known])            # any winding
    queries = np.vstack([known[::4][:, ::-1], known[1::5][:, [1, 2, 0]], rng.integers(0, 40, size=(30, 3))])
    brute = [next((j for j, f in enumerate(known) if sorted(f) == sorted(q)), -1) for q in queries]
    for n in (40, 2 ** 21):
        found, row = find_faces(queries, known, n)
        assert found.tolist() == [b >= 0 for b in brute]
        assert row[found].tolist() == [b for b in brute if b >= 0]
    found, _ = find_faces(queries, known[:0], 40)
    assert found.shape == (len(queries),) and not found.any()


def test_refine_many_corner_tets_in_one_mesh():
    """fTetWild meshes of thin parts leave hundreds of tets whose six edges all lie on the free
    surface; each is split through an interior face (formerly one per round, 64 rounds at most,
    which failed with 'N tets still have all four vertices on the free surface')."""
    from fieldgen.meshing.tetmesh import orient_positive

    base = np.array([[1, 0, 0], [-0.5, 0.8, 0], [-0.5, -0.8, 0], [0, 0, 1], [0, 0, -1]], float)
    points = np.vstack([base + [3.0 * i, 0, 0] for i in range(150)])
    tets = np.vstack([np.array([[0, 1, 2, 3], [0, 1, 2, 4]]) + 5 * i for i in range(150)])
    # Lone tets too (all four faces on the boundary): split at the centroid.
    lone = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float) + [0, 5.0, 0]
    tets = np.vstack([tets, [len(points) + np.arange(4)]])
    points = np.vstack([points, lone])
    tets = orient_positive(points, tets)
    faces = boundary_faces_of(tets)
    mesh = TetMesh(points, tets, faces, np.full(len(faces), FREE))
    refined, count = refine_zero_tets(mesh)
    assert count == 301 and refined.n_tets == 150 * 6 + 4
    check_refined(mesh, refined)


def test_zero_tets_of_a_skinned_ftetwild_teapot_are_lifted_without_multiplying(meshes, monkeypatch):
    """fTetWild's mesh of teapot.stl under a 5 mm skin (captured from `--robust --skin 5`, whose
    zero-pressure refinement did not end on about half of fTetWild's runs): its zero tets, near the
    thin handle and spout, end with tets whose edges all lie on the boundary, and splitting one of
    their faces whose other tet was a zero tet too made a cut-off vertex, around which every tet was
    a zero tet again; the count grew 1.3x a round. Every new vertex must be joined to a rigid one."""
    import fieldgen.meshing.refine as tetmesh

    data = np.load(meshes.parent / "teapot_skin_ftetwild.npz")    # tests/data/README.md
    mesh = TetMesh(data["points"], data["tets"].astype(np.int64), data["boundary_faces"].astype(np.int64),
                   data["boundary_markers"].astype(np.int64))
    on_free = np.zeros(mesh.n_points, dtype=bool)
    on_free[mesh.vertices_with(FREE)] = True
    on_rigid = np.zeros(mesh.n_points, dtype=bool)
    on_rigid[mesh.vertices_with(RIGID)] = True
    on_rigid &= ~on_free
    before = tetmesh._at_zero(mesh.n_points, mesh.tets, on_free, on_rigid)
    assert (tetmesh.row_counts(before[mesh.tets]) == 4).sum() > 500       # the case this is about

    def bounded(split):      # a runaway refinement fails at once instead of filling the memory
        def wrapper(points, tets, what):
            points, tets = split(points, tets, what)
            assert len(tets) < 2 * mesh.n_tets, "the zero-tet refinement multiplies the mesh"
            return points, tets
        return wrapper

    monkeypatch.setattr(tetmesh, "_split_edges", bounded(tetmesh._split_edges))
    monkeypatch.setattr(tetmesh, "_split_faces", bounded(tetmesh._split_faces))
    refined, count = refine_zero_tets(mesh)
    assert count == (tetmesh.row_counts(before[mesh.tets]) == 4).sum()
    check_refined(mesh, refined)
    flags = tetmesh._at_zero(refined.n_points, refined.tets, np.concatenate(
        [on_free, np.zeros(refined.n_points - mesh.n_points, dtype=bool)]), on_rigid)
    assert not flags[mesh.n_points:].any()                  # no new vertex is cut off from the rigid faces
    assert not (tetmesh.row_counts(flags[refined.tets]) == 4).any()
    assert refined.n_tets < 1.2 * mesh.n_tets


@pytest.mark.parametrize("code,error,retried", [(-11, "crashed", True), (-6, "crashed", True),
                                                 (-9, "out of memory", False), (3, "stopped", False)])
def test_a_tetgen_child_that_dies_of_its_own_fault_is_a_mesher_crash(monkeypatch, code, error, retried):
    """A child killed by its own fault (SIGSEGV, SIGABRT: what some size fields cause) is a
    MesherCrash, which the skin's sizing retries with other sizes; a kill from outside (SIGKILL,
    e.g. out of memory) or another exit is a plain BuildError, never retried."""
    import subprocess

    from fieldgen.errors import MesherCrash

    class Child:
        def __init__(self, *args, **kwargs):
            pass

        def wait(self, timeout=None):
            return code

    monkeypatch.setattr(subprocess, "Popen", Child)
    box = trimesh.creation.box(extents=(1, 1, 1))
    with pytest.raises(BuildError, match=error) as info:
        tetrahedralize(box.vertices, box.faces, np.full(len(box.faces), FREE))
    assert isinstance(info.value, MesherCrash) == retried and info.value.fix


@pytest.mark.parametrize("failure,retried", [("Internal TetGen error within `flip32`", True),
                                             ("a facet is degenerate", False)])
def test_an_internal_tetgen_error_is_a_mesher_crash(monkeypatch, failure, retried):
    """TetGen's internal errors (as some size fields cause) are MesherCrash; its other refusals
    stay BuildErrors that name the failure."""
    import subprocess

    from fieldgen.errors import MesherCrash

    class Child:
        def __init__(self, args, cwd=None, **kwargs):
            with open(os.path.join(cwd, "error.txt"), "w") as handle:
                handle.write(failure)

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Child)
    box = trimesh.creation.box(extents=(1, 1, 1))
    with pytest.raises(BuildError, match="failed to tetrahedralize") as info:
        tetrahedralize(box.vertices, box.faces, np.full(len(box.faces), FREE))
    assert isinstance(info.value, MesherCrash) == retried and failure in str(info.value)


def _tetgen_children_of(parent: int) -> list[int]:
    """Live TetGen child processes started by ``parent`` (they carry its pid in their environment)."""
    tag = f"FIELDGEN_PARENT_PID={parent}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if b"fieldgen.meshing.tetgen" in open(f"/proc/{entry}/cmdline", "rb").read() and \
                        tag in open(f"/proc/{entry}/environ", "rb").read().split(b"\0") and \
                        open(f"/proc/{entry}/stat").read().split()[2] != "Z":
                    found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_killed_build_leaves_no_tetgen_running(tmp_path):
    """SIGKILL the process that runs TetGen: its TetGen child stops too, instead of meshing on, and
    the scratch folder the killed process could not remove is removed by the next build."""
    import signal
    import subprocess
    import sys
    import time

    script = ("import numpy as np, trimesh\n"
              "from fieldgen.meshing.tetmesh import FREE\n"
              "from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize\n"
              "box = trimesh.creation.box(extents=(0.2, 0.1, 0.04))\n"
              "tetrahedralize(box.vertices, box.faces, np.full(len(box.faces), FREE),\n"
              "               options=MeshingOptions(max_volume=1e-9))\n")      # about 1.5M tets, tens of s
    build = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(tmp_path)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _tetgen_children_of(build.pid) and build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        children = _tetgen_children_of(build.pid)
        assert children, build.stderr.read().decode() if build.poll() is not None else "no TetGen child"
        time.sleep(0.5)                                   # TetGen is meshing now
        build.send_signal(signal.SIGKILL)
        build.wait()
        deadline = time.monotonic() + 5
        while _tetgen_children_of(build.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _tetgen_children_of(build.pid)
    finally:
        for pid in _tetgen_children_of(build.pid):       # do not leave it running if the test fails
            os.kill(pid, signal.SIGKILL)
        if build.poll() is None:
            build.kill()
    assert left == []
    abandoned = [p.name for p in tmp_path.iterdir()]
    assert len(abandoned) == 1 and abandoned[0].startswith("fieldgen-tetgen-"), abandoned
    small = script.replace("max_volume=1e-9", "max_volume=1e-5")
    subprocess.run([sys.executable, "-c", small], env={**os.environ, "TMPDIR": str(tmp_path)}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_only_dead_processes_scratch_folders_are_removed(tmp_path):
    """A folder of a running process (this one, or another live one), of another host or pid
    namespace, of another prefix, a symlink, and names that do not parse (a pid past the kernel's
    largest, a superscript digit) are kept; a dead process's folder goes with its contents."""
    import subprocess
    import sys

    from fieldgen.meshing.process import _machine, remove_abandoned, scratch_folder

    here = _machine()
    boot, namespace = here.split("-")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    names = {
        f"fieldgen-tetgen-{here}-{dead_pid}-abc": False,                 # removed
        f"fieldgen-tetgen-{here}-{os.getpid()}-abc": True,               # this process
        f"fieldgen-tetgen-{here}-1-abc": True,                           # init: alive
        f"fieldgen-tetgen-{boot}-{int(namespace) + 1}-{dead_pid}-abc": True,   # another pid namespace
        f"fieldgen-tetgen-{'0' * len(boot)}-{namespace}-{dead_pid}-abc": True,  # another host or boot
        f"fieldgen-ftetwild-{here}-{dead_pid}-abc": True,                # another prefix
        f"fieldgen-tetgen-{here}-99999999999999999999-abc": True,        # no such pid
        f"fieldgen-tetgen-{here}-\u00b2-abc": True,                      # a digit int() refuses
        "fieldgen-tetgen-abc": True,                                      # an older name
    }
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "output.npz").write_bytes(b"x")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / f"fieldgen-tetgen-{here}-{dead_pid}-link").symlink_to(target)    # kept, and its target
    removed = remove_abandoned("fieldgen-tetgen-", str(tmp_path))
    assert [os.path.basename(p) for p in removed] == [n for n, kept in names.items() if not kept]
    kept = sorted(n for n, k in names.items() if k) + ["elsewhere", f"fieldgen-tetgen-{here}-{dead_pid}-link"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
    with scratch_folder("fieldgen-tetgen-") as folder:
        assert os.path.basename(folder).startswith(f"fieldgen-tetgen-{here}-{os.getpid()}-")
    assert not os.path.exists(folder)


@pytest.mark.skipif(not os.path.isdir("/proc/self") or os.getuid() != 0,
                    reason="needs Linux's /proc, and root to make a folder owned by another user")
def test_another_users_scratch_folder_is_kept(tmp_path):
    import subprocess
    import sys

    from fieldgen.meshing.process import _machine, remove_abandoned

    dead_pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                                  text=True, check=True).stdout)
    foreign = tmp_path / f"fieldgen-tetgen-{_machine()}-{dead_pid}-foreign"
    foreign.mkdir()
    os.chown(foreign, 12345, 12345)
    assert remove_abandoned("fieldgen-tetgen-", str(tmp_path)) == [] and foreign.is_dir()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_batch_and_task_folders_of_dead_processes_are_removed_too(tmp_path, monkeypatch):
    """A killed Dask worker's item folder (fieldgen-task-) or a killed batch's (fieldgen-batch-) goes
    when the next one of its kind is made."""
    import subprocess
    import sys
    import tempfile

    from fieldgen.meshing.process import _machine, new_scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead_pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                                  text=True, check=True).stdout)
    for prefix in ("fieldgen-task-", "fieldgen-batch-"):
        left = tmp_path / f"{prefix}{_machine()}-{dead_pid}-xyz"
        (left / "worker0").mkdir(parents=True)
        made = new_scratch(prefix)
        assert not left.exists() and os.path.isdir(made) and os.path.dirname(made) == str(tmp_path)
        os.rmdir(made)
    assert list(tmp_path.iterdir()) == []
