"""What libkplace_python.so runs in Python: importing a module of kernels, creating a kernel's
state, and one launch, with its arrays made from the runtime's buffers and checked on the way
back. The library calls these functions with the GIL held; docs/python.md is the contract a
kernel's author reads.
"""

import importlib.util
import inspect
import os
import sys
import traceback
import types

import numpy

# The keywords a launch may pass, each only to a callable that takes it.
LAUNCH_KEYWORDS = ("out", "carry", "frame", "frames_missing", "tile")
# The most inputs or outputs a kernel may declare (a graph stage has far fewer).
MAX_PORTS = 64


class KernelFault(Exception):
    """A rule of the contract broken, its message shown as it is."""


def describe(error):
    """An exception as one line: its type and message, and the innermost line that raised it."""
    if isinstance(error, KernelFault):
        return str(error)
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    frames = traceback.extract_tb(error.__traceback__)
    if frames:
        last = frames[-1]
        text += f" ({os.path.basename(last.filename)}:{last.lineno}, in {last.name})"
    return text


def _same_file(module, path):
    try:
        return os.path.samefile(getattr(module, "__file__", None) or "", path)
    except OSError:
        return False


def _import(path):
    """The module at `path`: the one already imported from that file, else imported now, as its
    file's stem when that name is free, with its directory on sys.path for its own imports."""
    for module in list(sys.modules.values()):
        if isinstance(module, types.ModuleType) and _same_file(module, path):
            return module
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    name = os.path.splitext(os.path.basename(path))[0]
    if not name.isidentifier() or name in sys.modules:
        name = f"_kplace_kernels_{len(sys.modules)}_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise KernelFault(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _declaration(attribute, obj):
    """The kernel `obj` declares (`__kplace_kernel__`, its own, not inherited), checked."""
    own = getattr(obj, "__dict__", None)
    if inspect.ismodule(obj) or not isinstance(own, (dict, types.MappingProxyType)):
        return None
    declared = own.get("__kplace_kernel__")
    if declared is None:
        return None
    where = f"{attribute}.__kplace_kernel__"
    if not isinstance(declared, dict):
        raise KernelFault(f"{where} must be a dict, not {type(declared).__name__}")
    unknown = set(declared) - {"name", "inputs", "outputs", "stateful", "reset_on_gap"}
    if unknown:
        raise KernelFault(f"{where} has unknown keys {sorted(unknown)}")
    name = declared.get("name")
    if not isinstance(name, str) or not name or "\0" in name:
        raise KernelFault(f"{where}: name must be a non-empty string, like 'blocks.fir'")
    ports = {}
    for key in ("inputs", "outputs"):
        value = declared.get(key, 1)
        if type(value) is not int or not 0 <= value <= MAX_PORTS:
            raise KernelFault(f"{where}: {key} must be a whole number from 0 to {MAX_PORTS}")
        ports[key] = value
    stateful = declared.get("stateful", False)
    reset = declared.get("reset_on_gap", False)
    if type(stateful) is not bool or type(reset) is not bool:
        raise KernelFault(f"{where}: stateful and reset_on_gap must be True or False")
    if reset and not stateful:
        raise KernelFault(f"{where}: reset_on_gap applies only to a stateful kernel")
    if stateful and not inspect.isclass(obj):
        raise KernelFault(
            f"{attribute} is stateful, so it must be a class: an instance is made for each "
            "state, with the carry's size as its carry_bytes"
        )
    if not callable(obj):
        raise KernelFault(f"{attribute} declares a kernel but cannot be called")
    return (name, ports["inputs"], ports["outputs"], stateful, reset, inspect.isclass(obj), obj)


def load(path):
    """Imports the module at `path` and returns its kernels, in the order it defines them:
    (name, inputs, outputs, stateful, reset_on_gap, is_class, object) each."""
    module = _import(path)
    kernels, seen = [], {}
    for attribute, obj in list(vars(module).items()):
        kernel = _declaration(attribute, obj)
        if kernel is None or any(obj is k[-1] for k in kernels):
            continue
        if kernel[0] in seen:
            raise KernelFault(
                f"{os.path.basename(path)} declares kernel {kernel[0]} twice: "
                f"{seen[kernel[0]]} and {attribute}"
            )
        seen[kernel[0]] = attribute
        kernels.append(kernel)
    if not kernels:
        raise KernelFault(
            f"{os.path.basename(path)} declares no kernel: mark a function or class with "
            "@kplace.kernel('name') (docs/python.md)"
        )
    return kernels


