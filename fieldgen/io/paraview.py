"""ParaView scripts (pvpython / the GUI's Python shell) that show what fieldgen wrote.

Each script is plain ``paraview.simple`` (ParaView 5.10 or newer) with the file paths and a
few numbers baked in, so it runs anywhere ParaView is installed:

- :func:`asset_script` (``fieldgen inspect --paraview``): the asset cut open by a plane
  normal to x, y or z (through the bounding-box centre, or the median vertex where that
  plane misses the part, as in ``inspect --png``), seen head-on from the side that was cut away, coloured by the
  pressure p0 (Pa) or the extent e, with the part's bounding box for scale. Inside a tet
  the field is linear (D 5.0.1), so ParaView's Clip, which interpolates along the cut
  edges, shows it exactly on the cut face.
- :func:`contact_script` (``fieldgen simulate -o DIR``, ``fieldgen contact --paraview``):
  the contact surface(s) coloured by pressure with the bodies drawn see-through: the
  surface, where the two pressures are equal (E19 III, D 5.0.2), lies inside both bodies,
  so opaque ones would hide it. For a ``.pvd`` time series the script plays the animation.

Run ``pvpython SCRIPT.py`` for a window, ``pvpython SCRIPT.py --screenshot out.png`` for a
picture (Debian/Ubuntu's ParaView needs an X display:
``xvfb-run -a -s "-screen 0 1600x1200x24 -noreset" pvpython ...``), or
in the GUI: View > Python Shell > Run Script. ``--help`` lists the options.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from fieldgen import __version__
from fieldgen.io.asset import atomic_output, read_asset

AXES = "xyz"
#: Colour map of every script (the same as ``inspect --png``).
PRESET = "Viridis (matplotlib)"
#: Screenshot size when ``--resolution`` is not given.
RESOLUTION = (1200, 900)


def _tidy(value):
    """Floats to 12 significant digits (no 1e-20 noise or 0.009000000000000001 in the script)."""
    if isinstance(value, dict):
        return {k: _tidy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tidy(v) for v in value]
    if isinstance(value, float):
        tidy = float(f"{value:.12g}")
        return 0.0 if abs(tidy) < 1e-15 else tidy
    return value


def _constants(pairs) -> list[str]:
    return [f"{name} = {_tidy(value)!r}" for name, value in pairs]


# Code shared by both scripts: option parsing (pvpython's arguments follow the script name;
# in the GUI there are none) and the end (picture or window).
_COMMON = '''
import sys

import paraview
from paraview.simple import (ColorBy, FeatureEdges, GetActiveViewOrCreate, GetAnimationScene,
                             GetColorTransferFunction, GetScalarBar, Interact, Render,
                             SaveScreenshot, Show)

IN_GUI = bool(getattr(paraview, "fromGUI", False))


def parse_options(add_options, description):
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--screenshot", metavar="PNG",
                        help="save a picture (PNG) and exit instead of opening a window")
    parser.add_argument("--resolution", default="%dx%d" % tuple(RESOLUTION), metavar="WxH",
                        help="picture size in pixels (default %(default)s)")
    add_options(parser)
    options = parser.parse_args([] if IN_GUI else list(getattr(sys, "argv", [])[1:]))
    try:
        width, height = (int(v) for v in options.resolution.lower().split("x"))
    except ValueError:
        parser.error("--resolution must look like 1200x900")
    options.size = [width, height]
    return options


def new_view(options):
    view = GetActiveViewOrCreate("RenderView")
    if options.screenshot:
        view.ViewSize = options.size   # lay out text and colour bar for the picture's size
    return view


def colour_by(display, view, array, title, data_range):
    """Colour ``display`` by the point array ``array`` over a fixed range, with a titled bar."""
    ColorBy(display, ("POINTS", array))
    lut = GetColorTransferFunction(array)
    lut.ApplyPreset(PRESET, True)
    if hasattr(lut, "AutomaticRescaleRangeMode"):
        lut.AutomaticRescaleRangeMode = "Never"   # keep the range fixed while time changes
    low, high = data_range
    lut.RescaleTransferFunction(float(low), float(high) if high > low else float(low) + 1.0)
    display.SetScalarBarVisibility(view, True)
    bar = GetScalarBar(lut, view)
    bar.Title = title
    bar.ComponentTitle = ""
    bar.AutomaticLabelFormat = 0
    bar.LabelFormat = bar.RangeLabelFormat = "%-#.3g"
    return lut


def head_light(view):
    """One white light at the camera instead of the light kit: a face seen head-on then shows
    exactly the colour-bar colour of its value; oblique faces are shaded."""
    from paraview.simple import AddLight

    view.UseLight = 0
    light = AddLight(view=view)
    light.Coords = "Headlight"
    light.Intensity = 1.0


def look_along(view, focus, direction, up, fit, parallel=False, aspect=4.0 / 3.0):
    """Camera looking along ``direction`` (unit) with ``focus`` a little left of the picture's
    centre (the colour bar takes the right edge), zoomed so that ``fit`` (m) spans the view's
    height; ``aspect`` is the view's width / height."""
    import math

    Render(view)   # the first render resets the camera; do it before placing ours
    distance = (0.5 * fit / math.tan(math.radians(15.0))) if not parallel else 10.0 * SIZE
    right = [direction[1] * up[2] - direction[2] * up[1], direction[2] * up[0] - direction[0] * up[2],
             direction[0] * up[1] - direction[1] * up[0]]
    focus = [f + 0.06 * fit * aspect * r for f, r in zip(focus, right)]
    view.CameraFocalPoint = list(focus)
    view.CameraPosition = [f - distance * d for f, d in zip(focus, direction)]
    view.CameraViewUp = list(up)
    view.CameraViewAngle = 30.0
    view.CameraParallelProjection = 1 if parallel else 0
    view.CameraParallelScale = 0.5 * fit


