"""Bad inputs raise the right exceptions, naming what was expected: a wrong element type is a
TypeError, a wrong shape or a non-contiguous array a ValueError, and what kplace refuses (a
graph that is not there, a setting it cannot apply, a stream that has ended) a KplaceError
carrying kplace's message. A refused batch runs nothing: the stream goes on unchanged."""

import numpy as np
import pytest

import kplace

SHAPE = (4, 64, 8)


@pytest.fixture
def pipeline():
    return kplace.Pipeline("beamformer/filtered", placement="cpu")


def test_a_wrong_element_type_is_a_type_error(pipeline):
    with pytest.raises(TypeError, match=r"element type complex128 \('<c16'\), but source tensor x \(cf32\) takes complex64 arrays of shape \(4, 64, 8\)"):
        pipeline.process(np.zeros(SHAPE, np.complex128))
    with pytest.raises(TypeError, match="'>c8'"):
        pipeline.process(np.zeros(SHAPE, ">c8"))


def test_not_an_array_is_a_type_error(pipeline):
    with pytest.raises(TypeError, match="a list, not a numpy.ndarray"):
        pipeline.process([[0j] * 8] * 64)


def test_a_wrong_shape_is_a_value_error_naming_the_expected_one(pipeline):
    for shape in [(4, 64, 7), (3, 4, 64, 7), (64, 8), (1, 1, 4, 64, 8)]:
        with pytest.raises(ValueError, match=r"shape \(4, 64, 8\) for one frame or \(n, 4, 64, 8\) for n frames"):
            pipeline.process(np.zeros(shape, np.complex64))


def test_a_non_contiguous_array_is_a_value_error(pipeline):
    wide = np.zeros((4, 64, 16), np.complex64)
    with pytest.raises(ValueError, match="not C-contiguous.*numpy.ascontiguousarray"):
        pipeline.process(wide[:, :, ::2])
    with pytest.raises(ValueError, match="not C-contiguous"):
        pipeline.process(np.asfortranarray(np.zeros((2,) + SHAPE, np.complex64)))
    # The copy the message names is taken.
    out = pipeline.process(np.ascontiguousarray(wide[:, :, ::2]))
    assert out["beams"].shape == (64, 3)


def test_a_refused_batch_runs_nothing(pipeline):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3,) + SHAPE) + 1j * rng.standard_normal((3,) + SHAPE)).astype(np.complex64)
    with pytest.raises(ValueError):
        pipeline.process(x[:, :3])
    got = pipeline.process(x)["beams"]
    want = kplace.Pipeline("beamformer/filtered", placement="cpu").process(x)["beams"]
    assert got.tobytes() == want.tobytes()
    assert pipeline.frames_fed == 3


def test_a_missing_graph_is_a_kplace_error_naming_the_places_looked():
    with pytest.raises(kplace.KplaceError, match="graph beamformer/filterd: no such file.*did you mean beamformer/filtered"):
        kplace.Pipeline("beamformer/filterd")
    with pytest.raises(kplace.KplaceError, match="placement gpu-9: no such file"):
        kplace.Pipeline("spectrogram", placement="gpu-9")


def test_a_setting_kplace_refuses_is_a_kplace_error():
    with pytest.raises(kplace.KplaceError, match="dimension C: \"0\" is not a positive integer"):
        kplace.Pipeline("beamformer/filtered", set={"C": 0})
    with pytest.raises(kplace.KplaceError, match="nosuchstage"):
        kplace.Pipeline("beamformer/filtered", set={"nosuchstage.x": 1})


def test_an_ended_stream_is_a_kplace_error(pipeline):
    pipeline.process(np.zeros(SHAPE, np.complex64))
    assert pipeline.report()["frames"] == 1
    with pytest.raises(kplace.KplaceError, match="the stream has ended"):
        pipeline.process(np.zeros(SHAPE, np.complex64))
    assert issubclass(kplace.KplaceError, Exception)
    assert kplace.KplaceError.__module__ == "kplace"