def _keywords(call):
    """Which launch keywords `call` takes: those it names, or all with **kwargs."""
    try:
        parameters = inspect.signature(call).parameters.values()
    except (TypeError, ValueError):
        return frozenset(LAUNCH_KEYWORDS)
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return frozenset(LAUNCH_KEYWORDS)
    names = {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return frozenset(names & set(LAUNCH_KEYWORDS))


class State:
    """One state of a kernel: the callable each launch calls and what it is passed."""

    def __init__(self, call, inputs, outputs, keywords, params, carry_bytes):
        self.call = call
        self.inputs = inputs
        self.outputs = outputs
        self.keywords = keywords
        self.params = params
        self.carry_bytes = carry_bytes


def _ports(ports):
    return [
        types.SimpleNamespace(kind=kind, dtype=numpy.dtype(descr), shape=tuple(shape))
        for kind, descr, shape in ports
    ]


def create(factory, is_class, stateful, params, inputs, outputs, split):
    """A state for one stage and frame slot: a class's instance, made from the stage's
    parameters and ports, or a function with the parameters it is called with."""
    stage = types.SimpleNamespace(
        params=dict(params), inputs=_ports(inputs), outputs=_ports(outputs), split=split
    )
    carry_bytes = 0
    if is_class:
        call = factory(stage)
        if stateful:
            carry_bytes = getattr(call, "carry_bytes", None)
            if type(carry_bytes) is not int or carry_bytes < 0:
                raise KernelFault(
                    "a stateful kernel's instance must set carry_bytes, the bytes it carries "
                    f"from frame to frame (a whole number, 0 or more), not {carry_bytes!r}"
                )
        call_params = {}
    else:
        call = factory
        call_params = stage.params
    keywords = _keywords(call)
    if stateful and "carry" not in keywords:
        raise KernelFault("a stateful kernel is called with carry=: its __call__ must take it")
    if split is not None and "tile" not in keywords:
        raise KernelFault(
            f"cannot be split (axis {split[0]}, tile {split[1]}): it takes no tile= keyword"
        )
    if not is_class:
        clash = sorted(set(call_params) & set(LAUNCH_KEYWORDS))
        if clash:
            raise KernelFault(
                f"parameter {clash[0]} has the name of a keyword every launch may pass; "
                "rename it in the graph"
            )
        try:
            launch = {name: None for name in keywords}
            inspect.signature(call).bind(*([None] * len(inputs)), **call_params, **launch)
        except TypeError as e:
            given = ", ".join(call_params) or "none"
            raise KernelFault(
                f"it is called with its {len(inputs)} input(s) and the stage's parameters "
                f"as keywords ({given}), which do not fit its signature: {e}"
            ) from None
        except ValueError:
            pass
    return State(call, stage.inputs, stage.outputs, keywords, call_params, carry_bytes)


def _store(result, outs, state):
    """Copies what the kernel returned into its outputs; a message when it broke the contract."""
    if result is None:
        if not outs or "out" in state.keywords:
            return None
        return (
            f"it returned None, but it has {len(outs)} output(s) to write: return them, "
            "or take out= and write into it"
        )
    if len(outs) == 1 and not isinstance(result, (tuple, list)):
        result = (result,)
    if not isinstance(result, (tuple, list)) or len(result) != len(outs):
        got = len(result) if isinstance(result, (tuple, list)) else type(result).__name__
        return f"it returned {got}, but it has {len(outs)} outputs: return one array each"
    for i, (value, out) in enumerate(zip(result, outs)):
        if value is out:
            continue
        if not isinstance(value, numpy.ndarray):
            return f"output {i}: it returned {type(value).__name__}, not a NumPy array"
        if value.dtype != out.dtype or value.shape != out.shape:
            return (
                f"output {i}: it returned {value.dtype} of shape {value.shape}, but the stage "
                f"writes {out.dtype} of shape {out.shape}"
            )
        numpy.copyto(out, value)
    return None


def _held_alone():
    """What sys.getrefcount says of an array that one list alone refers to (2 on CPython 3.11:
    the list and the call's argument), measured rather than assumed."""
    alone = [numpy.empty(0)]
    return sys.getrefcount(alone[0])


HELD_ALONE = _held_alone()


def _kept(arrays):
    """Names an array the kernel still holds a reference to, itself or through a view of it:
    here each is referred to by its list alone."""
    for what, items in arrays:
        for i in range(len(items)):
            if sys.getrefcount(items[i]) > HELD_ALONE:
                return what if what == "its carry" else f"{what} {i}"
    return None


def launch(state, inputs, outputs, carry, frame, frames_missing, tile):
    """Runs the kernel once on memoryviews of the runtime's buffers (inputs read-only), and
    fails the launch when the kernel broke the contract or kept one of its arrays."""
    args = [numpy.frombuffer(v, p.dtype).reshape(p.shape) for v, p in zip(inputs, state.inputs)]
    outs = [numpy.frombuffer(v, p.dtype).reshape(p.shape) for v, p in zip(outputs, state.outputs)]
    keywords = dict(state.params)
    given = state.keywords
    if "out" in given:
        keywords["out"] = outs[0] if len(outs) == 1 else tuple(outs)
    carry_array = [] if carry is None else [numpy.frombuffer(carry, numpy.uint8)]
    if "carry" in given and carry_array:
        keywords["carry"] = carry_array[0]
    if "frame" in given:
        keywords["frame"] = frame
    if "frames_missing" in given:
        keywords["frames_missing"] = frames_missing
    if "tile" in given:
        keywords["tile"] = tile
    try:
        message = _store(state.call(*args, **keywords), outs, state)
    except BaseException as error:  # noqa: BLE001 - nothing may unwind into the runtime
        message = describe(error)
    keywords = None
    kept = _kept([("input", args), ("output", outs), ("its carry", carry_array)])
    args = outs = carry_array = None
    for view in (*inputs, *outputs, carry):
        try:
            if view is not None:
                view.release()
        except BufferError:
            pass  # exported again by what the kernel kept, which is reported below
    if message is not None:
        raise KernelFault(message)
    if kept is not None:
        raise KernelFault(
            f"it kept {kept} past its launch, but that array is a view of a buffer the runtime "
            "reuses for later frames: keep a copy instead (numpy.copy)"
        )
