"""Run inside benchmarks/.drake-venv (pydrake 1.51.1): time Drake's hydroelastic contact surface.

Usage: python _drake_contact.py CASE.json  ->  prints one JSON object on stdout.

CASE.json: {"a": {"path": ..., "kind": "compliant"|"rigid", "modulus": E, "pose": 4x4},
            "b": {...}, "repeat": N}
Only SceneGraph is used (no MultibodyPlant): two frames with fixed poses, one geometry each,
hydroelastic proximity properties from Drake's documented helpers. Timed: QueryObject.
ComputeContactSurfaces(kPolygon) alone, median over N calls after one warm-up. Force on B
(world frame): Σ_faces p(centroid)·area·n̂, n̂ oriented from A into B.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np
from pydrake.common.value import AbstractValue
from pydrake.geometry import (AddCompliantHydroelasticProperties, AddRigidHydroelasticProperties,
                              FramePoseVector, GeometryFrame, GeometryInstance,
                              HydroelasticContactRepresentation, Mesh, ProximityProperties, SceneGraph)
from pydrake.math import RigidTransform, RotationMatrix


def transform(matrix) -> RigidTransform:
    m = np.asarray(matrix, dtype=float)
    return RigidTransform(RotationMatrix(m[:3, :3]), m[:3, 3])


def main() -> None:
    case = json.load(open(sys.argv[1]))
    scene_graph = SceneGraph()
    source = scene_graph.RegisterSource("fieldgen_benchmark")
    frames, geometry = {}, {}
    for key in ("a", "b"):
        body = case[key]
        frame = scene_graph.RegisterFrame(source, GeometryFrame(key))
        gid = scene_graph.RegisterGeometry(source, frame, GeometryInstance(RigidTransform(), Mesh(body["path"]), key))
        props = ProximityProperties()
        if body["kind"] == "compliant":
            AddCompliantHydroelasticProperties(1.0, float(body["modulus"]), props)
        else:
            AddRigidHydroelasticProperties(props)
        scene_graph.AssignRole(source, gid, props)
        frames[key], geometry[key] = frame, gid
    context = scene_graph.CreateDefaultContext()
    poses = FramePoseVector()
    for key in ("a", "b"):
        poses.set_value(frames[key], transform(case[key]["pose"]))
    scene_graph.get_source_pose_port(source).FixValue(context, AbstractValue.Make(poses))
    query = scene_graph.get_query_output_port().Eval(context)
    rep = HydroelasticContactRepresentation.kPolygon
    surfaces = query.ComputeContactSurfaces(rep)   # warm-up (and the result we report)
    times = []
    for _ in range(int(case.get("repeat", 10))):
        start = time.perf_counter()
        query.ComputeContactSurfaces(rep)
        times.append(time.perf_counter() - start)
    force = np.zeros(3)
    area = 0.0
    faces = 0
    for surface in surfaces:
        mesh, field = surface.poly_mesh_W(), surface.poly_e_MN()
        # Drake's normals point out of N into M; we want them from A into B.
        sign = 1.0 if surface.id_M() == geometry["b"] else -1.0
        for f in range(mesh.num_faces()):
            c = mesh.element_centroid(f)
            force += sign * field.EvaluateCartesian(f, c) * mesh.area(f) * np.asarray(mesh.face_normal(f))
            area += mesh.area(f)
        faces += mesh.num_faces()
    print(json.dumps({"median_seconds": statistics.median(times), "force": force.tolist(), "area": area,
                      "faces": faces, "drake": __import__("pydrake").__file__}))


if __name__ == "__main__":
    main()
