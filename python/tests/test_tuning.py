"""kplace.tune and kplace.admit: the bundled commands, their results read from the JSON they
write beside their accounts (tune.json, admit.json), as objects with tables and proofs; each
compared with what the command printed and with the model's own arithmetic."""

import json
import math

import pandas
import pytest

import kplace

GRAPH = "workloads/spectrogram/blocks/graph.yaml"
CHECK = "reference:workloads/spectrogram/blocks/cpu.yaml"


@pytest.fixture(scope="module")
def tones(tmp_path_factory, run):
    data = tmp_path_factory.mktemp("tones") / "tones.sigmf-data"
    run("record", "--graph", GRAPH, "--shape", "256x32", "--frames", 16, "--out", data)
    return data


@pytest.fixture(scope="module")
def calibrations(tmp_path_factory):
    """One calibration store for the module: the first call measures, the others reuse it."""
    return tmp_path_factory.mktemp("calibrations")


def calibrated(calibrations):
    return ["--calibrate", "200ms", "--calibrations", str(calibrations)]


def test_a_tuning_returns_its_predictions_and_its_winner(tones, calibrations, tmp_path):
    tuning = kplace.tune(GRAPH, placement="cpu", recording=tones, check=CHECK, prove=0,
                         args=calibrated(calibrations), out=tmp_path, progress=False)
    d = tuning.dict
    assert d["schema"] == "kplace-tune/1" and d["shape"] == "256x32"
    assert tuning.met and not tuning.interrupted
    assert json.loads((tmp_path / "tune-256x32" / "tune.json").read_text()) == d
    assert [s["shape"] for s in tuning.shapes] == ["256x32"]

    predictions = tuning.to_pandas()
    assert isinstance(predictions, pandas.DataFrame)
    assert len(predictions) == len(d["predictions"]) > 0
    # Every row the command printed in its table, with its rate.
    for p in d["predictions"]:
        assert f"| {p['label']} | {p['rate']:.1f} |" in tuning.text, p["label"]
    # Each prediction's rate is its tightest limit, and names it as its bound.
    for p in d["predictions"]:
        tightest = min(p["limits"], key=lambda l: l["rate"])
        assert math.isclose(p["rate"], tightest["rate"]) and p["bottleneck"] == tightest["resource"]
    # Predicting only, with no rate asked for, the best ranked wins; its file is written.
    best = predictions.sort_values("rank").iloc[0]
    assert d["winner"]["label"] == best["label"]
    assert tuning.winner == tmp_path / "tune-256x32" / "tuned.yaml" and tuning.winner.is_file()
    assert f"the winner is {best['label']}" in tuning.text
    assert tuning.proofs is None and tuning._repr_svg_() is None
    assert tuning.proofs_to_pandas().empty
    assert best["label"] in repr(tuning)


def test_an_admission_names_what_runs_out_first(tones, calibrations):
    admission = kplace.admit(GRAPH, "workloads/spectrogram/blocks/cpu.yaml", 100.0,
                             recording=tones, check=CHECK, utilization=0.5,
                             args=calibrated(calibrations), progress=False)
    d = admission.dict
    assert d["schema"] == "kplace-admit/1" and d["rate"] == 100.0 and d["proof"] is None
    assert d["utilization"] == 0.5
    fits = admission.to_pandas()
    assert list(fits.columns[:3]) == ["resource", "pipelines", "detail"]
    assert fits["pipelines"].is_monotonic_increasing
    # The answer is what the scarcest resource holds, capped at the most counted.
    assert admission.pipelines == min(64, fits["pipelines"].iloc[0]) > 0
    # Cores: the cores the pipelines may use over each pipeline's share at the rate.
    cores = next(f for f in d["fits"] if f["resource"] == "cores")
    per_pipeline = d["prediction"]["cores"] * d["rate"] / d["prediction"]["rate"]
    assert cores["pipelines"] == min(64, math.floor(d["cores"] * d["utilization"] / per_pipeline + 1e-9))
    assert admission.conclusion in admission.text
    assert admission.proof_sweeps == [] and admission._repr_svg_() is None
    assert "pipelines=" in repr(admission)


def test_proving_an_admission_measures_n_and_n_plus_one(tones, calibrations):
    quick = ["--window-s", "0.3", "--initial-window-s", "0.1", "--warmup-s", "0.1",
             "--width", "0.5", "--max-trials", "2", "--goals", "quick:0.01:0:1"]
    # A rate two cores hold only a few pipelines of, so the proof's searches are few.
    admission = kplace.admit(GRAPH, "workloads/spectrogram/blocks/cpu.yaml", 1500.0,
                             recording=tones, check=CHECK, prove=True,
                             args=calibrated(calibrations) + quick, progress=False)
    proof = admission.proof
    n = admission.pipelines
    assert proof["pipelines"] == n
    sweeps = admission.proof_sweeps
    # A search with N pipelines and one with N + 1 (none of 0: where none fit, N + 1 is 1).
    assert [s.dict["searches"][0]["pipelines"] for s in sweeps] == [p for p in (n, n + 1) if p]
    for sweep in sweeps:
        assert sweep.dict["schema"] == "kplace-bisect-rate/4"
    assert admission._repr_svg_() == sweeps[0].svg("sustained")


def test_bad_requests_raise_with_the_commands_message(tmp_path):
    with pytest.raises(kplace.KplaceError, match="no-such-placement"):
        kplace.admit(GRAPH, "no-such-placement", 100.0, out=tmp_path, progress=False)
    with pytest.raises(kplace.KplaceError, match="rate"):
        kplace.admit(GRAPH, "cpu", -1.0, out=tmp_path, progress=False)
