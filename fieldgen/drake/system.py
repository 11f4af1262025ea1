"""The Drake system: fieldgen's contact wrenches fed to a ``MultibodyPlant`` (docs/model.md §5.5).

:func:`add_pressure_field_contact` reads the bodies (:mod:`fieldgen.drake.bodies`), filters
Drake's own collisions between them, adds a ``LeafSystem`` whose inputs are the plant's
``body_poses`` and ``body_spatial_velocities`` and whose output, a list of
``ExternallyAppliedSpatialForce``, is connected to the plant's applied-spatial-force input. The
output is computed from the plant's state alone, so it serves a discrete plant (forces applied
over each step) and a continuous one (any integrator) alike. Contact warnings (a body reaching a
compliant body's rigid core) are warned once per pair and kind, with the message ``fieldgen
contact`` reports, and kept with their first time in :meth:`contact_warnings`.
"""

from __future__ import annotations

import functools
import warnings
from typing import Mapping

import numpy as np

from fieldgen.drake.bodies import (HandledBody, body_wrenches, check_finite_states, contact_scene, geometry_states,
                                   handled_bodies, pressure_field_pairs)
from fieldgen.errors import InputError, OptionError
from fieldgen.install import install_hint
from fieldgen.runtime.contact.surface import FACE_RULES, ContactWarning
from fieldgen.runtime.dynamics.warnings import ContactWarningLog, collecting, set_time

WORLD = "world"


def pydrake_modules():
    """pydrake's modules this bridge uses; OptionError with the install command when it is missing."""
    try:
        # lazy: optional extra 'drake'
        from pydrake.common.value import AbstractValue
        from pydrake.geometry import CollisionFilterDeclaration, GeometrySet, SceneGraph
        from pydrake.math import RigidTransform
        from pydrake.multibody.math import SpatialForce, SpatialVelocity
        from pydrake.multibody.plant import ExternallyAppliedSpatialForce, MultibodyPlant
        from pydrake.systems.framework import LeafSystem
    except ImportError:
        raise OptionError("fieldgen.drake needs pydrake, which is not installed",
                          fix=f"install the optional extra 'drake': {install_hint('drake')}") from None
    return dict(AbstractValue=AbstractValue, CollisionFilterDeclaration=CollisionFilterDeclaration,
                GeometrySet=GeometrySet, SceneGraph=SceneGraph, RigidTransform=RigidTransform,
                SpatialForce=SpatialForce, SpatialVelocity=SpatialVelocity,
                ExternallyAppliedSpatialForce=ExternallyAppliedSpatialForce, LeafSystem=LeafSystem,
                MultibodyPlant=MultibodyPlant)


def _matrix(placement) -> np.ndarray:
    """A 4×4 array of a Drake ``RigidTransform`` (or of anything already 4×4)."""
    return placement.GetAsMatrix4() if hasattr(placement, "GetAsMatrix4") else np.asarray(placement)


def body_index(plant, name: str):
    """The ``BodyIndex`` of the body called ``name`` in ``plant`` (``"world"``: the world body)."""
    if name == WORLD:
        return plant.world_body().index()
    try:
        return plant.GetBodyByName(name).index()
    except RuntimeError as error:
        names = sorted({plant.get_body(i).name() for i in map(type(plant.world_body().index()),
                                                                range(plant.num_bodies()))})
        raise InputError(f"the plant has no single body named {name!r} ({str(error).splitlines()[0]})",
                         fix=f"key the bodies by one of {', '.join(names)}") from None


def scene_graphs(builder, scene_graph=None) -> list:
    """The ``SceneGraph`` the plant may use: ``[scene_graph]`` when given (OptionError unless it is
    a SceneGraph of ``builder``), else every SceneGraph of ``builder``."""
    d = pydrake_modules()
    graphs = [s for s in builder.GetSystems() if isinstance(s, d["SceneGraph"])]
    if scene_graph is None:
        return graphs
    if not isinstance(scene_graph, d["SceneGraph"]):
        raise OptionError(f"scene_graph ({type(scene_graph).__name__}) is not a pydrake SceneGraph",
                          fix="pass the SceneGraph AddMultibodyPlantSceneGraph returned, or leave scene_graph out")
    if not any(graph is scene_graph for graph in graphs):
        raise OptionError("scene_graph is not a system of this builder",
                          fix="pass the SceneGraph added with the plant to this DiagramBuilder")
    return [scene_graph]


