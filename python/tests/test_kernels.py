"""Kernels written in Python (docs/python.md, "A stage written in Python"), run inside the
pipeline: in `kplace.Pipeline`, in this interpreter, and in the `kplace` command, in the
interpreter it starts.

The filtered beamformer's FIR in Python (workloads/beamformer/filtered/fir.py, placement
`python`) must be its C twin bit for bit, across a lost frame, and pass `--check
reference:cpu`; a function kernel's outputs must be the C kernel's; and each way a kernel can
break the contract must fail with a message naming what broke.
"""

import os
import subprocess
import textwrap

import numpy as np
import pytest
import scipy.signal

import kplace
from conftest import ROOT, TIMEOUT_S

# The filtered beamformer's frame: R packets of T snapshots of C channels, decimated by D.
R, T, C, D = 4, 64, 8, 4
ANGLES = np.radians([-30, 0, 14.4775])


def frames_of(n, seed):
    """`n` frames of a tone from -30 degrees in noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n * R * T)[:, None]
    x = (0.5 * np.exp(2j * np.pi * 0.01 * t) * np.exp(-1j * np.pi * np.sin(ANGLES[0]) * np.arange(C))
         + 0.1 * (rng.standard_normal((n * R * T, C)) + 1j * rng.standard_normal((n * R * T, C))))
    return x.astype(np.complex64).reshape(n, R, T, C)


def placement(tmp_path, source, stages=None):
    """A placement of the filtered beamformer with `source` as its Python module (kernels.py)
    and `stages` on python (by default the power stage), the rest on the block library."""
    (tmp_path / "kernels.py").write_text(textwrap.dedent(source))
    stages = stages or ["power"]
    lines = [f"  {s}: {'python' if s in stages else 'cpu'}\n"
             for s in ("lowpass", "beamform", "power", "average")]
    path = tmp_path / "placement.yaml"
    path.write_text("name: test-python\n"
                    "libraries: {cpu: libkplace_blocks.so, python: kernels.py}\n"
                    "stages:\n" + "".join(lines))
    return str(path)


def test_the_python_fir_is_the_c_fir_bit_for_bit_across_a_lost_frame():
    frames_n, lost = 400, 137
    frames = frames_of(frames_n, 4)
    outs = {}
    for name in ("cpu", "python"):
        p = kplace.Pipeline("beamformer/filtered", placement=name)
        first = p.process(frames[:lost])
        p.lose()
        rest = p.process(frames[lost + 1:])
        outs[name] = {k: np.concatenate([first[k], rest[k]]) for k in first}
        fir = next(s for s in p.report()["stages"] if s["name"] == "lowpass")
        assert fir["launches"] == frames_n - 1 and fir["carry"]["frames_missing"] == 1, name
    for sink in ("beams", "beam_power"):
        assert outs["python"][sink].tobytes() == outs["cpu"][sink].tobytes(), sink
    # And both are SciPy's filter over the stream with the lost frame silent.
    taps = np.load(ROOT / "workloads/beamformer/filtered/lowpass.npy").astype(np.float64)
    heard = frames.copy()
    heard[lost] = 0
    filtered = scipy.signal.lfilter(taps, [1.0], heard.reshape(-1, C).astype(np.complex128),
                                    axis=0)[::D]
    weights = np.exp(-2j * np.pi * 0.5 * np.outer(np.sin(ANGLES), np.arange(C)))
    want = np.delete((filtered @ weights.T / C).reshape(frames_n, R * T // D, 3), lost, axis=0)
    np.testing.assert_allclose(outs["python"]["beams"], want, rtol=1e-4, atol=1e-5)


def test_kplace_run_checks_the_python_fir_against_its_c_twin(tmp_path, run):
    frames = 60
    data = tmp_path / "array.sigmf-data"
    run("record", "--graph", "beamformer/filtered", "--frames", frames, "--sample-rate", "250e3",
        "--tone", "0.02:0.25:-30", "--tone", "0.3:0.5:0", "--noise", "0.01", "--out", data)
    report = kplace.run("beamformer/filtered", "python", recording=data, frames=frames,
                        check="reference:cpu", progress=False)
    assert report.passed, report.text
    assert report.dict["frames"] == frames
    assert report.dict["verification"]["against"] == "reference placement beamformer-filtered-cpu"
    # The command's sinks, byte for byte, whichever kernel filtered.
    for name in ("cpu", "python"):
        run("run", "--graph", "beamformer/filtered", "--placement", name, "--recording", data,
            "--frames", frames, "--check", "none", "--write-sinks", tmp_path / name)
    for sink in ("beams", "beam_power"):
        c, py = (np.load(tmp_path / name / f"{sink}.npy") for name in ("cpu", "python"))
        assert c.tobytes() == py.tobytes(), sink


POWER = """
    import numpy as np
    import kplace

    @kplace.kernel("blocks.power")
    def power(x):
        return x.real * x.real + x.imag * x.imag
    """


def test_a_function_kernel_returns_what_the_c_kernel_writes(tmp_path):
    frames = frames_of(20, 5)
    c = kplace.Pipeline("beamformer/filtered", placement="cpu").process(frames)
    p = kplace.Pipeline("beamformer/filtered", placement=placement(tmp_path, POWER))
    assert "python module kernels.py" in p.plan()
    got = p.process(frames)
    np.testing.assert_allclose(got["beam_power"], c["beam_power"], rtol=1e-6)
    assert got["beams"].tobytes() == c["beams"].tobytes()


def test_parameters_arrive_as_keywords_and_out_is_written_in_place(tmp_path):
    source = """
    import numpy as np
    import kplace

    @kplace.kernel("blocks.power")
    def power(x, *, out, gain):
        np.multiply(x.real, x.real, out=out)
        out += x.imag * x.imag
        out *= np.float32(gain)
    """
    frames = frames_of(12, 6)
    c = kplace.Pipeline("beamformer/filtered", placement="cpu").process(frames)
    p = kplace.Pipeline("beamformer/filtered", placement=placement(tmp_path, source),
                        set={"power.gain": 2})
    np.testing.assert_allclose(p.process(frames)["beam_power"], 2 * c["beam_power"], rtol=1e-6)


def test_a_class_kernel_sees_its_stage_and_carries_state(tmp_path):
    # A running frame count in the carry, written into the power's first element.
    source = """
    import numpy as np
    import kplace

    @kplace.kernel("blocks.power", stateful=True)
    class Counted:
        def __init__(self, stage):
            (x,), (y,) = stage.inputs, stage.outputs
            assert (x.kind, x.dtype, x.shape) == ("cf32", np.complex64, (64, 3)), x
            assert (y.kind, y.shape, stage.split) == ("f32", (64, 3), None), y
            self.carry_bytes = 8

        def __call__(self, x, *, carry, frames_missing, frame):
            count = carry.view(np.uint64)
            count[0] += 1 + frames_missing
            y = (x.real * x.real + x.imag * x.imag)
            y[0, 0] = count[0]
            return y
    """
    frames = frames_of(9, 7)
    outs = {}
    for name in ("cpu", placement(tmp_path, source)):
        p = kplace.Pipeline("beamformer/filtered", placement=name)
        first = p.process(frames[:4])
        p.lose(2)
        rest = p.process(frames[4:])
        outs[name] = {k: np.concatenate([first[k], rest[k]]) for k in first}
        report = p.report()
    c, py = outs["cpu"], outs[name]
    # beam_power averages each beam's 64 powers, so the count is 64 times the difference
    # from the C kernel's average, with the power it replaced added back.
    difference = py["beam_power"][:, 0].astype(np.float64) - c["beam_power"][:, 0]
    counts = 64 * difference + np.abs(c["beams"][:, 0, 0].astype(np.complex128)) ** 2
    np.testing.assert_allclose(counts, [1, 2, 3, 4, 7, 8, 9, 10, 11], atol=1e-3)
    power = next(s for s in report["stages"] if s["name"] == "power")
    assert power["carry"]["frames_missing"] == 2 and power["launches"] == 9


# (module source, where it fails: "open" or "process", the message's telling part)
BROKEN = {
    "no kernel": ("import numpy\n", "open", "kernels.py declares no kernel: mark a function or class"),
    "stateful function": (
        "import kplace\n@kplace.kernel('blocks.power', stateful=True)\ndef power(x): return x\n",
        "open", "power is stateful, so it must be a class"),
    "import error": ("import kplace\nimport no_such_module\n", "open",
                     "ModuleNotFoundError: No module named 'no_such_module' (kernels.py:2, in <module>)"),
    "another kernel": ("import kplace\n@kplace.kernel('blocks.pow')\ndef power(x): return x\n",
                       "open", "offers no cpu kernel blocks.power; it offers: blocks.pow (cpu)"),
    "a parameter it does not take": (
        "import kplace\n@kplace.kernel('blocks.power')\ndef power(x, *, gain): return x\n",
        "open", "(none), which do not fit its signature: missing a required argument: 'gain'"),
    "raises": ("import kplace\n@kplace.kernel('blocks.power')\ndef power(x):\n    return 1 / 0\n",
               "process", "ZeroDivisionError: division by zero (kernels.py:4, in power)"),
    "wrong type": (
        "import kplace\n@kplace.kernel('blocks.power')\ndef power(x):\n    return abs(x).astype('f8')\n",
        "process", "output 0: it returned float64 of shape (64, 3), but the stage writes float32 of shape (64, 3)"),
    "wrong shape": (
        "import kplace\n@kplace.kernel('blocks.power')\ndef power(x):\n    return abs(x)[:1]\n",
        "process", "output 0: it returned float32 of shape (1, 3), but the stage writes float32 of shape (64, 3)"),
    "returns nothing": ("import kplace\n@kplace.kernel('blocks.power')\ndef power(x):\n    pass\n",
                        "process", "it returned None, but it has 1 output(s) to write"),
    "writes its input": (
        "import kplace\n@kplace.kernel('blocks.power')\ndef power(x):\n    x[0] = 0\n",
        "process", "ValueError: assignment destination is read-only (kernels.py:4, in power)"),
    "keeps its input": (
        "import kplace\nKEPT = []\n@kplace.kernel('blocks.power')\n"
        "def power(x):\n    KEPT.append(x)\n    return abs(x)\n",
        "process", "it kept input 0 past its launch"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_kernel_that_breaks_the_contract_fails_saying_how(tmp_path, case):
    source, where, message = BROKEN[case]
    path = placement(tmp_path, source)
    if where == "open":
        with pytest.raises(kplace.KplaceError) as raised:
            kplace.Pipeline("beamformer/filtered", placement=path)
    else:
        p = kplace.Pipeline("beamformer/filtered", placement=path)
        with pytest.raises(kplace.KplaceError) as raised:
            p.process(frames_of(2, 8))
    assert message in str(raised.value), str(raised.value)
    assert "kernels.py" in str(raised.value) or "blocks.power" in str(raised.value)


def test_a_stage_on_python_without_a_module_is_refused_at_its_line(tmp_path):
    path = tmp_path / "placement.yaml"
    path.write_text("name: t\nlibraries: {cpu: libkplace_blocks.so}\nstages:\n"
                    "  lowpass: python\n  beamform: cpu\n  power: cpu\n  average: cpu\n")
    with pytest.raises(kplace.KplaceError, match=r"placement.yaml:4.*stage lowpass is placed on "
                                                 r"python, which needs the Python module"):
        kplace.Pipeline("beamformer/filtered", placement=str(path))


def test_the_command_names_an_interpreter_it_cannot_run(kplace_cmd):
    done = subprocess.run(
        [kplace_cmd, "plan", "--graph", "beamformer/filtered", "--placement", "python"],
        cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
        env={**os.environ, "KPLACE_PYTHON": "/nonexistent/python3"})
    assert done.returncode != 0
    assert ("stage lowpass: kernel library" in done.stderr
            and "cannot run the Python interpreter /nonexistent/python3" in done.stderr
            and "KPLACE_PYTHON" in done.stderr), done.stderr
