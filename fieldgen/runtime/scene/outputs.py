"""Files ``fieldgen simulate`` writes: trajectories (CSV) and ParaView time series (.pvd + .vtp).

- ``trajectories.csv``: one row per recorded time and body: time, body, position (centre of
  mass), quaternion (w, x, y, z), velocity, angular velocity (world), and ``core_contact``: 1
  when a rigid core carried load (acted as rigid geometry) in the steps from this time to the
  next recorded one.
- ``contact_surfaces.pvd``: one ``.vtp`` per recorded time with every contact polygon in the
  world frame, point data ``pressure`` (p0, Pa), cell data ``area`` and ``normal``.
- ``tangential.csv`` (``--friction compliant`` only): one row per recorded time and contact
  pair: time, body_a, body_b, status (none | stick | slide), sliding_fraction (share of the
  normal force on sliding points), spring_energy (J), the spring wrench f_Δ and the friction
  wrench f_c on body_b (N, and N·m about the world origin).
- ``bodies.pvd``: one ``.vtp`` per recorded time with each body's surface mesh at its pose,
  cell data ``body`` (the scene index).
- ``view.py``: a ParaView script that loads both series, colours the contact polygons by
  pressure and plays them (``pvpython view.py --screenshot f.png --time T`` for one frame;
  see :mod:`fieldgen.io.paraview`).

A run's files are written into a temporary folder and moved into ``-o DIR`` only when all of
them are written (:func:`staged_output`), after checking that no output's place in DIR is taken
by a folder: a run that fails or is interrupted before the move leaves DIR as it was (the move is
one rename per file; an interruption during it can leave a mix). Each ``.pvd`` series lists its
frames and, in a comment, the run's other files (:data:`RUN_FILES`). After the move, the files
the older run's series in DIR listed that this run did not write (the frames past this run's
last, after a longer run; ``tangential.csv``, after a compliant run) are removed, read from those
series before they are replaced: DIR then holds this run's files only, of the names above. Any
file they did not list (a user's own ``frames/bodies_000999.vtp``, or ``tangential.csv`` beside
a run that did not write one) is never touched.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
import uuid
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Iterator
from xml.sax.saxutils import quoteattr

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.io.asset import atomic_output
from fieldgen.io.paraview import contact_script, contact_view, write_script
from fieldgen.io.vtk_data import named_array, polygons
from fieldgen.meshing.tetmesh import boundary_faces_of
from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState


def write_trajectories(path, result) -> None:
    """CSV of every recorded state (see the module docstring)."""
    with atomic_output(path) as temporary, open(temporary, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["time", "body", "x", "y", "z", "qw", "qx", "qy", "qz", "vx", "vy", "vz", "wx", "wy", "wz",
                      "core_contact"])
        core = getattr(result, "core_contact", None)
        core = np.zeros(len(result.times), bool) if core is None or len(core) != len(result.times) else core
        for k, t in enumerate(result.times):
            for b, name in enumerate(result.body_names):
                row = np.concatenate([result.positions[k, b], result.quaternions[k, b], result.velocities[k, b],
                                      result.angular_velocities[k, b]])
                out.writerow([repr(float(t)), name] + [repr(float(x)) for x in row] + [int(core[k])])


TANGENTIAL_COLUMNS = ["time", "body_a", "body_b", "status", "sliding_fraction", "spring_energy",
                      "spring_fx", "spring_fy", "spring_fz", "spring_tx", "spring_ty", "spring_tz",
                      "friction_fx", "friction_fy", "friction_fz", "friction_tx", "friction_ty", "friction_tz"]


def write_tangential(path, result) -> None:
    """CSV of every contact pair's friction spring at the recorded times (module docstring)."""
    with atomic_output(path) as temporary, open(temporary, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(TANGENTIAL_COLUMNS)
        for rows in result.tangential:
            for r in rows:
                numbers = np.concatenate([r["spring_force"], r["spring_torque"], r["friction_force"], r["friction_torque"]])
                out.writerow([repr(float(r["time"])), r["body_a"], r["body_b"], r["status"],
                              repr(float(r["sliding_fraction"])), repr(float(r["energy"]))]
                             + [repr(float(x)) for x in numbers])


def _polydata(points, offsets, connectivity, point_data=(), cell_data=()):
    poly = polygons(points, offsets, connectivity)
    for target, arrays in ((poly.GetPointData(), point_data), (poly.GetCellData(), cell_data)):
        for name, values in arrays:
            target.AddArray(named_array(values, name))
    return poly


def _write_vtp(path, poly) -> None:
    import vtk  # lazy: vtk is heavy, needed only to write the files

    writer = vtk.vtkXMLPolyDataWriter()
    writer.SetInputData(poly)
    writer.SetDataModeToBinary()
    with atomic_output(path) as temporary:
        writer.SetFileName(temporary)
        if writer.Write() != 1:
            raise InputError("could not write the ParaView file", path=path, fix="check the output folder is writable")


#: Opens the comment in which a run's ``.pvd`` series name its files that are not frames.
RUN_FILES = "fieldgen simulate run files:"


def _write_pvd(path, entries, run_files=()) -> None:
    """The series of ``entries`` (time, frame path); a comment names the run's ``run_files``."""
    lines = ['<?xml version="1.0"?>', '<VTKFile type="Collection" version="0.1">',
             f"  <!-- {RUN_FILES} {' '.join(run_files)} -->", "  <Collection>"]
    for t, name in entries:
        lines.append(f'    <DataSet timestep="{float(t)!r}" part="0" file={quoteattr(name)}/>')
    lines += ["  </Collection>", "</VTKFile>", ""]
    with atomic_output(path) as temporary:
        Path(temporary).write_text("\n".join(lines))


def contact_polydata(surfaces):
    """All contact polygons of one time in one polydata (pressure at vertices)."""
    pts, offs, conn, press, areas, normals = [], [0], [], [], [], []
    base = 0
    for _, _, s in surfaces:
        pts.append(s.vertices)
        press.append(s.vertex_pressure)
        conn.append(s.face_vertices + base)
        offs.extend((s.face_offsets[1:] + offs[-1] - s.face_offsets[0]).tolist())
        areas.append(s.areas)
        normals.append(s.normals)
        base += len(s.vertices)
    if not pts:
        return _polydata(np.zeros((0, 3)), [0], [], [("pressure", np.zeros(0))], [("area", np.zeros(0))])
    return _polydata(np.vstack(pts), offs, np.concatenate(conn), [("pressure", np.concatenate(press))],
                     [("area", np.concatenate(areas)), ("normal", np.vstack(normals))])


def geometry_surface(g):
    """(vertices, faces) of a body's surface in its mesh frame (compliant: the tets' boundary)."""
    if isinstance(g, CompliantGeometry):
        return g.points, boundary_faces_of(g.tets)
    return g.vertices, g.faces


def body_surfaces(scene: Scene):
    """(vertices, faces) of each body's surface in its mesh frame."""
    return [geometry_surface(b.geometry) for b in scene.bodies]


def posed_polydata(surfaces, poses):
    """Surfaces (vertices, faces) moved by the 4x4 ``poses``, in one polydata (cell data ``body``)."""
    pts, conn, body_id = [], [], []
    base = 0
    for i, ((V, F), X) in enumerate(zip(surfaces, poses)):
        X = np.asarray(X, dtype=np.float64)
        pts.append(np.asarray(V, dtype=np.float64) @ X[:3, :3].T + X[:3, 3])
        conn.append(np.asarray(F, dtype=np.int64) + base)
        body_id.append(np.full(len(F), float(i)))
        base += len(V)
    conn = np.vstack(conn)
    return _polydata(np.vstack(pts), np.arange(0, 3 * len(conn) + 1, 3), conn.ravel(), (),
                     [("body", np.concatenate(body_id))])


def write_query_view(script_path, surface_path, surface, bodies, poses) -> dict:
    """ParaView script for one contact query (``fieldgen contact -o SURFACE --paraview FILE.py``):
    the bodies at their poses go to ``FILE_bodies.vtp`` beside the script."""
    script_path = Path(script_path)
    bodies_path = script_path.with_name(script_path.stem + "_bodies.vtp")
    surfaces = [geometry_surface(b) for b in bodies]
    poly = posed_polydata(surfaces, poses)
    _write_vtp(bodies_path, poly)
    b = poly.GetBounds()
    view = contact_view([[surface]], fallback_bounds=([b[0], b[2], b[4]], [b[1], b[3], b[5]]))
    write_script(script_path, contact_script(surface_path, view, bodies_path=bodies_path))
    return {"paraview": str(script_path), "paraview_bodies": str(bodies_path)}


def bodies_polydata(scene: Scene, states: list[RigidBodyState], surfaces):
    return posed_polydata(surfaces, [b.pose(s) for b, s in zip(scene.bodies, states)])


#: Every file :func:`write_outputs` makes, by its path in DIR: the only names it may remove.
OWN_FILES = re.compile(r"(trajectories\.csv|tangential\.csv|bodies\.pvd|contact_surfaces\.pvd|view\.py"
                       r"|frames/(bodies|contact)_[0-9]{6}\.vtp)")


def check_inputs_kept(out_dir, inputs) -> None:
    """Refuse (OptionError, exit 2, before the run) an input that is a file a run into ``out_dir``
    writes or may remove (a name of :data:`OWN_FILES` in it): a scene file saved as
    ``DIR/trajectories.csv`` would be overwritten by the run. ``inputs`` maps a label
    (``"SCENE_FILE"``) to a path; paths are compared resolved (links, ``..``)."""
    out = os.path.realpath(os.fspath(out_dir))
    for label, path in inputs.items():
        inside = os.path.relpath(os.path.realpath(os.fspath(path)), out).replace(os.sep, "/")
        if OWN_FILES.fullmatch(inside):
            raise OptionError(f"{label} {path} is {inside}, a file simulate writes in -o {out_dir}: writing it "
                              "would overwrite the input", path=str(path),
                              fix="give -o another folder, or keep the input under another name")


def _files_in(folder: Path) -> list[str]:
    """Paths (relative, with /) of the files in ``folder`` and in its ``frames`` folder."""
    found = [p.name for p in folder.iterdir() if p.is_file()]
    frames = folder / "frames"
    if frames.is_dir():
        found += [f"frames/{p.name}" for p in frames.iterdir() if p.is_file()]
    return found


def _listed_by_run(out: Path) -> set[str]:
    """The files the run in ``out`` named in its series (bodies.pvd, contact_surfaces.pvd): each
    DataSet's frame and the files of the :data:`RUN_FILES` comment; nothing of a series that is
    missing or is not such XML (the user's, a torn one)."""
    listed: set[str] = set()
    for series in ("bodies.pvd", "contact_surfaces.pvd"):
        parser = ElementTree.XMLParser(target=ElementTree.TreeBuilder(insert_comments=True))
        try:
            root = ElementTree.parse(out / series, parser).getroot()
        except (OSError, ElementTree.ParseError, ValueError):
            continue
        for node in root.iter():
            if node.tag == "DataSet":
                listed.add(node.get("file", ""))
            elif node.tag is ElementTree.Comment and (node.text or "").strip().startswith(RUN_FILES):
                listed.update(node.text.strip()[len(RUN_FILES):].split())
    return listed


def _move_into(stage: Path, out: Path) -> None:
    """Move the staged run into ``out``: the frames first, the series and script that name them
    last, then remove the files the older run's series listed (:func:`_listed_by_run`, read
    before they are replaced) that this run did not write, of the names in :data:`OWN_FILES`."""
    if not out.exists():
        os.replace(stage, out)          # one rename: the whole run appears at once
        return
    written = _files_in(stage)
    frames = out / "frames"
    blocked = [name for name in written if (out / name).exists() and not (out / name).is_file()]
    if frames.is_symlink() or (frames.exists() and not frames.is_dir()) or blocked:
        raise OSError(f"{frames if not blocked else out / blocked[0]} is in the way of an output file")
    older = _listed_by_run(out) - set(written)
    frames.mkdir(exist_ok=True)         # checked before any move: a blocked output leaves DIR as it was
    for name in sorted(written, key=lambda n: (not n.startswith("frames/"), n.endswith((".pvd", ".py")), n)):
        os.replace(stage / name, out / name)
    for name in sorted(older):
        if OWN_FILES.fullmatch(name) and (out / name).is_file():
            os.remove(out / name)


@contextlib.contextmanager
def staged_output(out: Path) -> Iterator[Path]:
    """Yield an empty temporary folder to write a run into; on success move it into ``out``
    (:func:`_move_into`), on any failure remove it, leaving ``out`` as it was. The folder is
    beside a missing ``out`` (renamed onto it whole) or inside an existing one (which the user
    may write in when its parent is not), named like :func:`fieldgen.io.asset.atomic_output`'s
    temporaries."""
    stage = (out / f".simulate.{uuid.uuid4().hex}.tmp" if out.is_dir()
             else out.parent / f".{out.name}.{uuid.uuid4().hex}.tmp")
    try:
        (stage / "frames").mkdir(parents=True)
        yield stage
        _move_into(stage, out)
    except OSError as error:
        raise InputError(f"could not write the simulation's files ({error.strerror or error})", path=str(out),
                         fix="check the output folder is writable and that nothing in it is in an output's way "
                             "(a file named frames, a folder named view.py)") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def write_outputs(out_dir, scene: Scene, result) -> dict:
    """Write trajectories.csv, contact_surfaces.pvd and bodies.pvd into ``out_dir``, all at once
    and in place of an older run's (module docstring); return the paths."""
    out = Path(out_dir)                    # the paths returned as given; the script's absolute
    with staged_output(Path(os.path.abspath(out))) as stage:
        _write_run(stage, Path(os.path.abspath(out)), scene, result)
    paths = {"trajectories": str(out / "trajectories.csv"), "bodies": str(out / "bodies.pvd"),
             "contact_surfaces": str(out / "contact_surfaces.pvd"), "paraview": str(out / "view.py")}
    if getattr(result, "tangential", None) is not None:
        paths["tangential"] = str(out / "tangential.csv")
    return paths


def _write_run(stage: Path, out: Path, scene: Scene, result) -> None:
    """Write a run's files into ``stage``; the script names the series at their place in ``out``."""
    write_trajectories(stage / "trajectories.csv", result)
    if getattr(result, "tangential", None) is not None:
        write_tangential(stage / "tangential.csv", result)
    surfaces = body_surfaces(scene)
    contact_entries, body_entries = [], []
    for k, t in enumerate(result.times):
        states = [RigidBodyState(result.positions[k, b], result.quaternions[k, b], result.velocities[k, b],
                                 result.angular_velocities[k, b]) for b in range(len(scene.bodies))]
        name_b = f"frames/bodies_{k:06d}.vtp"
        poly = bodies_polydata(scene, states, surfaces)
        if k == 0:
            b = poly.GetBounds()
            first_bounds = ([b[0], b[2], b[4]], [b[1], b[3], b[5]])
        _write_vtp(stage / name_b, poly)
        body_entries.append((t, name_b))
        if k < len(result.surfaces):
            name_c = f"frames/contact_{k:06d}.vtp"
            _write_vtp(stage / name_c, contact_polydata(result.surfaces[k]))
            contact_entries.append((t, name_c))
    run_files = ["trajectories.csv", *(["tangential.csv"] if getattr(result, "tangential", None) is not None
                                       else []), "bodies.pvd", "contact_surfaces.pvd", "view.py"]
    _write_pvd(stage / "bodies.pvd", body_entries, run_files)
    _write_pvd(stage / "contact_surfaces.pvd", contact_entries, run_files)
    write_view_script(stage / "view.py", out / "contact_surfaces.pvd", out / "bodies.pvd",
                      [t for t, _ in contact_entries], [[s for _, _, s in frame] for frame in result.surfaces],
                      fallback_bounds=first_bounds if len(result.times) else None)


def write_view_script(path, contact_pvd, bodies_pvd, times, frames, fallback_bounds=None) -> str:
    """The ParaView script of a simulation: ``frames`` holds each recorded time's contact surfaces;
    without any contact the camera frames ``fallback_bounds`` (the bodies at the start)."""
    view = contact_view(frames, times, fallback_bounds=fallback_bounds)
    return write_script(path, contact_script(contact_pvd, view, bodies_path=bodies_pvd, times=times,
                                             command="fieldgen simulate -o DIR"))
