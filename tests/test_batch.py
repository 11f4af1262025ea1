"""`fieldgen batch`: manifests of real meshes, failures per item, the content-addressed cache,
byte-identical assets across job counts and executors, and interrupted batches."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fieldgen.cli.main import main
from fieldgen.io.asset import read_metadata
from fieldgen.install import install_hint
from fieldgen.batch.cache import cache_key, remove_stale_temporaries, stale_reason
from fieldgen.batch.manifest import BatchItem, ManifestError, read_manifest
from fieldgen.options import BuildOptions

ROOT = Path(__file__).resolve().parents[1]

# Small real parts with coarse meshes (about a second each), and two inputs that must fail.
GOOD = {
    "unit_sphere.STL": 'edge_length = 0.5\n',
    "fandisk.obj": 'edge_length = 0.15\nbonded = ["below:z=-0.7"]\nmodulus = 1e5\nexpansion_rate = 10.0\n',
    "idler_riser.STL": 'units = "in"\nedge_length = 1.0\nmodulus = 2e5\nk = 0.5\ndissipation = 2.0\n',
    "torus.STL": 'edge_length = 0.5\nmodulus = 1e6\n',
}
BROKEN = {"soup.stl": "open", "drake_neg_volume.obj": "not closed: 3 open edges"}


def run(*args) -> Result:
    return CliRunner().invoke(main, ["batch", *map(str, args)], catch_exceptions=False)


def write_manifest(folder: Path, items: dict[str, str], defaults: str = "modulus = 3e5\n",
                   name: str = "manifest.toml") -> Path:
    """A manifest in ``folder`` with inputs in ``folder/in`` and outputs in ``folder/out``."""
    text = f"[defaults]\n{defaults}\n"
    for input_name, options in items.items():
        text += f'[[asset]]\ninput = "in/{input_name}"\noutput = "out/{Path(input_name).stem}.vtu"\n{options}\n'
    path = folder / name
    path.write_text(text)
    return path


def copy_inputs(meshes: Path, folder: Path, names) -> None:
    (folder / "in").mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(meshes / name, folder / "in" / name)


def touch_binary_stl(path: Path) -> None:
    """Change the bytes of a binary STL without changing its geometry (its 80-byte header)."""
    data = bytearray(path.read_bytes())
    data[:80] = b"touched by test_batch".ljust(80, b" ")
    path.write_bytes(bytes(data))


def run_batch_cli(manifest: Path, *args) -> tuple[subprocess.CompletedProcess, float]:
    """Run the CLI in a fresh process (as CI does); return the process and its wall time."""
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fieldgen.cli.main", "batch", str(manifest), *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    return proc, time.perf_counter() - began


@pytest.fixture(scope="module")
def first_run(meshes, tmp_path_factory):
    """Six items (four good parts, two broken inputs) built once with -j 2."""
    folder = tmp_path_factory.mktemp("six")
    copy_inputs(meshes, folder, [*GOOD, *BROKEN])
    manifest = write_manifest(folder, {**GOOD, **{name: "" for name in BROKEN}})
    proc, seconds = run_batch_cli(manifest, "-j", "2", "--report", folder / "report.json",
                                  "--junit", folder / "junit.xml")
    return folder, manifest, proc, seconds


def test_failing_items_are_reported_and_do_not_stop_the_others(first_run):
    from fieldgen.validate import validate_asset

    folder, manifest, proc, _ = first_run
    assert proc.returncode == 1, proc.stderr
    report = json.loads((folder / "report.json").read_text())
    items = {Path(item["input"]).name: item for item in report["items"]}
    assert len(report["items"]) == 6 and report["ok"] is False
    assert report["counts"] == {"built": 4, "cached": 0, "failed": 2, "stale": 0}
    for name in GOOD:
        item = items[name]
        assert item["status"] == "built" and item["error"] is None, item
        assert item["seconds"] > 0 and len(item["cache_key"]) == 64
        assert validate_asset(item["output"]).ok
        assert read_metadata(item["output"])["cache_key"] == item["cache_key"]
    for name, word in BROKEN.items():
        item = items[name]
        assert item["status"] == "failed"
        assert word and name in item["error"] and word in item["error"]
        assert not Path(item["output"]).exists()
        assert f"failed: {item['output']}" in proc.stderr
    # Progress: one line per finished item with its status.
    assert proc.stderr.count("batch [") >= 6 and "6/6" in proc.stderr
    # A build's warnings reach the report and the terminal, named by item (two specs give no damping).
    for name in GOOD:
        undamped = "dissipation" not in GOOD[name] and "expansion_rate" not in GOOD[name]
        said = [w for w in items[name]["warnings"] if w.startswith("no damping given")]
        assert bool(said) == undamped, (name, items[name]["warnings"])
        assert (f"warning: {items[name]['output']}: no damping given" in proc.stderr) == undamped

    # JUnit: the standard structure, one test case per item, failures with their message.
    root = ElementTree.parse(folder / "junit.xml").getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1 and suites[0].get("tests") == "6" and suites[0].get("failures") == "2"
    cases = suites[0].findall("testcase")
    assert len(cases) == 6
    failures = {case.get("name"): case.find("failure") for case in cases}
    errors = {case.get("name"): case.find("system-err") for case in cases}
    for name in GOOD:
        output = items[name]["output"]
        assert failures[output] is None
        # A build's warnings are the test case's stderr, so a CI run shows them by item.
        if items[name]["warnings"]:
            assert errors[output].text.splitlines() == [f"warning: {output}: {w}" for w in items[name]["warnings"]]
        else:
            assert errors[output] is None
    assert any(items[name]["warnings"] for name in GOOD)
    for name in BROKEN:
        failure = failures[items[name]["output"]]
        assert failure is not None and failure.get("message") == items[name]["error"]


def test_cache_rebuilds_only_what_changed(first_run, tmp_path):
    """Cached second run, one touched input rebuilt alone, --check before and after.

    The workspace is copied elsewhere first: the cache key holds no paths, so the copied
    assets are current in their new place too.
    """
    source, _, _, _ = first_run
    folder = tmp_path / "copy"
    shutil.copytree(source, folder)
    manifest = folder / "manifest.toml"
    good_only = write_manifest(folder, GOOD, name="good.toml")
    written = {path: path.stat().st_mtime_ns for path in (folder / "out").glob("*.vtu")}

    proc, _ = run_batch_cli(good_only, "-j", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [item["status"] for item in report["items"]] == ["cached"] * 4
    # Nothing was rebuilt: no asset written again (a time bound here failed under load).
    assert written and {path: path.stat().st_mtime_ns for path in written} == written
    # A cached item still says what its build warned of (recorded in the asset), on stderr too.
    first = {Path(i["input"]).name: i["warnings"] for i in json.loads((source / "report.json").read_text())["items"]}
    assert any(first[Path(i["input"]).name] for i in report["items"])
    for item in report["items"]:
        assert item["warnings"] == first[Path(item["input"]).name], item
    said = run(good_only, "--junit", folder / "cached.xml")
    assert said.exit_code == 0
    cases = {case.get("name"): case for case in ElementTree.parse(folder / "cached.xml").getroot().iter("testcase")}
    for item in report["items"]:
        lines = [f"warning: {item['output']}: {warning}" for warning in item["warnings"]]
        assert all(line in said.stderr for line in lines)
        err = cases[item["output"]].find("system-err")
        assert (err.text.splitlines() if err is not None else []) == lines
    assert run(good_only, "--check").exit_code == 0

    before = {name: (folder / "out" / (Path(name).stem + ".vtu")).read_bytes() for name in GOOD}
    touch_binary_stl(folder / "in" / "unit_sphere.STL")
    check = run(good_only, "--check", "--report", folder / "check.json", "--junit", folder / "check.xml")
    assert check.exit_code == 1
    stale_cases = [case for case in ElementTree.parse(folder / "check.xml").getroot().iter("testcase")
                   if case.find("failure") is not None]
    assert [case.get("name") for case in stale_cases] == [str(folder / "out" / "unit_sphere.vtu")]
    assert stale_cases[0].find("failure").get("type") == "StaleAsset"
    assert "would rebuild" in check.stderr and "unit_sphere.vtu" in check.stderr
    statuses = {Path(i["input"]).name: i["status"] for i in json.loads((folder / "check.json").read_text())["items"]}
    assert statuses == {"fandisk.obj": "cached", "idler_riser.STL": "cached",
                        "torus.STL": "cached", "unit_sphere.STL": "stale"}
    assert (folder / "out" / "unit_sphere.vtu").read_bytes() == before["unit_sphere.STL"]  # --check built nothing

    proc, _ = run_batch_cli(good_only, "-j", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    statuses = {Path(i["input"]).name: i["status"] for i in json.loads(proc.stdout)["items"]}
    assert statuses == {"fandisk.obj": "cached", "idler_riser.STL": "cached",
                        "torus.STL": "cached", "unit_sphere.STL": "built"}
    for name in ("fandisk.obj", "idler_riser.STL", "torus.STL"):
        assert (folder / "out" / (Path(name).stem + ".vtu")).read_bytes() == before[name]
    rebuilt_bytes = (folder / "out" / "unit_sphere.vtu").read_bytes()
    rebuilt = read_metadata(folder / "out" / "unit_sphere.vtu")
    assert rebuilt["source"]["sha256"] != read_metadata(source / "out" / "unit_sphere.vtu")["source"]["sha256"]
    assert run(good_only, "--check").exit_code == 0

    # The full manifest still fails on its two broken items, building nothing else.
    result = run(manifest, "--json", "--quiet")
    assert result.exit_code == 1
    counts = json.loads(result.stdout)["counts"]
    assert counts == {"built": 0, "cached": 4, "failed": 2, "stale": 0}
    # --force rebuilds a current item, to the same bytes.
    forced = run(write_manifest(folder, {"unit_sphere.STL": GOOD["unit_sphere.STL"]}, name="one.toml"),
                 "--force", "--json", "--quiet")
    assert forced.exit_code == 0 and json.loads(forced.stdout)["items"][0]["status"] == "built"
    assert (folder / "out" / "unit_sphere.vtu").read_bytes() == rebuilt_bytes


@pytest.mark.slow
def test_job_counts_and_dask_give_byte_identical_assets(meshes, tmp_path):
    from distributed import LocalCluster

    names = ["unit_sphere.STL", "fandisk.obj"]
    copy_inputs(meshes, tmp_path, names)
    manifest = write_manifest(tmp_path, {name: GOOD[name] for name in names})
    runs = {"j1": ["-j", "1"], "j2": ["-j", "2"]}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        runs["dask"] = ["--executor", "dask", "--scheduler", cluster.scheduler_address]
        for label, flags in runs.items():
            proc, _ = run_batch_cli(manifest, "--output-dir", tmp_path / label, "--json", "--quiet", *flags)
            assert proc.returncode == 0, (label, proc.stderr)
            assert [i["status"] for i in json.loads(proc.stdout)["items"]] == ["built"] * 2
    for name in names:
        asset = Path(name).stem + ".vtu"
        blobs = {label: (tmp_path / label / asset).read_bytes() for label in runs}
        assert blobs["j1"] == blobs["j2"] == blobs["dask"], name


def worker_pids(parent: int) -> list[int]:
    """Processes started by the batch process ``parent`` (they carry its pid in their environment)."""
    found = []
    tag = f"FIELDGEN_BATCH_PARENT={parent}".encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if tag in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
            except OSError:
                pass
    return found


def live_workers(parent: int) -> list[int]:
    alive = []
    for pid in worker_pids(parent):
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
                alive.append(pid)
        except OSError:
            pass
    return alive


def processes_naming(folder: Path) -> list[int]:
    """Live processes whose command line mentions ``folder`` (TetGen children are given theirs)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(folder).encode() in (entry / "cmdline").read_bytes() and \
                        (entry / "stat").read_text().split()[2] != "Z":
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def wait_until_fast_item_done(proc: subprocess.Popen, first: Path) -> None:
    """Until the fast item's asset exists and its worker has exited (the slow one still builds)."""
    deadline = time.monotonic() + 120
    while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    while proc.poll() is None and time.monotonic() < deadline and len(live_workers(proc.pid)) != 1:
        time.sleep(0.05)
    assert proc.poll() is None, "the slow item finished before it could be interrupted"


