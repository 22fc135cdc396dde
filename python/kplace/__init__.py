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
from ._kplace import KplaceError, Pipeline, Report, Sweep, graph_path  # noqa: E402
from ._kplace import bisect_rate as _bisect_rate  # noqa: E402
from ._kplace import run as _run  # noqa: E402


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


__all__ = ["KplaceError", "Pipeline", "Report", "Sweep", "bisect_rate", "graph_path", "run"]
