"""The ParaView scripts, run in real ParaView (pvpython), judged by the pictures they save.

Needs ``pvpython`` and, without a display, ``Xvfb`` (Debian/Ubuntu: ``apt-get install
paraview python3-paraview xvfb``). Where they are missing these tests are deselected and
``make test`` says so in one line (tests/conftest.py); with ``CI=true`` they fail instead.
``make check-paraview`` runs only this file and keeps the pictures
(``FIELDGEN_PARAVIEW_PICTURES=DIR``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.paraview


@pytest.fixture(scope="module")
def display():
    """An X display for pvpython: $DISPLAY if set, else an Xvfb of our own for this module.

    Xvfb picks a free display number itself and reports it once it accepts connections
    (-displayfd), so parallel workers never race for a number; -noreset keeps it from resetting
    whenever its last client disconnects, which otherwise refuses some of the connections pvpython
    opens one after another (a few percent of them).
    """
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.fail("no display and no Xvfb: apt-get install xvfb (or run under a display)")
    server = subprocess.Popen([xvfb, "-displayfd", "1", "-screen", "0", "1600x1200x24", "-nolisten", "tcp",
                               "-noreset"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        number = server.stdout.readline().decode().strip()
        if not number.isdigit():
            pytest.fail("Xvfb did not start")
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def render(display: str, script: Path, png: Path, *args: str) -> np.ndarray:
    """Run ``pvpython script --screenshot png args`` and return the picture as RGB floats in [0, 1]."""
    import matplotlib.image

    pvpython = shutil.which("pvpython")
    if pvpython is None:
        pytest.fail("pvpython is needed: apt-get install paraview python3-paraview xvfb")
    run = subprocess.run([pvpython, str(script), "--screenshot", str(png), *args], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, DISPLAY=display))
    assert run.returncode == 0 and png.is_file(), f"pvpython failed:\n{run.stdout}\n{run.stderr}"
    keep = os.environ.get("FIELDGEN_PARAVIEW_PICTURES")      # make check-paraview keeps them to look at
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / f"{os.environ.get('PYTEST_CURRENT_TEST', 'x').split('::')[-1].split(' ')[0]}"
                                      f"-{png.name}")
    return matplotlib.image.imread(png)[..., :3].astype(np.float64)


def colormap_positions(image: np.ndarray, tolerance: float = 0.03) -> np.ndarray:
    """Position (0..1) on the viridis map of each pixel showing a viridis colour, else NaN."""
    from matplotlib import colormaps
    from scipy.spatial import cKDTree

    lut = colormaps["viridis"](np.linspace(0.0, 1.0, 256))[:, :3]
    distance, nearest = cKDTree(lut).query(image.reshape(-1, 3))
    return np.where(distance < tolerance, nearest / 255.0, np.nan)


def shaded_positions(image: np.ndarray, tolerance: float = 0.03, step: int = 3) -> np.ndarray:
    """Position (0..1) on the viridis map of clearly coloured pixels (every ``step``-th row and
    column), allowing for shading and a see-through grey layer in front: a pixel matches map colour
    c when it is a·c + b·(1, 1, 1) (a > 0.3) to within ``tolerance``. Else NaN."""
    from matplotlib import colormaps

    lut = colormaps["viridis"](np.linspace(0.0, 1.0, 256))[:, :3]
    rgb = image[::step, ::step].reshape(-1, 3)
    basis = np.stack([lut, np.ones_like(lut)], axis=2)                     # (256, 3, 2)
    pinv = np.linalg.pinv(basis)                                            # (256, 2, 3)
    coefficients = np.einsum("kij,nj->nki", pinv, rgb)                      # (n, 256, 2)
    residual = np.linalg.norm(np.einsum("kij,nkj->nki", basis, coefficients) - rgb[:, None, :], axis=2)
    residual[coefficients[..., 0] < 0.3] = np.inf
    best = residual.argmin(axis=1)
    good = residual[np.arange(len(rgb)), best] < tolerance
    coloured = rgb.max(axis=1) - rgb.min(axis=1) > 0.15
    return np.where(good & coloured, best / 255.0, np.nan)


def most_common_colour_share(image: np.ndarray) -> float:
    """Share of the pixels that have the picture's most frequent colour (1.0: a uniform picture)."""
    _, counts = np.unique(np.round(image.reshape(-1, 3) * 255).astype(np.int64), axis=0, return_counts=True)
    return counts.max() / counts.sum()


def saturated_share(image: np.ndarray, threshold: float = 0.25) -> float:
    """Share of the pixels that are clearly coloured (not the grey background or grey bodies)."""
    rgb = image.reshape(-1, 3)
    return float(np.mean(rgb.max(axis=1) - rgb.min(axis=1) > threshold))


def cut_figures(image: np.ndarray) -> dict:
    """The numbers the paddle test judges, as shares of the whole picture."""
    v = colormap_positions(image)
    shown = np.isfinite(v)
    return {"colormap": float(shown.mean()),
            "high": float(np.mean(shown & (v >= 0.8))),      # top fifth of the colour bar
            "low": float(np.mean(shown & (v <= 0.1))),
            "middle": float(np.mean(shown & (np.abs(v - 0.5) <= 0.1))),
            "uniform": most_common_colour_share(image)}


