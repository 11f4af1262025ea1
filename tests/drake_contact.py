"""Drake's hydroelastic contact surface, computed in-process by pydrake (the ``drake`` wheel of
the test extra), and its wrench integrated independently of fieldgen.

Only SceneGraph is used: one frame per body with a fixed pose, one geometry each, hydroelastic
proximity properties from Drake's own helpers (compliant: a legacy ``.vtk`` tet mesh, Drake
computes its field p = E·d/max d; rigid: a closed ``.obj`` surface). The bodies are registered
in the order (A, B), so A gets the smaller GeometryId; Drake then slices A's tets and clips by
B's (the order fieldgen uses). Surfaces come from ``QueryObject.ComputeContactSurfaces`` with
the polygon representation.

The wrench on B (world frame, torque about the world origin) is integrated here from Drake's
polygons: each polygon is fanned about its first vertex and every triangle takes the 3-point
edge-midpoint rule with Drake's own pressure (``EvaluateCartesian``), exact for the linear
pressure and for r·p. The normal is Drake's face normal, flipped so it points from A into B.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class DrakeBody:
    path: str
    kind: str                      # "compliant" (.vtk) or "rigid" (closed surface, .obj)
    pose: np.ndarray               # 4x4 X_WB
    modulus: float = 0.0           # Pa, compliant only


@dataclass
class DrakeResult:
    force: np.ndarray              # on B, world frame (N)
    torque: np.ndarray             # on B about the world origin (N·m)
    faces: int
    area: float
    centroids: np.ndarray          # (faces, 3) Drake's polygon centroids
    areas: np.ndarray              # (faces,)
    normals: np.ndarray            # (faces, 3) from A into B
    pressures: np.ndarray          # (faces,) Drake's pressure at each centroid
    polygons: list                 # per face, its (k, 3) vertices in the world frame, Drake's order


def _transform(matrix):
    from pydrake.math import RigidTransform, RotationMatrix

    m = np.asarray(matrix, dtype=float)
    return RigidTransform(RotationMatrix(m[:3, :3]), m[:3, 3])


def query_object(a: DrakeBody, b: DrakeBody):
    """(QueryObject, {key: GeometryId}, keep) with A and B registered in that order; ``keep``
    holds the SceneGraph and its context, which must outlive the QueryObject."""
    from pydrake.common.value import AbstractValue
    from pydrake.geometry import (AddCompliantHydroelasticProperties, AddRigidHydroelasticProperties,
                                  FramePoseVector, GeometryFrame, GeometryInstance, Mesh,
                                  ProximityProperties, SceneGraph)
    from pydrake.math import RigidTransform

    scene_graph = SceneGraph()
    source = scene_graph.RegisterSource("fieldgen_test")
    frames, ids = {}, {}
    for key, body in (("a", a), ("b", b)):
        frame = scene_graph.RegisterFrame(source, GeometryFrame(key))
        gid = scene_graph.RegisterGeometry(source, frame, GeometryInstance(RigidTransform(), Mesh(str(body.path)), key))
        props = ProximityProperties()
        if body.kind == "compliant":
            AddCompliantHydroelasticProperties(1.0, float(body.modulus), props)
        else:
            AddRigidHydroelasticProperties(props)
        scene_graph.AssignRole(source, gid, props)
        frames[key], ids[key] = frame, gid
    assert ids["a"].get_value() < ids["b"].get_value()
    context = scene_graph.CreateDefaultContext()
    poses = FramePoseVector()
    for key, body in (("a", a), ("b", b)):
        poses.set_value(frames[key], _transform(body.pose))
    scene_graph.get_source_pose_port(source).FixValue(context, AbstractValue.Make(poses))
    return scene_graph.get_query_output_port().Eval(context), ids, (scene_graph, context)


def drake_contact(a: DrakeBody, b: DrakeBody) -> DrakeResult:
    """Drake's contact surface between A and B and the wrench on B (see the module docstring)."""
    from pydrake.geometry import HydroelasticContactRepresentation

    query, ids, keep = query_object(a, b)
    surfaces = query.ComputeContactSurfaces(HydroelasticContactRepresentation.kPolygon)
    force, torque = np.zeros(3), np.zeros(3)
    centroids, areas, normals, pressures, polygons = [], [], [], [], []
    for surface in surfaces:
        mesh, field = surface.poly_mesh_W(), surface.poly_e_MN()
        # Drake's normals point out of N into M; fieldgen's from A into B.
        sign = 1.0 if surface.id_M() == ids["b"] else -1.0
        for f in range(mesh.num_faces()):
            n = sign * np.asarray(mesh.face_normal(f))
            poly = mesh.element(f)
            V = np.array([mesh.vertex(poly.vertex(i)) for i in range(poly.num_vertices())])
            for i in range(1, len(V) - 1):
                tri = (V[0], V[i], V[i + 1])
                weight = 0.5 * np.linalg.norm(np.cross(tri[1] - tri[0], tri[2] - tri[0])) / 3.0
                for j in range(3):
                    q = 0.5 * (tri[j] + tri[(j + 1) % 3])
                    p = field.EvaluateCartesian(f, q)
                    force += weight * p * n
                    torque += weight * p * np.cross(q, n)
            polygons.append(V)
            centroids.append(np.asarray(mesh.element_centroid(f)))
            areas.append(mesh.area(f))
            normals.append(n)
            pressures.append(field.EvaluateCartesian(f, mesh.element_centroid(f)))
    areas = np.array(areas)
    del keep
    return DrakeResult(force, torque, len(areas), float(areas.sum()) if len(areas) else 0.0,
                       np.array(centroids).reshape(-1, 3), areas, np.array(normals).reshape(-1, 3),
                       np.array(pressures), polygons)


def write_obj(path, vertices, faces):
    """A surface as Wavefront .obj (full float precision), for Drake's rigid meshes."""
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in np.asarray(vertices, float).tolist()]
    lines += [f"f {i + 1} {j + 1} {k + 1}" for i, j, k in np.asarray(faces).tolist()]
    path.write_text("\n".join(lines) + "\n")
    return path
