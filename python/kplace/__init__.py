"""kplace from Python: run a graph on a placement on NumPy arrays.

    import kplace
    p = kplace.Pipeline("beamformer/filtered", placement="cpu", set={"C": 8})
    out = p.process(frames)      # {"beams": ..., "beam_power": ...}, frames stacked as given
    print(p.plan())
    report = p.report()          # ends the stream; the run report as a dict

Everything runs in kplace's Rust runtime (the extension module ``kplace._kplace``); this file
only says where the package keeps what kplace ships: its kernel libraries and the workloads'
graphs and placements (``_install/``, laid out as ``scripts/install.sh`` lays out a prefix),
which kplace finds through ``KPLACE_LIB_DIR`` and ``KPLACE_DATA_DIR`` unless they are set
already. docs/python.md is the walkthrough.
"""

import os as _os

_INSTALL = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_install")
if _os.path.isdir(_os.path.join(_INSTALL, "lib", "kplace")):
    _os.environ.setdefault("KPLACE_LIB_DIR", _os.path.join(_INSTALL, "lib", "kplace"))
if _os.path.isdir(_os.path.join(_INSTALL, "share", "kplace", "workloads")):
    _os.environ.setdefault("KPLACE_DATA_DIR", _os.path.join(_INSTALL, "share", "kplace"))

from . import _cli  # noqa: E402
from ._kplace import Admission, KplaceError, Pipeline, Report, Sweep, Tuning  # noqa: E402
from ._kplace import graph_path  # noqa: E402
from ._kplace import admit as _admit  # noqa: E402
from ._kplace import bisect_rate as _bisect_rate  # noqa: E402
from ._kplace import run as _run  # noqa: E402
from ._kplace import tune as _tune  # noqa: E402


def run(graph, placement=None, *, frames=None, source=None, recording=None, check=None,
        set=None, trace=False, args=None, progress=True):
    """Runs ``kplace run`` on ``graph`` (the bundled command, so every source, check and option
    it has is here; ``args``: any other options, as a list of strings) and returns its
    ``Report``: ``report.dict``, ``report.passed``, ``report.to_pandas()``, and with
    ``trace=True`` the run's timeline as the report's picture in a notebook. What the command
    says as it runs goes to ``sys.stderr`` (``progress=False``: kept quiet); Ctrl-C ends the run
    as at a terminal and returns its report. Raises ``KplaceError`` with the command's message
    when it writes no report."""
    return _run(_cli.BINARY, graph, placement, frames, source, recording, check, set, trace, args,
                progress)


def bisect_rate(graph, placements, *, shape=None, recording=None, check=None, goals=None,
                out=None, args=None, progress=True):
    """Searches the highest rate each of ``placements`` (names or files, a list or one string)
    sustains with ``kplace bisect-rate`` (the bundled command; ``shape``: one frame shape or a
    list; ``args``: any other options, as a list of strings) and returns its ``Sweep``:
    ``sweep.dict``, ``sweep.to_pandas()`` (a row per search), ``sweep.trials_to_pandas()``,
    ``sweep.svg(name)`` for each plot, the sustained rates as its picture in a notebook. The
    files go to ``out`` (kept), else to a temporary directory removed with the result. Trials
    are reported on ``sys.stderr`` as they end; Ctrl-C stops the search after the trial running
    and returns what was measured (``sweep.interrupted``)."""
    if isinstance(placements, (str, _os.PathLike)):
        placements = [placements]
    if shape is not None and not isinstance(shape, str):
        shape = ",".join(str(s) for s in shape)
    return _bisect_rate(_cli.BINARY, graph, [_os.fspath(p) for p in placements], shape,
                        recording, check, goals, out, args, progress)


def tune(graph, *, placement=None, rate=None, shape=None, prove=None, recording=None,
         check=None, out=None, args=None, progress=True):
    """The placement this machine runs ``graph`` best on, by ``kplace tune`` (the bundled
    command: calibrate, predict every placement the libraries allow, prove the best ``prove``
    with bisect-rate; ``rate``: the rate to meet, else the highest; ``args``: any other
    options). Returns a ``Tuning``: ``tuning.dict`` (``tune.json``), ``tuning.to_pandas()``
    (a row per placement predicted), ``tuning.proofs_to_pandas()``, ``tuning.winner`` (the
    placement file written), ``tuning.proofs`` (the proving search, a ``Sweep``). Files go to
    ``out`` (kept), else to a temporary directory removed with the result."""
    if shape is not None and not isinstance(shape, str):
        shape = ",".join(str(s) for s in shape)
    return _tune(_cli.BINARY, graph, placement, rate, shape, prove, recording, check, out, args,
                 progress)


def admit(graph, placement, rate, *, shape=None, prove=False, utilization=None, recording=None,
          check=None, out=None, args=None, progress=True):
    """How many pipelines of ``placement``, each fed ``rate`` frames per second, fit this
    machine, by ``kplace admit`` (the bundled command; ``prove=True`` measures it: N pipelines
    must sustain the rate and N + 1 must not). Returns an ``Admission``: ``admission.dict``
    (``admit.json``), ``admission.pipelines``, ``admission.conclusion``,
    ``admission.to_pandas()`` (a row per shared resource, the one that runs out first on
    top), ``admission.proof`` and ``admission.proof_sweeps``."""
    return _admit(_cli.BINARY, graph, placement, rate, shape, prove, utilization, recording,
                  check, out, args, progress)


def kernel(name, *, inputs=1, outputs=1, stateful=False, reset_on_gap=False):
    """Marks a function or a class as kernel ``name`` of a Python module that a placement
    names as a stage's library (``lowpass: python`` with ``libraries: {python: fir.py}``):

        @kplace.kernel("example.scale")
        def scale(x, *, factor):             # the stage's parameters, as keywords (text)
            return x * np.float32(factor)    # checked against the output's type and shape

    A class is made once per state with the stage (``stage.params``, ``stage.inputs``,
    ``stage.outputs``, ``stage.split``) and called at each launch; a stateful kernel must be one,
    setting ``carry_bytes``, and is called with ``carry=`` (its bytes, as the previous frame left
    them) and ``frames_missing=``. A callable that takes ``out=`` writes into the output arrays
    in place. docs/python.md states the whole contract. This only records the declaration (as
    ``obj.__kplace_kernel__``); kplace reads it when it imports the module."""
    declared = {"name": name, "inputs": inputs, "outputs": outputs, "stateful": stateful,
                "reset_on_gap": reset_on_gap}

    def mark(obj):
        obj.__kplace_kernel__ = declared
        return obj

    return mark


__all__ = ["Admission", "KplaceError", "Pipeline", "Report", "Sweep", "Tuning", "admit",
           "bisect_rate", "graph_path", "kernel", "run", "tune"]