def filter_drake_collisions(plant, indices, graphs: list) -> None:
    """Exclude Drake's own collisions between the bodies fieldgen handles (their contact is
    fieldgen's) in the plant's scene graph, the one of ``graphs`` (:func:`scene_graphs`). Of
    several, which is the plant's is not known: OptionError, since filtering none would leave
    Drake's contact acting beside fieldgen's, every force between the bodies counted twice."""
    d = pydrake_modules()
    if not graphs or not plant.geometry_source_is_registered():
        return
    frames = [plant.GetBodyFrameIdIfExists(i) for i in indices]
    frames = [f for f in frames if f is not None]
    if len(frames) < 2:
        return
    if len(graphs) > 1:
        raise OptionError(f"the builder has {len(graphs)} SceneGraphs, and which one the plant {plant.get_name()!r} "
                          "uses is not known", fix="pass the plant's as scene_graph= (the second value "
                                                  "AddMultibodyPlantSceneGraph returned)")
    graphs[0].collision_filter_manager().Apply(
        d["CollisionFilterDeclaration"]().ExcludeWithin(d["GeometrySet"](frames)))


@functools.cache
def system_class():
    """The ``LeafSystem`` class (made once, when pydrake is first needed)."""
    d = pydrake_modules()

    class PressureFieldContact(d["LeafSystem"]):
        """Inputs ``body_poses``, ``body_spatial_velocities`` (the plant's); output
        ``spatial_forces`` (for the plant's ``applied_spatial_force`` input)."""

        def __init__(self, bodies: list[HandledBody], indices, face_rule: str):
            super().__init__()
            self.bodies, self.indices = bodies, list(indices)
            self.scene = contact_scene(bodies, face_rule)
            self.pairs = pressure_field_pairs(bodies)
            self.log = ContactWarningLog()
            self._X_BG = [d["RigidTransform"](b.X_BG) for b in bodies]
            self.DeclareAbstractInputPort("body_poses", d["AbstractValue"].Make([d["RigidTransform"]()]))
            self.DeclareAbstractInputPort("body_spatial_velocities",
                                          d["AbstractValue"].Make([d["SpatialVelocity"]()]))
            self.DeclareAbstractOutputPort(
                "spatial_forces", lambda: d["AbstractValue"].Make([d["ExternallyAppliedSpatialForce"]()]),
                self._calc, prerequisites_of_calc={self.all_input_ports_ticket()})

        def wrenches(self, context) -> np.ndarray:
            """(n, 6) [force, torque about each body's mesh origin G] (world), bodies in the given order."""
            poses = self.get_input_port(0).Eval(context)
            velocities = self.get_input_port(1).Eval(context)
            X_WG, V_WB, p_WBo = [], [], []
            for index, X_BG in zip(self.indices, self._X_BG):
                X_WB = poses[int(index)]
                X = X_WB.multiply(X_BG)
                X_WG.append((X.translation(), X.rotation().ToQuaternion().wxyz()))
                V_WB.append(velocities[int(index)].get_coeffs())
                p_WBo.append(X_WB.translation())
            check_finite_states([b.name for b in self.bodies], X_WG, V_WB, context.get_time())
            seen = len(self.log.entries)
            with collecting(self.log):
                set_time(context.get_time())
                out = body_wrenches(self.scene, self.pairs, geometry_states(X_WG, V_WB, p_WBo))
            for entry in self.log.as_list()[seen:]:
                warnings.warn(f"{entry['pair'][0]}/{entry['pair'][1]} at t = {entry['first_time']:.6g} s: "
                              f"{entry['message']}", ContactWarning, stacklevel=2)
            return out

        def contact_warnings(self) -> list[dict]:
            """The contact warnings so far: the first of each (pair, kind), with its time."""
            return self.log.as_list()

        def _calc(self, context, output):
            forces = []
            for body, index, wrench in zip(self.bodies, self.indices, self.wrenches(context)):
                if body.name == WORLD:
                    continue
                force = d["ExternallyAppliedSpatialForce"]()
                force.body_index = index
                force.p_BoBq_B = body.X_BG[:3, 3]
                force.F_Bq_W = d["SpatialForce"](tau=wrench[3:], f=wrench[:3])
                forces.append(force)
            output.set_value(forces)

    return PressureFieldContact