def assert_no_partial_assets(outputs: list[Path]) -> None:
    from fieldgen.validate import validate_asset

    for output in outputs:
        if output.exists():
            assert validate_asset(output).ok, output
            assert len(read_metadata(output)["cache_key"]) == 64
    for folder in {o.parent for o in outputs}:
        assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")] if folder.exists() else True


def fast_and_slow_items(meshes, folder: Path) -> tuple[Path, list[Path]]:
    """A manifest of a fast item (about a second) and a slow one to interrupt; their outputs."""
    copy_inputs(meshes, folder, ["unit_sphere.STL", "fandisk.obj"])
    manifest = write_manifest(folder, {"unit_sphere.STL": GOOD["unit_sphere.STL"],
                                       "fandisk.obj": "edge_length = 0.035\n"})
    return manifest, [folder / "out" / "unit_sphere.vtu", folder / "out" / "fandisk.vtu"]


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killed_batch_leaves_no_partial_asset(meshes, tmp_path, how):
    """Kill the batch while a slow item is being built: every output is absent or complete."""
    manifest, outputs = fast_and_slow_items(meshes, tmp_path)
    # As from a terminal: a job started in the background by a shell without job control (a CI
    # script's `cmd &`) inherits SIGINT ignored, and Python then leaves it ignored.
    scratch = tmp_path / "tmp"               # where the batch and its workers keep temporaries
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "fieldgen.cli.main", "batch", str(manifest), "-j", "2"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(scratch)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_until_fast_item_done(proc, outputs[0])
    workers = live_workers(proc.pid)
    assert len(workers) == 1
    proc.send_signal(how)
    _, stderr = proc.communicate(timeout=60)
    if how == signal.SIGINT:
        assert proc.returncode == 128 + signal.SIGINT, stderr
        assert b"interrupted" in stderr
    deadline = time.monotonic() + 60          # SIGKILL: the workers stop on their own
    while live_workers(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not live_workers(proc.pid)
    assert outputs[0].exists()
    assert_no_partial_assets(outputs)
    # Nothing is left behind: no temporary folder (the batch's, a worker's, TetGen's) and no
    # TetGen child still meshing for a batch that is gone.
    while processes_naming(scratch) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_naming(scratch)
    assert sorted(str(p.relative_to(scratch)) + ":" + (p.read_text() if p.is_file() else "") for p in scratch.rglob("*")) == []


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_an_interrupted_forced_rebuild_keeps_the_assets(meshes, tmp_path, how):
    """--force rebuilds current assets; stopped midway, every asset it had not replaced is kept."""
    manifest, outputs = fast_and_slow_items(meshes, tmp_path)
    built, _ = run_batch_cli(manifest, "-j", "2", "--quiet")
    assert built.returncode == 0, built.stderr
    before = [path.read_bytes() for path in outputs]
    outputs[0].unlink()                      # to see when the fast item is rebuilt
    proc = subprocess.Popen([sys.executable, "-m", "fieldgen.cli.main", "batch", str(manifest), "-j", "2",
                             "--force"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_until_fast_item_done(proc, outputs[0])
    proc.send_signal(how)
    _, stderr = proc.communicate(timeout=60)
    deadline = time.monotonic() + 60
    while live_workers(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not live_workers(proc.pid)
    # The slow item's previous asset, current and valid, is still there, byte for byte.
    assert [path.read_bytes() for path in outputs] == before, stderr.decode()


@pytest.mark.slow
def test_a_crashed_worker_fails_its_item_only(meshes, tmp_path):
    """A worker killed mid-build (as by the OOM killer) fails that item; the batch goes on."""
    manifest, (first, _) = fast_and_slow_items(meshes, tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "fieldgen.cli.main", "batch", str(manifest), "-j", "2",
                             "--report", str(tmp_path / "report.json")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until_fast_item_done(proc, first)
    os.kill(live_workers(proc.pid)[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    items = {Path(i["input"]).name: i for i in json.loads((tmp_path / "report.json").read_text())["items"]}
    assert items["unit_sphere.STL"]["status"] == "built"
    assert items["fandisk.obj"]["status"] == "failed" and "SIGKILL" in items["fandisk.obj"]["error"]
    assert_no_partial_assets([first, tmp_path / "out" / "fandisk.vtu"])
    assert not (tmp_path / "out" / "fandisk.vtu").exists()


def test_stale_temporaries_of_a_killed_run_are_removed(tmp_path):
    out = tmp_path / "part.vtu"
    leftover = tmp_path / ".part.vtu.0123456789abcdef0123456789abcdef.tmp"
    unrelated = tmp_path / ".other.vtu.0123456789abcdef0123456789abcdef.tmp"
    users = tmp_path / ".part.vtu.notes.tmp"
    for path in (leftover, unrelated, users):
        path.write_bytes(b"partial")
    assert remove_stale_temporaries([str(out)]) == [str(leftover)]
    assert not leftover.exists() and unrelated.exists() and users.exists()


# ----------------------------------------------------------------- manifests and cache keys (no builds)

def test_manifest_precedence_defaults_spec_item(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "part.toml").write_text('input = "part.stl"\nmodulus = 2e5\nk = 0.5\nmu_static = 0.9\n')
    (tmp_path / "specs" / "part.stl").write_text("solid x\nendsolid x\n")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[defaults]\nmodulus = 1e5\nedge_length = 0.1\nmu_static = 0.7\nmu_dynamic = 0.6\n'
                        '[[asset]]\nspec = "specs/part.toml"\noutput = "out/a.vtu"\nmu_static = 0.8\n'
                        '[[asset]]\ninput = "specs/part.stl"\n')
    first, second = read_manifest(manifest).items
    assert first.options.modulus == 2e5 and first.options.k == 0.5        # spec over defaults
    assert first.options.mu_static == 0.8                                 # item over spec
    assert first.options.edge_length == 0.1 and first.options.mu_dynamic == 0.6   # defaults kept
    assert Path(first.input) == tmp_path / "specs" / "part.stl"           # relative to the spec
    assert Path(first.output) == tmp_path / "out" / "a.vtu"               # relative to the manifest
    assert second.options.modulus == 1e5 and Path(second.output) == tmp_path / "part.vtu"
    moved = read_manifest(manifest, output_dir=tmp_path / "build").items
    assert [Path(i.output) for i in moved] == [tmp_path / "build" / "a.vtu", tmp_path / "build" / "part.vtu"]


@pytest.mark.parametrize("text,words", [
    ("[[asset]\ninput = 'a.stl'\n", ["not valid TOML"]),
    ('[[asset]]\ninput = "a.stl"\nedge_lenght = 0.1\nmodulus = 1e5\n', ["[[asset]] 1 (a.stl)", "edge_lenght", "edge_length"]),
    ('[[asset]]\ninput = "a.stl"\nmodulus = 1e5\n[[asset]]\noutput = "b.vtu"\nmodulus = 1e5\n', ["[[asset]] 2", "no `input`"]),
    ('[[asset]]\ninput = "a.stl"\n', ["[[asset]] 1 (a.stl)", "modulus"]),
    ('[[asset]]\ninput = "a.stl"\nspec = "missing.toml"\n', ["[[asset]] 1 (a.stl)", "missing.toml"]),
    ('[[asset]]\ninput = "a.stl"\nmodulus = 1e5\n[[asset]]\ninput = "b/a.stl"\nmodulus = 1e5\n', ["both write"]),
    ('[default]\nmodulus = 1e5\n[[asset]]\ninput = "a.stl"\n', ["'default'"]),
    ('[[asset]]\ninput = "a.stl"\noutput = "a.obj"\nmodulus = 1e5\n', [".vtu"]),
], ids=["toml", "unknown-key", "no-input", "no-modulus", "missing-spec", "same-output", "top-level", "not-vtu"])
def test_manifest_errors_exit_2_naming_manifest_and_item(tmp_path, text, words):
    manifest = tmp_path / "bad.toml"
    manifest.write_text(text)
    with pytest.raises(ManifestError):
        read_manifest(manifest)
    result = run(manifest, "--report", tmp_path / "r.json")
    assert result.exit_code == 2, result.output
    assert str(manifest) in result.stderr and "Traceback" not in result.stderr
    for word in words:
        assert word in result.stderr
    assert not (tmp_path / "r.json").exists()


def test_executor_usage_errors_exit_2(tmp_path, monkeypatch):
    (tmp_path / "a.stl").write_text("solid x\nendsolid x\n")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[asset]]\ninput = "a.stl"\nmodulus = 1e5\n')
    result = run(manifest, "--executor", "dask")
    assert result.exit_code == 2 and "--scheduler" in result.stderr
    result = run(manifest, "--scheduler", "tcp://127.0.0.1:1")
    assert result.exit_code == 2 and "--executor dask" in result.stderr
    result = run(manifest, "--check", "--force")
    assert result.exit_code == 2
    monkeypatch.setitem(sys.modules, "distributed", None)      # as if fieldgen[dask] were not installed
    result = run(manifest, "--executor", "dask", "--scheduler", "tcp://127.0.0.1:1")
    assert result.exit_code == 2 and install_hint("dask") in result.stderr
    assert not (tmp_path / "a.vtu").exists()


def test_missing_input_fails_its_item_only(tmp_path):
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[asset]]\ninput = "nowhere.stl"\nmodulus = 1e5\n')
    result = run(manifest, "--json", "--quiet", "--check")
    assert result.exit_code == 1
    item = json.loads(result.stdout)["items"][0]
    assert item["status"] == "failed" and "nowhere.stl" in item["error"] and item["cache_key"] is None


def test_cache_key_follows_bytes_and_options_not_paths(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "part.stl").write_bytes(b"solid part\nendsolid part\n")
        (tmp_path / folder / "core.off").write_bytes(b"OFF\n0 0 0\n")
        (tmp_path / folder / "law.csv").write_bytes(b"0,0\n1,1e5\n")

    def key(folder="a", part="part.stl", **options):
        base = dict(core=str(tmp_path / folder / "core.off"), table=str(tmp_path / folder / "law.csv"))
        base.update(options)
        return cache_key(BatchItem(1, str(tmp_path / folder / part), str(tmp_path / "x.vtu"),
                                   BuildOptions(**base)))

    reference = key()
    assert len(reference) == 64 and reference == key()
    assert key("b") == reference                                  # other folder, same bytes
    os.utime(tmp_path / "a" / "part.stl", (1, 1))
    assert key() == reference                                     # mtime is not in the key
    assert key(edge_length=0.1) != reference                      # an option
    assert key(units="mm") != reference
    (tmp_path / "b" / "law.csv").write_bytes(b"0,0\n1,2e5\n")
    assert key("b") != reference                                  # the table's bytes
    (tmp_path / "b" / "law.csv").write_bytes(b"0,0\n1,1e5\n")
    (tmp_path / "b" / "core.off").write_bytes(b"OFF\n0 0 0\n\n")
    assert key("b") != reference                                  # the core's bytes
    (tmp_path / "a" / "part.stl").write_bytes(b"solid part\nendsolid part\n\n")
    assert key() != reference                                     # the input's bytes


def test_a_step_inputs_cache_key_follows_cascadio(tmp_path, monkeypatch):
    """A STEP file's triangles are cascadio's tessellation: its version is part of a STEP item's
    key (and only of a STEP item's: a surface mesh does not depend on it)."""
    import fieldgen.batch.cache as batch
    from importlib.metadata import version

    (tmp_path / "part.step").write_text("ISO-10303-21;\n")
    (tmp_path / "part.stl").write_bytes(b"solid part\nendsolid part\n")
    step = BatchItem(1, str(tmp_path / "part.step"), str(tmp_path / "x.vtu"), BuildOptions(modulus=1e5))
    stl = BatchItem(2, str(tmp_path / "part.stl"), str(tmp_path / "y.vtu"), BuildOptions(modulus=1e5))
    assert batch.cache_description(step)["libraries"]["cascadio"] == version("cascadio")
    assert "cascadio" not in batch.cache_description(stl)["libraries"]
    reference, unrelated = cache_key(step), cache_key(stl)
    real = batch.library_versions

    def older(names=batch.BYTE_LIBRARIES):
        return {name: ("0.0.1" if name == "cascadio" else v) for name, v in real(names).items()}

    monkeypatch.setattr(batch, "library_versions", older)
    assert cache_key(step) != reference and cache_key(stl) == unrelated


def test_a_step_item_builds_and_is_cached(meshes, tmp_path):
    """A STEP input in a manifest: built once (its key carries cascadio's version, which the
    building process checks against its own), cached on the second run."""
    copy_inputs(meshes, tmp_path, ["featuretype.STEP"])
    manifest = write_manifest(tmp_path, {"featuretype.STEP": 'units = "in"\nedge_length = 0.3\n'})
    first = run(manifest, "-j", "1", "--json", "--quiet")
    assert first.exit_code == 0, first.output
    [item] = json.loads(first.stdout)["items"]
    assert item["status"] == "built" and item["error"] is None
    again = run(manifest, "-j", "1", "--json", "--quiet")
    assert again.exit_code == 0 and json.loads(again.stdout)["items"][0]["status"] == "cached"


def test_cache_key_follows_library_versions(tmp_path, monkeypatch):
    """A new TetGen or VTK can change the bytes, so it invalidates the cache."""
    import fieldgen.batch.cache as batch

    (tmp_path / "part.stl").write_bytes(b"solid part\nendsolid part\n")
    item = BatchItem(1, str(tmp_path / "part.stl"), str(tmp_path / "x.vtu"), BuildOptions(modulus=1e5))
    reference = cache_key(item)
    assert set(batch.library_versions()) == set(batch.BYTE_LIBRARIES)
    real = batch.library_versions()
    monkeypatch.setattr(batch, "library_versions", lambda: {**real, "tetgen": "0.0.0"})
    assert cache_key(item) != reference


def test_stale_reason(tmp_path):
    assert stale_reason(str(tmp_path / "none.vtu"), "0" * 64) == "missing"
    junk = tmp_path / "junk.vtu"
    junk.write_bytes(b"<VTKFile>half")
    assert stale_reason(str(junk), "0" * 64) == "not a readable asset"
