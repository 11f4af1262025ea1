"""`fieldgen simulate`: rigid bodies driven by pressure-field contact (docs/model.md §5)."""

from __future__ import annotations

import dataclasses
import math

import click

from fieldgen.errors import FieldgenError, OptionError
from fieldgen.io.asset import prepare_output
from fieldgen.progress import Progress
from fieldgen.runtime.dynamics.choices import FRICTION_MODELS, INTEGRATORS

from .common import EXIT_USAGE, echo_report, fail, json_option, print_json, quiet_option, reported_errors


@click.command("simulate")
@click.argument("scene_file", type=click.Path(dir_okay=False))
@click.option("--duration", type=float, default=None, help="Simulated seconds (scene [simulate] or 1).")
@click.option("--dt", type=float, default=None, help="Time step (velocity) or output interval (continuous), s.")
@click.option("--integrator", type=click.Choice(INTEGRATORS), default=None,
              help="velocity: M22 fixed-step (default); continuous: Radau with error control.")
@click.option("--friction", type=click.Choice(FRICTION_MODELS), default=None,
              help="regularised (default) or compliant: a friction spring per contact with exact Coulomb "
                   "friction (continuous integrator only; scene [simulate] friction = ...).")
@click.option("-o", "--output-dir", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write trajectories.csv, .pvd time series and a ParaView script view.py here.")
@click.option("--face-rule", type=click.Choice(["all", "drake"]), default=None,
              help="Contact face rule (scene [simulate] face_rule or all): all keeps every polygon, "
                   "drake applies Drake's 5π/8 rule. See docs/model.md §3.5.")
@click.option("--record-every", type=int, default=None, help="Record every N-th step (default: ~200 frames).")
@json_option
@quiet_option
def simulate_command(scene_file, duration, dt, integrator, out_dir, face_rule, record_every, friction, as_json,
                     quiet):
    """Simulate SCENE_FILE (TOML) and write trajectories and contact surfaces.

    Example: fieldgen simulate assets/scenes/coin.toml --duration 0.5 -o out --json
    """
    # lazy: the simulator compiles numba kernels, which other commands do not need
    from fieldgen.runtime.dynamics.recording import check_finite
    from fieldgen.runtime.dynamics.simulate import check_integrator, run_settings, simulate
    from fieldgen.runtime.scene.load import load_scene
    from fieldgen.runtime.scene.outputs import check_inputs_kept
    from fieldgen.runtime.scene.schema import check_step_count, step_count_note
    from fieldgen.runtime.contact.kernels import announce_compiling

    click.get_current_context().call_on_close(       # a cold numba cache: say why the first run pauses
        announce_compiling(Progress(enabled=not quiet)))

    if duration is not None and dt is not None and all(math.isfinite(v) and v > 0 for v in (duration, dt)):
        with reported_errors():
            check_step_count(duration, dt)       # before the scene's assets are built

    notes: list[str] = []
    try:
        scene, settings = load_scene(scene_file, notes=notes)
    except OptionError as exc:      # a value refused before any work (unknown key, [simulate] face_rule)
        fail(str(exc), EXIT_USAGE)
    except FieldgenError as exc:
        fail(str(exc))
    for note in notes:
        click.echo(f"warning: {note}", err=True)
    if face_rule is not None:
        scene = dataclasses.replace(scene, face_rule=face_rule)
    with reported_errors():
        duration = float(duration if duration is not None else settings.get("duration", 1.0))
        dt = float(dt if dt is not None else settings.get("dt", 1e-3))
        for flag, value in (("--duration", duration), ("--dt", dt)):
            if not (math.isfinite(value) and value > 0):
                raise OptionError(f"{flag} must be a positive number of seconds, got {value}",
                                  fix="use e.g. --duration 1 --dt 1e-3")
        check_step_count(duration, dt)
        note = step_count_note(duration, dt)
        if note is not None:
            click.echo(f"warning: {note}", err=True)
        friction, integrator = run_settings(friction or settings.get("friction"),
                                            integrator or settings.get("integrator"), path=scene_file)
        if record_every is None:
            record_every = max(1, math.ceil(duration / dt / 200))
        if record_every < 1:
            raise OptionError(f"--record-every must be >= 1, got {record_every}", fix="use --record-every 10")
        check_integrator(scene, integrator, path=scene_file)      # OptionError: exit 2, before any step
        if out_dir is not None:
            check_inputs_kept(out_dir, {"SCENE_FILE": scene_file})     # exit 2: the run would overwrite it
            prepare_output(out_dir, directory=True)            # before the run, not after it
        progress = Progress(enabled=not quiet)
        result = simulate(scene, duration, dt, integrator, record_every=record_every,
                          record_surfaces=out_dir is not None, progress=progress, friction=friction, path=scene_file)
        check_finite(result, scene_file)          # NaN trajectories are no result (exit 1, nothing written)
        summary = result.summary()
        summary["face_rule"] = scene.face_rule
        summary["friction"] = friction
        if getattr(result, "tangential", None):
            summary["tangential"] = [{"body_a": r["body_a"], "body_b": r["body_b"], "status": r["status"],
                                      "sliding_fraction": r["sliding_fraction"], "spring_energy": r["energy"],
                                      "spring_force": [float(x) for x in r["spring_force"]]}
                                     for r in result.tangential[-1]]
        if out_dir is not None:
            from fieldgen.runtime.scene.outputs import write_outputs  # lazy: only with -o

            summary["outputs"] = write_outputs(out_dir, scene, result)
        for w in summary["warnings"]:     # once per (pair, kind), whatever --quiet says
            click.echo(f"warning: {w['pair'][0]} / {w['pair'][1]} ({w['kind']}, first at t = {w['first_time']:.6g} s): "
                       f"{w['message']}", err=True)
        if as_json:
            print_json(summary)
        elif not quiet:
            echo_report(f"{summary['steps']} steps, {summary['simulated_seconds']:.4g} s simulated in "
                       f"{summary['wall_seconds']:.3g} s (real-time factor {summary['realtime_factor']:.3g})")
            if "outputs" in summary:
                echo_report(f"wrote {out_dir}; to watch it: pvpython {summary['outputs']['paraview']} "
                           "(or --screenshot frame.png --time T)")
