"""kplace.Pipeline against the CLI's own outputs and independent NumPy/SciPy references.

The filtered beamformer (workloads/beamformer/filtered) has a stateful FIR: fed in batches of
uneven sizes, its outputs must be `kplace run`'s on a recording of the same frames, bit for
bit, and its filter SciPy's `lfilter` over the whole stream. The spectrogram is NumPy's
windowed FFT, power and average.
"""

import json

import numpy as np
import pytest
import scipy.signal

import kplace

FRAMES = 40
# The filtered beamformer's frame: R packets of T snapshots of C channels, decimated by D.
R, T, C, D = 4, 64, 8, 4
ANGLES = np.radians([-30, 0, 14.4775])


@pytest.fixture(scope="module")
def array_recording(tmp_path_factory, run):
    """40 frames of plane waves on the 8-channel array (two in band, one above the cutoff),
    recorded by `kplace record`, and what `kplace run` writes for them."""
    work = tmp_path_factory.mktemp("beamformer")
    data = work / "array.sigmf-data"
    run("record", "--graph", "beamformer/filtered", "--frames", FRAMES, "--sample-rate", "250e3",
        "--tone", "0.02:0.25:-30", "--tone", "-0.05:0.1:14.4775", "--tone", "0.3:0.5:0",
        "--noise", "0.01", "--out", data)
    meta = json.loads(data.with_suffix(".sigmf-meta").read_text())
    assert meta["global"]["core:datatype"] == "cf32_le"
    run("run", "--graph", "beamformer/filtered", "--placement", "cpu", "--recording", data,
        "--frames", FRAMES, "--check", "none", "--write-sinks", work / "sinks")
    frames = np.fromfile(data, dtype="<c8").reshape(FRAMES, R, T, C)
    return frames, work / "sinks"


def process_in_batches(pipeline, frames, sizes):
    """Every sink of `frames` fed in batches of `sizes`, stacked again."""
    assert sum(sizes) == len(frames)
    outs, at = [], 0
    for n in sizes:
        outs.append(pipeline.process(frames[at:at + n]))
        at += n
    return {name: np.concatenate([o[name] for o in outs]) for name in outs[0]}


def test_the_filtered_beamformer_in_batches_is_kplace_run_bit_for_bit(array_recording):
    frames, sinks = array_recording
    p = kplace.Pipeline("beamformer/filtered", placement="cpu", set={"C": C})
    got = process_in_batches(p, frames, [1, 7, 12, 20])
    for name in ("beams", "beam_power"):
        want = np.load(sinks / f"{name}.npy")
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        # Bit for bit: the same bytes, NaNs included.
        assert got[name].tobytes() == want.tobytes(), name
    report = p.report()
    assert report["frames"] == FRAMES and report["frames_expected"] == FRAMES
    assert report["verification"]["passed"]
    fir = next(s for s in report["stages"] if s["name"] == "lowpass")
    assert fir["launches"] == FRAMES and fir["carry"]["frames_missing"] == 0


def test_two_workers_give_the_same_stream(array_recording):
    frames, sinks = array_recording
    p = kplace.Pipeline("beamformer/filtered", placement="cpu-2")
    got = process_in_batches(p, frames, [13, 27])
    assert got["beams"].tobytes() == np.load(sinks / "beams.npy").tobytes()