def check_plant(builder, plant) -> None:
    """OptionError unless ``plant`` is a finalized ``MultibodyPlant`` added to ``builder`` whose
    applied-spatial-force input is still free: Drake would end the whole process (not raise) on
    a second connection to it, and a plant of another builder is found only at ``Connect``."""
    d = pydrake_modules()
    if not isinstance(plant, d["MultibodyPlant"]):
        raise OptionError(f"plant ({type(plant).__name__}) is not a pydrake MultibodyPlant (of float)",
                          fix="give the plant AddMultibodyPlantSceneGraph(builder, time_step) returned")
    try:
        systems = builder.GetSystems()
    except RuntimeError:       # Build() was called: the builder takes no more systems
        raise OptionError("the builder has already built its diagram", fix="call add_pressure_field_contact "
                          "before builder.Build()") from None
    if not any(system is plant for system in systems):
        raise OptionError(f"the plant {plant.get_name()!r} is not a system of this builder",
                          fix="give the DiagramBuilder the plant was added to")
    if not plant.is_finalized():
        raise OptionError("the plant is not finalized: its body poses and velocities are not yet ports",
                          fix="call plant.Finalize() before add_pressure_field_contact")
    if builder.IsConnectedOrExported(plant.get_applied_spatial_force_input_port()):
        raise OptionError("the plant's applied_spatial_force input is already connected (by an earlier "
                          "add_pressure_field_contact or another system); Drake takes one source for it",
                          fix="call add_pressure_field_contact once per plant, with every body in one mapping")


def add_pressure_field_contact(builder, plant, bodies: Mapping, units: Mapping | None = None, *,
                               friction: Mapping | None = None, face_rule: str = "all", scene_graph=None,
                               name: str = "fieldgen_pressure_field_contact"):
    """Add fieldgen's pressure-field contact between ``bodies`` of a finalized ``plant`` to ``builder``.

    ``bodies``: Drake body name (``"world"`` for the world) -> a fieldgen asset (compliant) or a
    closed surface mesh (rigid), in that body's frame, or a ``(path, RigidTransform)`` pair
    placing it. ``units``: a rigid mesh's length unit, by path or body name (default m).
    ``friction``: a coefficient by path or body name, overriding the file's (a rigid mesh has
    none: its pairs are frictionless unless given, as in ``fieldgen contact``). ``face_rule``:
    ``"all"`` or ``"drake"`` (docs/model.md §3.5). Returns the added system; its output is
    connected to ``plant.get_applied_spatial_force_input_port()``.
    """
    check_plant(builder, plant)
    if face_rule not in FACE_RULES:
        raise OptionError(f"face_rule {face_rule!r} is not one of {FACE_RULES}", fix='use "all" or "drake"')
    if not isinstance(name, str):
        raise OptionError(f"name {name!r} is not a string", fix='give the system a name, e.g. name="pfc"')
    graphs = scene_graphs(builder, scene_graph)
    handled = handled_bodies(bodies, units, friction, _matrix)
    if not pressure_field_pairs(handled):
        raise OptionError("no compliant body among the bodies given: no pair has a pressure field",
                          fix="give at least one fieldgen asset (.vtu)")
    indices = [body_index(plant, b.name) for b in handled]
    filter_drake_collisions(plant, indices, graphs)
    system = builder.AddSystem(system_class()(handled, indices, face_rule))
    system.set_name(name)
    builder.Connect(plant.get_body_poses_output_port(), system.get_input_port(0))
    builder.Connect(plant.get_body_spatial_velocities_output_port(), system.get_input_port(1))
    builder.Connect(system.get_output_port(0), plant.get_applied_spatial_force_input_port())
    return system
