"""blocks.fir in Python: the filtered beamformer's low-pass as a kernel written with NumPy.

The twin of the block library's C kernel, under the same contract, so that a placement may run
either (python.yaml runs this one) and `kplace run --check reference:cpu` compares them on one
stream:

- Input 0: cf32 or f32. Time runs along axis `axis` (default the last) and every axis before
  it; the axes after it are lanes, each filtered on its own. Output 0: the same type, S / D
  time steps of the same lanes (S samples a frame, D the decimation).
- y[m] = sum over k < K of h[k] x[m D - k], one long convolution over the whole stream, the
  sum in single precision from k = 0 up, one product and one addition at a time: the C
  kernel's order, so the two agree bit for bit.
- Stateful: the carry holds each lane's last K - 1 samples, time step after time step, as
  float32 scalars (the C kernel's layout, so a stream may move between the two). A lost
  frame counts as silence: its zeros are shifted into the history.

It declares itself as `@kplace.kernel("blocks.fir", stateful=True)` would (the dict at the end),
so that it needs NumPy alone: the `kplace` command may run it in any interpreter that has NumPy.
"""

import math

import numpy as np


class Fir:
    """One state of the filter, made from the stage's parameters and ports."""

    def __init__(self, stage):
        params = dict(stage.params)
        unknown = sorted(set(params) - {"taps", "decimation", "axis", "stream"})
        if unknown:
            raise ValueError(f"unknown parameter(s): {', '.join(unknown)}")
        if "taps" not in params:
            raise ValueError("parameter taps is required: [h0, h1, ...]")
        self.taps = np.array([float(t) for t in params["taps"].split(",")], np.float32)
        if not np.all(np.isfinite(self.taps)):
            raise ValueError("parameter taps: every coefficient must be finite")
        if stage.split is not None:
            raise ValueError("cannot be split: it carries the stream from frame to frame")
        (x,), (y,) = stage.inputs, stage.outputs
        if x.kind not in ("cf32", "f32") or y.kind != x.kind:
            raise ValueError(f"input 0 must be cf32 or f32 and output 0 the same, got {x.kind}, {y.kind}")
        axis = int(params.get("axis", len(x.shape) - 1))
        if not 0 <= axis < len(x.shape):
            raise ValueError(f"parameter axis is {axis}, but input 0 has {len(x.shape)} axes")
        self.samples = math.prod(x.shape[: axis + 1])
        lanes = math.prod(x.shape[axis + 1 :])
        self.decimation = int(params.get("decimation", "1"))
        if self.decimation < 1 or self.samples % self.decimation:
            raise ValueError(
                f"parameter decimation {self.decimation} must divide the {self.samples} samples of a frame"
            )
        self.outputs = self.samples // self.decimation
        if math.prod(y.shape) != self.outputs * lanes:
            raise ValueError(f"output 0 must hold {self.outputs} steps of {lanes} lanes, got {y.shape}")
        self.step = lanes * (2 if x.kind == "cf32" else 1)  # float32 scalars per time step
        self.stream = params.get("stream", "true") == "true"
        history = (len(self.taps) - 1) * self.step
        self.carry_bytes = 4 * history if self.stream else 0

    def __call__(self, x, *, out, carry=None, frames_missing=0):
        k = len(self.taps)
        frame = x.view(np.float32).reshape(self.samples, self.step)
        if carry is not None:
            history = carry.view(np.float32).reshape(k - 1, self.step)
            lost = min(frames_missing * self.samples, k - 1)
            if lost:
                history[: k - 1 - lost] = history[lost:].copy()
                history[k - 1 - lost :] = 0.0
        else:
            history = np.zeros((k - 1, self.step), np.float32)
        extended = np.concatenate([history, frame])
        y = np.zeros((self.outputs, self.step), np.float32)
        last = self.samples - self.decimation + 1
        for j, h in enumerate(self.taps):
            y += h * extended[k - 1 - j : k - 1 - j + last : self.decimation]
        out.view(np.float32).reshape(self.outputs, self.step)[...] = y
        if carry is not None and k > 1:
            history[...] = extended[-(k - 1) :]


# What @kplace.kernel("blocks.fir", stateful=True) sets (docs/python.md).
Fir.__kplace_kernel__ = {"name": "blocks.fir", "inputs": 1, "outputs": 1, "stateful": True}