def finish(view, options):
    """Save the picture (``--screenshot``) or leave the scene on screen."""
    Render(view)
    if options.screenshot:
        SaveScreenshot(options.screenshot, view, ImageResolution=options.size)
        print("wrote %s" % options.screenshot)
    elif not IN_GUI:
        Interact(view)
'''


_ASSET_BODY = '''

def add_options(parser):
    parser.add_argument("--cut", choices=("x", "y", "z"), default=CUT,
                        help="normal of the cut plane (default %(default)s)")
    parser.add_argument("--field", choices=("pressure", "extent"), default="pressure",
                        help="colour the cut by the pressure p0 (Pa) or the extent e (default %(default)s)")


def main():
    from paraview.simple import Clip, Outline, XMLUnstructuredGridReader

    options = parse_options(add_options, "Show %s cut open, coloured by pressure." % ASSET)
    axis = "xyz".index(options.cut)
    normal = [1.0 if i == axis else 0.0 for i in range(3)]
    view = new_view(options)

    reader = XMLUnstructuredGridReader(registrationName="asset", FileName=[ASSET])
    reader.PointArrayStatus = ["pressure", "extent"]

    # Keep the half behind the plane (Invert): its cut face looks towards +normal.
    clip = Clip(registrationName="cut %s" % options.cut, Input=reader)
    clip.ClipType = "Plane"
    clip.ClipType.Origin = list(ORIGINS[options.cut])
    clip.ClipType.Normal = normal
    clip.Invert = 1
    display = Show(clip, view)
    if options.field == "pressure":
        colour_by(display, view, "pressure", "pressure p0 [Pa]", PRESSURE_RANGE)
    else:
        colour_by(display, view, "extent", "extent e [-]", (0.0, 1.0))

    # The part's bounding box, for scale and context.
    box = Show(Outline(registrationName="bounding box", Input=reader), view)
    box.AmbientColor = box.DiffuseColor = [0.6, 0.6, 0.6]

    # Head-on: from the side that was cut away, looking along -normal at the cut face.
    # Zoomed so that the section's bounding rectangle fills about 80 % of the picture.
    up_axis = 2 if axis != 2 else 1
    side_axis = 3 - axis - up_axis
    up = [1.0 if i == up_axis else 0.0 for i in range(3)]
    width, height = options.size
    fit = max(EXTENT[up_axis], EXTENT[side_axis] * height / float(width)) / 0.8
    look_along(view, ORIGINS[options.cut], [-n for n in normal], up, fit, parallel=True,
               aspect=width / float(height))
    head_light(view)
    finish(view, options)


main()
'''


_CONTACT_BODY = '''

def add_options(parser):
    if len(TIMES) > 1:
        parser.add_argument("--time", type=float, default=None, metavar="T",
                            help="show the frame at time T (s) instead of playing the series "
                                 "(with --screenshot: default %g s, the frame with the most contact)"
                                 % DEFAULT_TIME)


def open_file(path, name):
    from paraview.simple import OpenDataFile, RenameSource

    source = OpenDataFile(path)
    RenameSource(name, source)
    return source


