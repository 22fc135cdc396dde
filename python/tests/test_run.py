"""kplace.run: a whole `kplace run` (here on a recording, every frame checked against a
reference placement) returns the command's own report as an object: the fields `kplace run
--report` writes, each stage's figures as columns and as a pandas DataFrame, and the run's
timeline as the SVG `kplace plot-trace` draws."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pandas
import pytest

import kplace


@pytest.fixture(scope="module")
def tones(tmp_path_factory, run):
    data = tmp_path_factory.mktemp("spectrogram") / "tones.sigmf-data"
    run("record", "--graph", "spectrogram", "--frames", 6, "--out", data)
    return data


def test_a_run_returns_the_commands_report(tones, run, tmp_path):
    report = kplace.run("spectrogram", "cpu-2", recording=tones, frames=24, check="reference:cpu",
                        trace=True)
    d = report.dict
    assert report.passed and d["frames"] == 24 and d["placement"] == "spectrogram-cpu-2"
    assert d["verification"]["against"] == "reference placement spectrogram-cpu"
    assert d["verification"]["frames_passed"] == 24
    assert "verification PASSED" in report.text
    # What the command writes for the same run, field for field but for what a run measures.
    run("run", "--graph", "spectrogram", "--placement", "cpu-2", "--recording", tones,
        "--frames", 24, "--check", "reference:cpu", "--report", tmp_path / "cli.json")
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert d.keys() == cli.keys()
    for field in ("schema", "graph", "placement", "frame_shape", "frames", "frames_expected",
                  "verification"):
        assert d[field] == cli[field], field
    assert [s["name"] for s in d["stages"]] == [s["name"] for s in cli["stages"]]
    assert [s["launches"] for s in d["stages"]] == [s["launches"] for s in cli["stages"]]

    columns = report.stage_columns()
    assert columns["name"] == ["fft", "power", "average"]
    assert columns["launches"] == [s["launches"] for s in d["stages"]]
    frame = report.to_pandas()
    assert list(frame.index) == ["fft", "power", "average"]
    assert frame.loc["average", "launches"] == 24
    assert frame["per_frame_ms"].tolist() == [s["per_frame_ms"] for s in d["stages"]]
    assert isinstance(frame, pandas.DataFrame)

    svg = report._repr_svg_()
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "fft" in svg  # a launch of each stage is drawn, named
    assert "passed=True" in repr(report)


def test_a_failing_frame_check_still_returns_its_report(tones, run, tmp_path):
    # Golden files of the recording's frames, one frame's spectrum doubled.
    run("run", "--graph", "spectrogram", "--placement", "cpu", "--recording", tones, "--frames", 6,
        "--check", "none", "--write-sinks", tmp_path)
    psd = np.load(tmp_path / "psd.npy")
    psd[2] *= 2
    np.save(tmp_path / "psd.npy", psd)
    report = kplace.run("spectrogram", "cpu", recording=tones, frames=6, check=f"golden:{tmp_path}")
    assert not report.passed
    assert report.dict["verification"]["frames_failed"] == 1
    assert report.dict["verification"]["mismatches"][0]["frame"] == 2
    # Golden files that are not there: the command writes no report, and its message is raised.
    with pytest.raises(kplace.KplaceError, match="golden files"):
        kplace.run("spectrogram", "cpu", recording=tones, frames=6, check="golden:/nonexistent")


def test_a_run_that_cannot_start_is_a_kplace_error_with_the_commands_message(tones):
    with pytest.raises(kplace.KplaceError, match="placement nope: no such file"):
        kplace.run("spectrogram", "nope", recording=tones, frames=6)
    report = kplace.run("spectrogram", "cpu", recording=tones, frames=6, check="none")
    assert report._repr_svg_() is None and report.passed
