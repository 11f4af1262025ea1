"""`fieldgen batch --check` says which part of the cache key changed: the input's bytes, an
option, a named library's version or fieldgen's; assets store the key's components; Dask
workers with other versions than the client are refused."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import fieldgen
import fieldgen.batch.cache as batch
import fieldgen.batch.executors as executors
from fieldgen.io.asset import read_metadata
from fieldgen.batch.cache import cache_description, describe_changes, key_of, version_differences
from fieldgen.batch.executors import check_worker_versions
from fieldgen.batch.manifest import read_manifest
from fieldgen.batch.run import item_payload
from fieldgen.batch.worker import build_payload
from fieldgen.cli.main import main
from fieldgen.errors import OptionError

ITEM = 'edge_length = 0.5\n'


def write_manifest(folder: Path, modulus: str = "3e5") -> Path:
    path = folder / "manifest.toml"
    path.write_text(f'[defaults]\nmodulus = {modulus}\n\n[[asset]]\ninput = "sphere.stl"\noutput = "sphere.vtu"\n'
                    f'{ITEM}')
    return path


def check(manifest: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["batch", str(manifest), "--check", "--json", "--quiet"])
    return result.exit_code, json.loads(result.stdout)["items"][0]


@pytest.fixture(scope="module")
def built(meshes, tmp_path_factory):
    folder = tmp_path_factory.mktemp("reasons")
    shutil.copyfile(meshes / "unit_sphere.STL", folder / "sphere.stl")
    manifest = write_manifest(folder)
    result = CliRunner().invoke(main, ["batch", str(manifest), "-j", "1", "--quiet"])
    assert result.exit_code == 0, result.output
    return folder


@pytest.fixture
def workspace(built, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(built, folder)
    return folder


def test_asset_stores_the_key_components(workspace):
    manifest = write_manifest(workspace)
    item = read_manifest(manifest).items[0]
    stored = read_metadata(workspace / "sphere.vtu")
    description = cache_description(item)
    assert stored["cache"] == description and stored["cache_key"] == key_of(description)
    assert stored["cache"]["input"]["sha256"] == hashlib.sha256((workspace / "sphere.stl").read_bytes()).hexdigest()
    code, item = check(manifest)
    assert code == 0 and item["status"] == "cached" and item["reason"] is None


def test_input_bytes(workspace):
    path = workspace / "sphere.stl"
    old = hashlib.sha256(path.read_bytes()).hexdigest()
    data = bytearray(path.read_bytes())
    data[:80] = b"touched".ljust(80, b" ")          # binary STL header: same geometry, other bytes
    path.write_bytes(bytes(data))
    new = hashlib.sha256(bytes(data)).hexdigest()
    code, item = check(write_manifest(workspace))
    assert code == 1 and item["status"] == "stale"
    assert item["reason"] == f"input bytes changed (sha256 {old[:12]} -> {new[:12]})"


def test_an_option(workspace):
    code, item = check(write_manifest(workspace, modulus="4e5"))
    assert code == 1 and item["reason"] == "option modulus 300000.0 -> 400000.0"


def test_a_named_library(workspace, monkeypatch):
    real = batch.library_versions()
    monkeypatch.setattr(batch, "library_versions", lambda: {**real, "numpy": "0.0.1"})
    code, item = check(write_manifest(workspace))
    assert code == 1 and item["reason"] == f"numpy {real['numpy']} -> 0.0.1"


def test_an_asset_encoding(workspace, monkeypatch):
    """Assets written in another encoding (the zlib of earlier versions) are rebuilt, not cached:
    the same fieldgen version number does not mean the same bytes."""
    import fieldgen.io.asset

    current = fieldgen.io.asset.ENCODING
    monkeypatch.setattr(fieldgen.io.asset, "ENCODING", "vtu binary, zlib level 1")
    code, item = check(write_manifest(workspace))
    assert code == 1 and item["status"] == "stale"
    assert item["reason"] == f"asset encoding {current} -> vtu binary, zlib level 1"


def test_fieldgen_version_and_several_at_once(workspace, monkeypatch):
    monkeypatch.setattr(batch, "__version__", "9.9.9")
    code, item = check(write_manifest(workspace))
    assert code == 1 and item["reason"] == f"fieldgen {fieldgen.__version__} -> 9.9.9"
    code, item = check(write_manifest(workspace, modulus="4e5"))
    assert item["reason"] == f"fieldgen {fieldgen.__version__} -> 9.9.9; option modulus 300000.0 -> 400000.0"
    result = CliRunner().invoke(main, ["batch", str(write_manifest(workspace)), "--check"])
    assert result.exit_code == 1
    assert f"would rebuild {workspace / 'sphere.vtu'} (fieldgen {fieldgen.__version__} -> 9.9.9)" in result.stderr


def test_assets_without_recorded_components():
    assert describe_changes(None, {"schema": "x"}) == (
        "input, options or versions changed (the asset does not record its cache components)")


def test_worker_versions_must_match_the_client():
    client = {"fieldgen": "0.1.0", "numpy": "2.4.6", "vtk": "9.5.0"}
    assert version_differences(client, dict(client)) == ""
    check_worker_versions(client, {"tcp://a:1": dict(client)})
    workers = {"tcp://a:1": dict(client), "tcp://b:2": {**client, "numpy": "2.4.7", "fieldgen": "0.2.0"}}
    with pytest.raises(OptionError) as info:
        check_worker_versions(client, workers)
    message = str(info.value)
    assert "tcp://b:2 has fieldgen 0.2.0 (client 0.1.0), numpy 2.4.7 (client 2.4.6)" in message
    assert "tcp://a:1" not in message and "--executor local" in message


def test_a_build_refuses_a_payload_keyed_with_other_versions(workspace):
    item = read_manifest(write_manifest(workspace)).items[0]
    description = cache_description(item)
    payload = item_payload(item, key_of(description), description)
    payload["versions"] = {**payload["versions"], "vtk": "1.0"}
    before = (workspace / "sphere.vtu").read_bytes()
    answer = build_payload(payload)
    assert f"vtk {batch.library_versions()['vtk']} (client 1.0)" in answer["error"]
    assert (workspace / "sphere.vtu").read_bytes() == before       # nothing was built


@pytest.mark.slow
def test_dask_cluster_with_other_versions_is_refused(workspace, monkeypatch):
    from distributed import LocalCluster

    manifest = write_manifest(workspace, modulus="4e5")
    real = batch.build_versions()
    monkeypatch.setattr(executors, "build_versions", lambda: {**real, "scipy": "0.0.1"})   # the client's view only
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None) as cluster:
        result = CliRunner().invoke(main, ["batch", str(manifest), "--executor", "dask",
                                           "--scheduler", cluster.scheduler_address])
    assert result.exit_code == 2
    assert f"has scipy {real['scipy']} (client 0.0.1)" in result.stderr
    assert json.loads(json.dumps(read_metadata(workspace / "sphere.vtu")["cache"]["options"]))["modulus"] == 3e5