def main():
    options = parse_options(add_options, "Show the contact surface of %s coloured by pressure." % CONTACT)
    view = new_view(options)

    if BODIES:
        bodies = open_file(BODIES, "bodies")
        # See-through bodies and their sharp edges: the contact surface lies inside the overlap.
        shell = Show(bodies, view)
        shell.AmbientColor = shell.DiffuseColor = [0.75, 0.75, 0.78]
        shell.Opacity = 0.12
        edges = Show(FeatureEdges(registrationName="body edges", Input=bodies), view)
        edges.AmbientColor = edges.DiffuseColor = [0.15, 0.15, 0.15]

    contact = open_file(CONTACT, "contact surface")
    patch = Show(contact, view)
    patch.SetRepresentationType("Surface")
    colour_by(patch, view, "pressure", "contact pressure p0 [Pa]", (0.0, PRESSURE_MAX))

    # From the B side of the mean contact normal, tilted 35 degrees so the bodies read as solids.
    import math

    tilt = math.radians(35.0)
    eye = [math.cos(tilt) * n - math.sin(tilt) * u for n, u in zip(NORMAL, UP)]
    up = [math.cos(tilt) * u + math.sin(tilt) * n for n, u in zip(NORMAL, UP)]
    look_along(view, FOCUS, [-e for e in eye], up, 1.6 * SIZE, aspect=options.size[0] / float(options.size[1]))

    if len(TIMES) > 1:
        scene = GetAnimationScene()
        scene.UpdateAnimationUsingDataTimeSteps()
        chosen = options.time
        if chosen is None and options.screenshot:
            chosen = DEFAULT_TIME
        if chosen is not None:
            # the recorded frame at or before T (the first one when T is earlier)
            scene.AnimationTime = max([TIMES[0]] + [t for t in TIMES if t <= chosen + 1e-12])
        elif not options.screenshot:
            scene.PlayMode = "Snap To TimeSteps"
            scene.Play()
    finish(view, options)