def assert_shows_the_field_on_a_cut(image: np.ndarray) -> dict:
    """The cut face seen head-on: a large area in the colour bar's exact colours, with the high end,
    the low end and the middle of the map each over a visible part of the picture. (The colour bar
    itself covers about 0.5 % of a 1200x900 picture, so it cannot pass this alone; a picture of the
    part's outer skin, where p = 0, or a face seen at an angle, whose colours are shaded away from
    the map, does not pass either.)"""
    figures = cut_figures(image)
    assert figures["uniform"] < 0.9, figures
    assert figures["colormap"] > 0.10, figures
    assert figures["high"] > 0.01, figures
    assert figures["low"] > 0.02 and figures["middle"] > 0.01, figures
    return figures


@pytest.fixture(scope="module")
def paddle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("paddle") / "paddle.vtu"
    result = CliRunner().invoke(main, ["build", "--spec", str(ROOT / "assets" / "paddle.toml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_paddle_cut_shows_the_pressure_field(paddle, display, tmp_path):
    """The paddle (foam round a carved-out core): p = 0 on the skin, the top of the law at the core."""
    script = tmp_path / "view.py"
    result = CliRunner().invoke(main, ["inspect", str(paddle), "--paraview", str(script)])
    assert result.exit_code == 0, result.output
    image = render(display, script, tmp_path / "cut_x.png")
    assert image.shape == (900, 1200, 3)
    figures = assert_shows_the_field_on_a_cut(image)
    print("paddle cut x:", figures)


def test_paddle_other_cuts_and_the_extent(paddle, display, tmp_path):
    script = tmp_path / "view.py"
    result = CliRunner().invoke(main, ["inspect", str(paddle), "--paraview", str(script), "--cut", "z"])
    assert result.exit_code == 0, result.output
    # the z mid-plane of the flat paddle: a wide ring round the core
    image = render(display, script, tmp_path / "cut_z.png", "--resolution", "800x600")
    assert image.shape == (600, 800, 3)
    assert_shows_the_field_on_a_cut(image)
    # the extent e runs 0 (skin) .. 1 (core) over the same cut, so the map's ends show again
    extent = render(display, script, tmp_path / "extent_y.png", "--cut", "y", "--field", "extent")
    figures = cut_figures(extent)
    assert figures["colormap"] > 0.05 and figures["high"] > 0.003 and figures["low"] > 0.01, figures


def test_coin_simulation_frame_shows_a_coloured_contact_patch(display, tmp_path):
    out = tmp_path / "coin"
    result = CliRunner().invoke(main, ["simulate", str(ROOT / "assets" / "scenes" / "coin.toml"),
                                       "--duration", "0.02", "-o", str(out), "--quiet", "--json"])
    assert result.exit_code == 0, result.output
    script = out / "view.py"
    assert script.is_file()
    image = render(display, script, tmp_path / "frame.png", "--time", "0.01")
    # the coin's patch (r = 12 mm, pressure m g / (pi r^2) ~ 120 Pa) is vivid; the bodies are grey
    coloured = saturated_share(image)
    assert coloured > 0.02, f"only {coloured:.2%} of the picture is coloured"
    # the patch sits in the middle of the picture, the colour bar at the right edge
    centre = image[300:600, 300:900]
    assert saturated_share(centre) > 0.05
    # --time picks the frame: the coin slides along +x (right in the picture) at about 0.7 m/s
    # (at t = 0 the coin has only just touched: a faint, dark patch; judge where the coin is)
    early, late = (render(display, script, tmp_path / f"t{t}.png", "--time", t) for t in ("0", "0.02"))

    def patch_column(picture):
        rgb = picture[100:800, :1000]                       # left of the colour bar, above the axes
        background = np.median(rgb.reshape(-1, 3), axis=0)
        columns = np.nonzero(np.abs(rgb - background).max(axis=2) > 0.08)[1]
        assert len(columns) > 0.02 * rgb.shape[0] * rgb.shape[1]
        return columns.mean()

    assert patch_column(early) + 50 < patch_column(image) < patch_column(late) - 50


def test_contact_query_script_shows_the_patch(display, tmp_path):
    import trimesh

    ball = tmp_path / "ball.vtu"
    assert CliRunner().invoke(main, ["build", "--spec", str(ROOT / "assets" / "foam_ball.toml"),
                                     "-o", str(ball)]).exit_code == 0
    plate = tmp_path / "plate.stl"
    trimesh.creation.box([0.2, 0.2, 0.02]).export(plate)
    script = tmp_path / "view.py"
    # the ball is 70 mm tall (z from -35 mm): the plate's top at -34 mm presses 1 mm into it
    result = CliRunner().invoke(main, ["contact", str(ball), str(plate), "--pose-b", "0,0,-0.044,0,0,0",
                                       "-o", str(tmp_path / "surface.vtp"), "--paraview", str(script)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "view_bodies.vtp").is_file()
    image = render(display, script, tmp_path / "query.png")
    patch = image[200:700, 250:950]          # the middle of the picture, away from the colour bar
    assert saturated_share(patch) > 0.2
    values = shaded_positions(patch)
    # the patch spans the map: Hertz-like, high in the middle, falling to 0 at its rim
    shown = np.isfinite(values)
    assert shown.mean() > 0.2
    assert np.mean(values[shown] > 0.8) > 0.02 and np.mean(values[shown] < 0.2) > 0.02


if __name__ == "__main__":      # pragma: no cover - measure a picture by hand
    import matplotlib.image

    for name in sys.argv[1:]:
        print(name, cut_figures(matplotlib.image.imread(name)[..., :3].astype(np.float64)))
