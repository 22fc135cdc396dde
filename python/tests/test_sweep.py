"""kplace.bisect_rate: a real search by the bundled command, its results as an object (the
JSON it writes, a row per search and per trial as DataFrames, its plots as SVG); progress on
sys.stderr as the search goes; Ctrl-C stops a run or a search the way it stops at a terminal,
with what was measured returned."""

import _thread
import json
import sys
import threading
import xml.etree.ElementTree as ET

import pandas
import pytest

import kplace

# A search that ends in a few short trials: small windows, a wide width, one goal.
QUICK = ["--check", "reference:cpu", "--warmup-s", "0.1", "--window-s", "0.3", "--initial-window-s", "0.1", "--width", "0.5",
         "--max-trials", "4", "--start-rate", "100"]


@pytest.fixture(scope="module")
def tones(tmp_path_factory, run):
    """A recording of the spectrogram's source at 256x32: the graph names no workload, so a
    search replays a recording and checks each frame against the CPU placement."""
    data = tmp_path_factory.mktemp("tones") / "tones.sigmf-data"
    run("record", "--graph", "spectrogram", "--shape", "256x32", "--frames", 16, "--out", data)
    return data


def test_a_search_returns_its_results_as_frames_and_plots(tones, tmp_path, capsys):
    sweep = kplace.bisect_rate("spectrogram", "cpu", recording=tones, goals="quick:0.01:0:1",
                               args=QUICK, out=tmp_path)
    d = sweep.dict
    assert d["schema"] == "kplace-bisect-rate/4"
    # What the command wrote in the directory given is what the object holds.
    assert json.loads((tmp_path / "bisect-rate.json").read_text()) == d
    assert sweep.out == tmp_path
    [search] = d["searches"]
    assert search["shape"] == "256x32" and search["system"].endswith("cpu")
    assert search["trials"], "a search with no trial"

    searches = sweep.to_pandas()
    assert isinstance(searches, pandas.DataFrame) and len(searches) == 1
    assert searches.loc[0, "system"] == search["system"]
    rate = searches.loc[0, "sustained_rate"]
    assert (rate is None or pandas.isna(rate)) == (search["sustained_rate"] is None)
    if search["sustained_rate"] is not None:
        assert rate == search["sustained_rate"]
        # The answer is a rate one of its own trials passed at.
        assert any(t["rate"] == rate and t["status"] == "passed" for t in search["trials"])
    assert sweep.answered == (search["sustained_rate"] is not None)
    assert not sweep.interrupted

    trials = sweep.trials_to_pandas()
    assert len(trials) == len(search["trials"])
    assert trials["rate"].tolist() == [t["rate"] for t in search["trials"]]
    assert trials["status"].tolist() == [t["status"] for t in search["trials"]]
    assert set(trials["system"]) == {search["system"]}

    assert "sustained" in sweep.plots
    for name in sweep.plots:
        assert ET.fromstring(sweep.svg(name)).tag.endswith("svg"), name
    assert sweep._repr_svg_() == sweep.svg("sustained")
    assert search["system"] in repr(sweep)

    # Each trial was said on sys.stderr as it ended, where a notebook shows it.
    said = capsys.readouterr().err
    assert said.count("trial") >= len(search["trials"]), said


def test_a_search_left_in_a_temporary_directory_goes_with_its_result(tones):
    sweep = kplace.bisect_rate("spectrogram", ["cpu"], shape=["256x32"], recording=tones,
                               goals="quick:0.01:0:1", args=QUICK, progress=False)
    out = sweep.out
    assert (out / "bisect-rate.json").is_file()
    del sweep
    assert not out.exists()


def test_bad_inputs_raise_kplace_errors_with_the_commands_message(tones, tmp_path):
    with pytest.raises(kplace.KplaceError, match="no-such-graph"):
        kplace.bisect_rate("no-such-graph", "cpu", out=tmp_path, progress=False)
    with pytest.raises(kplace.KplaceError, match="no-such-placement"):
        kplace.bisect_rate("spectrogram", "no-such-placement", recording=tones, out=tmp_path,
                           progress=False)
    sweep = kplace.bisect_rate("spectrogram", "cpu", recording=tones, goals="quick:0.01:0:1",
                               args=QUICK, progress=False)
    with pytest.raises(kplace.KplaceError, match='no plot "nope"'):
        sweep.svg("nope")


class InterruptOn:
    """A sys.stderr that passes every line on and, once a line holds `text`, sends Ctrl-C, as a
    notebook's interrupt sends it, to the main thread `delay` seconds later: the command's own
    progress says when it is under way, however loaded the machine. If no such line comes, Ctrl-C
    comes after `LATEST` seconds anyway, so the test ends."""

    LATEST = 120.0

    def __init__(self, real, text, delay):
        self.real, self.text, self.delay = real, text, delay
        self.timers = [threading.Timer(self.LATEST, _thread.interrupt_main)]
        self.timers[0].start()
        self.seen = None

    def write(self, line):
        self.real.write(line)
        if self.seen is None and self.text in line:
            self.seen = line
            self.timers.append(threading.Timer(self.delay, _thread.interrupt_main))
            self.timers[-1].start()

    def flush(self):
        self.real.flush()

    def cancel(self):
        for timer in self.timers:
            timer.cancel()


def test_ctrl_c_ends_a_run_with_its_report(monkeypatch):
    # A stream of many frames: it would take many minutes. Ctrl-C a second after it starts.
    stderr = InterruptOn(sys.stderr, "kplace run: graph", 1.0)
    monkeypatch.setattr(sys, "stderr", stderr)
    try:
        report = kplace.run("radar", "all-cpu", frames=10_000_000, args=["--cpi", "256x32"])
    finally:
        stderr.cancel()
    assert stderr.seen, "the run never said it started"
    d = report.dict
    assert d["interrupted"] == "SIGINT"
    assert 0 < d["frames"] < 10_000_000
    assert d["verification"]["frames_passed"] == d["frames"]


def test_ctrl_c_stops_a_search_after_its_trial_with_what_it_measured(tones, tmp_path, monkeypatch):
    # Long trials: the search would take minutes. Ctrl-C once its first trial has ended.
    slow = ["--warmup-s", "0.1", "--window-s", "2", "--initial-window-s", "2", "--width", "0.01",
            "--max-trials", "30", "--start-rate", "100"]
    stderr = InterruptOn(sys.stderr, "trial 0", 0.0)
    monkeypatch.setattr(sys, "stderr", stderr)
    try:
        sweep = kplace.bisect_rate("spectrogram", "cpu", recording=tones, goals="quick:0.01:0:1",
                                   args=["--check", "reference:cpu", *slow], out=tmp_path)
    finally:
        stderr.cancel()
    assert stderr.seen, "the search never said a trial ended"
    assert sweep.interrupted and not sweep.answered
    assert "interrupted=True" in repr(sweep)
    [search] = sweep.dict["searches"]
    assert 1 <= len(search["trials"]) < 30