main()
'''


def _header(command: str, what: str, usage: list[str]) -> list[str]:
    return [
        f"# ParaView script written by `{command}` (fieldgen {__version__}): {what}",
        "#",
        "# Run:  pvpython THIS.py                         a window (ParaView 5.10 or newer)",
        "#       pvpython THIS.py --screenshot out.png   a picture instead (Debian/Ubuntu's pvpython needs",
        "#           a display: xvfb-run -a -s '-screen 0 1600x1200x24 -noreset' pvpython THIS.py ...)",
        *[f"#       {line}" for line in usage],
        "#       in the ParaView GUI: View > Python Shell > Run Script",
    ]


def cut_origin(points: np.ndarray, tets: np.ndarray, axis: int) -> list[float]:
    """Where the cut normal to ``axis`` passes: the bounding-box centre, or, when the half the
    scripts keep (below the plane) has no tet reaching the plane (two parts side by side with the
    gap in the middle), through the tet centroid nearest to it along ``axis``: a centroid lies
    inside its tet, so there is material to cut on both sides."""
    points = np.asarray(points, dtype=np.float64)
    tets = np.asarray(tets)
    low, high = points.min(axis=0), points.max(axis=0)
    origin = 0.5 * (low + high)
    coordinate = points[:, axis][tets]
    if not np.any((coordinate < origin[axis]).any(axis=1) & (coordinate >= origin[axis]).any(axis=1)):
        centroids = coordinate.mean(axis=1)
        origin[axis] = float(centroids[np.argmin(np.abs(centroids - origin[axis]))])
    return [float(v) for v in origin]


def asset_script(asset_path, asset=None, *, cut: str = "x") -> str:
    """pvpython script: ``asset_path`` cut by the plane normal to ``cut`` through the bounding-box
    centre, seen head-on, coloured by pressure (``--field extent`` at run time for e)."""
    if cut not in AXES:
        raise ValueError(f"cut must be one of x, y, z, not {cut!r}")
    path = os.path.abspath(os.fspath(asset_path))
    if asset is None:
        asset = read_asset(path)
    low, high = asset.points.min(axis=0), asset.points.max(axis=0)
    pressure = np.asarray(asset.pressure, dtype=np.float64)
    lines = _header("fieldgen inspect --paraview",
                    "the asset cut open, the field on the cut face.",
                    ["pvpython THIS.py --cut y --field extent      another plane, the extent e"])
    lines += ["", "ASSET = %r" % path]
    origins = {AXES[axis]: cut_origin(asset.points, asset.tets, axis) for axis in range(3)}
    lines += _constants([
        ("CUT", cut),
        ("ORIGINS", origins),                                 # the cut plane normal to each axis passes here
        ("EXTENT", [float(v) for v in high - low]),           # m, the bounding box's sides
        ("SIZE", float(np.max(high - low))),
        ("PRESSURE_RANGE", [min(0.0, float(pressure.min())), float(pressure.max())]),
        ("PRESET", PRESET),
        ("RESOLUTION", list(RESOLUTION)),
    ])
    return "\n".join(lines) + "\n" + _COMMON + _ASSET_BODY


@dataclass
class ContactView:
    """What a contact script needs to frame its picture (world frame, metres, pascals)."""

    focus: list          # centre of the contact surfaces' bounding box
    size: float          # its longest side (floored so a tiny patch still gets a sensible zoom)
    normal: list         # area-weighted mean contact normal (from A into B), unit
    pressure_max: float  # largest vertex pressure over all surfaces
    default_time: float  # the frame with the largest contact area


def contact_view(frames, times=None, fallback_bounds=None) -> ContactView:
    """Frame the contact surfaces ``frames``: one list of surfaces per time (``times``)."""
    times = [0.0] * len(frames) if times is None else [float(t) for t in times]
    lows, highs, weighted = [], [], np.zeros(3)
    pressure_max, best_area, default_time = 0.0, -1.0, times[0] if times else 0.0
    for t, surfaces in zip(times, frames):
        area = 0.0
        for s in surfaces:
            if s.n_faces == 0:
                continue
            vertices = np.asarray(s.vertices, dtype=np.float64).reshape(-1, 3)
            lows.append(vertices.min(axis=0))
            highs.append(vertices.max(axis=0))
            weighted += (np.asarray(s.areas)[:, None] * np.asarray(s.normals).reshape(-1, 3)).sum(axis=0)
            pressure_max = max(pressure_max, float(np.max(s.vertex_pressure)))
            area += float(np.sum(s.areas))
        if area > best_area + 1e-15:
            best_area, default_time = area, t
    if lows:
        low, high = np.min(lows, axis=0), np.max(highs, axis=0)
    elif fallback_bounds is not None:
        low, high = (np.asarray(b, dtype=np.float64) for b in fallback_bounds)
    else:
        low = high = np.zeros(3)
    norm = np.linalg.norm(weighted)
    normal = weighted / norm if norm > 0 else np.array([0.0, 0.0, 1.0])
    return ContactView(focus=[float(v) for v in 0.5 * (low + high)], size=max(float(np.max(high - low)), 1e-3),
                       normal=[float(v) for v in normal], pressure_max=pressure_max,
                       default_time=float(default_time))


def _up(normal) -> list:
    """A view-up perpendicular to ``normal``: world z unless the normal is nearly z, then y."""
    n = np.asarray(normal, dtype=np.float64)
    seed = np.array([0.0, 0.0, 1.0]) if abs(n[2]) < 0.9 else np.array([0.0, 1.0, 0.0])
    up = seed - (seed @ n) * n
    return [float(v) for v in up / np.linalg.norm(up)]


def contact_script(contact_path, view: ContactView, *, bodies_path=None, times=(0.0,),
                   command: str = "fieldgen contact --paraview") -> str:
    """pvpython script: the contact surface(s) at ``contact_path`` (.vtp/.vtu, or a .pvd series
    with ``times``) coloured by pressure, the bodies at ``bodies_path`` drawn see-through."""
    times = [float(t) for t in times]
    usage = (["pvpython THIS.py --screenshot f.png --time 0.1   the frame at t = 0.1 s"]
             if len(times) > 1 else [])
    what = ("the contact surfaces over time, coloured by pressure, with the bodies."
            if len(times) > 1 else "the contact surface coloured by pressure, with the bodies.")
    lines = _header(command, what, usage)
    lines += ["", "CONTACT = %r" % os.path.abspath(os.fspath(contact_path)),
              "BODIES = %r" % (None if bodies_path is None else os.path.abspath(os.fspath(bodies_path)))]
    lines += _constants([
        ("TIMES", times),
        ("DEFAULT_TIME", float(view.default_time)),
        ("FOCUS", view.focus),                  # centre of the contact surfaces (all times)
        ("SIZE", float(view.size)),             # m
        ("NORMAL", view.normal),                # mean contact normal, from A into B
        ("UP", _up(view.normal)),
        ("PRESSURE_MAX", float(view.pressure_max)),
        ("PRESET", PRESET),
        ("RESOLUTION", list(RESOLUTION)),
    ])
    return "\n".join(lines) + "\n" + _COMMON + _CONTACT_BODY


def write_script(path, text: str) -> str:
    """Write a script atomically; return the path."""
    with atomic_output(path) as temporary:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)
    return str(path)