def test_the_fir_is_scipys_lfilter_over_the_whole_stream(array_recording):
    frames, _ = array_recording
    taps = np.load("workloads/beamformer/filtered/lowpass.npy").astype(np.float32).astype(np.float64)
    p = kplace.Pipeline("beamformer/filtered")
    got = process_in_batches(p, frames, [3, 3, 34])["beams"]
    # One continuous filter per channel over every snapshot of the stream, then decimation
    # and the steering of each beam.
    x = frames.reshape(-1, C).astype(np.complex128)
    filtered = scipy.signal.lfilter(taps, [1.0], x, axis=0)[::D]
    weights = np.exp(-2j * np.pi * 0.5 * np.outer(np.sin(ANGLES), np.arange(C)))
    want = (filtered @ weights.T / C).reshape(FRAMES, R * T // D, len(ANGLES))
    # The graph's own tolerance for beams.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Each batch starts where the last ended: a filter restarted per batch would differ.
    restarted = scipy.signal.lfilter(taps, [1.0], x[3 * R * T:6 * R * T], axis=0)[::D]
    assert not np.allclose(got[3:6].reshape(-1, 3), restarted @ weights.T / C, rtol=1e-4, atol=1e-5)


def test_the_fir_over_a_long_stream_with_a_lost_frame_is_lfilter_over_silence_there():
    # 400 frames of noise and tones, fed in uneven batches; frame 137 never arrives.
    frames_n, lost = 400, 137
    rng = np.random.default_rng(54)
    t = np.arange(frames_n * R * T)[:, None]
    x = (0.5 * np.exp(2j * np.pi * 0.01 * t) * np.exp(-1j * np.pi * np.sin(ANGLES[0]) * np.arange(C))
         + 0.1 * (rng.standard_normal((frames_n * R * T, C))
                  + 1j * rng.standard_normal((frames_n * R * T, C))))
    frames = x.astype(np.complex64).reshape(frames_n, R, T, C)
    taps = np.load("workloads/beamformer/filtered/lowpass.npy").astype(np.float32).astype(np.float64)

    p = kplace.Pipeline("beamformer/filtered", placement="cpu")
    before = process_in_batches(p, frames[:lost], [1, 36, 100])["beams"]
    p.lose()
    after = process_in_batches(p, frames[lost + 1:], [5, 57, 200])["beams"]
    assert p.frames_lost == 1 and p.frames_fed == frames_n - 1
    got = np.concatenate([before, after])

    # SciPy over the whole stream, the lost frame silence; its outputs left out.
    heard = frames.copy()
    heard[lost] = 0
    filtered = scipy.signal.lfilter(taps, [1.0], heard.reshape(-1, C).astype(np.complex128),
                                    axis=0)[::D]
    weights = np.exp(-2j * np.pi * 0.5 * np.outer(np.sin(ANGLES), np.arange(C)))
    want = (filtered @ weights.T / C).reshape(frames_n, R * T // D, len(ANGLES))
    want = np.delete(want, lost, axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # The frame after the gap differs from a stream that had heard the lost frame: the
    # reference's silence is what made them equal.
    unbroken = scipy.signal.lfilter(taps, [1.0], frames.reshape(-1, C).astype(np.complex128),
                                    axis=0)[::D]
    unbroken = (unbroken @ weights.T / C).reshape(frames_n, R * T // D, len(ANGLES))
    assert not np.allclose(got[lost], unbroken[lost + 1], rtol=1e-4, atol=1e-5)

    report = p.report()
    fir = next(s for s in report["stages"] if s["name"] == "lowpass")
    assert fir["launches"] == frames_n - 1 and fir["carry"]["frames_missing"] == 1
    assert report["frames"] == frames_n - 1 and report["verification"]["passed"]


def test_the_spectrogram_is_numpys(tmp_path):
    m, n = 16, 256
    p = kplace.Pipeline("spectrogram", placement="cpu", set={"M": m, "N": n})
    assert p.source["shape"] == (m, n, 2) and p.source["dtype"] == "int16"
    rng = np.random.default_rng(3)
    iq = rng.integers(-3000, 3000, size=(5, m, n, 2), dtype=np.int16)
    t = np.arange(n)
    # A complex tone in bin 17 over the noise.
    iq[..., 0] += (2000 * np.cos(2 * np.pi * 17 * t / n)).astype(np.int16)
    iq[..., 1] += (2000 * np.sin(2 * np.pi * 17 * t / n)).astype(np.int16)
    psd = p.process(iq)["psd"]
    assert psd.shape == (5, n) and psd.dtype == np.float32
    x = iq[..., 0].astype(np.float64) + 1j * iq[..., 1]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * t / n)
    want = (np.abs(np.fft.fft(x * window, axis=-1)) ** 2).mean(axis=1)
    np.testing.assert_allclose(psd, want, rtol=1e-4)
    assert np.argmax(psd[0]) == 17
    # One frame, without a leading axis: its sinks without one either.
    one = p.process(iq[0])["psd"]
    assert one.shape == (n,)
    np.testing.assert_allclose(one, want[0], rtol=1e-4)


def test_plan_and_report_describe_the_run():
    with kplace.Pipeline("beamformer/filtered", placement="cpu") as p:
        plan = p.plan()
        for stage in ("lowpass", "beamform", "power", "average"):
            assert stage in plan
        assert p.sinks[0] == {"name": "beams", "kplace_dtype": "cf32", "dtype": "complex64",
                              "shape": (R * T // D, 3)}
        p.process(np.zeros((2, R, T, C), np.complex64))
        p.process(np.zeros((0, R, T, C), np.complex64))
        assert p.frames_fed == 2
    report = p.report()
    assert report["graph"] == "beamformer-filtered"
    assert report["source"] == "memory" and report["frames"] == 2
    assert json.loads(json.dumps(report)) == report
