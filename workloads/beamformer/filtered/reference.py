#!/usr/bin/env python3
"""The filtered beamformer computed by NumPy over a whole recording at once.

Reads a SigMF recording of the graph's source (complex float32, the C channels of each
snapshot together), filters every channel with one continuous convolution over the whole
stream (the FIR's taps as the graph states them, rounded to float32 as kplace reads them),
keeps every D-th sample, steers the beams and averages their power per frame; writes the
golden files `kplace run --check golden:DIR` reads: DIR/beams.npy and DIR/beam_power.npy.

Usage: reference.py GRAPH RECORDING.sigmf-data OUT_DIR
"""

import re
import sys
from pathlib import Path

import numpy as np


def number_list(text, name):
    """The YAML flow list `name: [a, b, ...]` in `text`, over any number of lines."""
    found = re.search(rf"\b{name}:\s*\[([^\]]*)\]", text)
    if not found:
        sys.exit(f"reference.py: the graph has no list {name}")
    return [float(v) for v in found.group(1).replace("\n", " ").split(",")]


def number(text, name):
    """The first `name: value` in `text`."""
    found = re.search(rf"\b{name}:\s*([-+0-9.eE]+)", text)
    if not found:
        sys.exit(f"reference.py: the graph has no value {name}")
    return float(found.group(1))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    graph, recording, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    text = graph.read_text()
    channels, snapshots = int(number(text, "C")), int(number(text, "T")) * int(number(text, "R"))
    decimation = int(number(text, "decimation"))
    taps = np.array(number_list(text, "taps"), dtype=np.float32).astype(np.float64)
    angles = np.radians(number_list(text, "angles"))
    spacing = number(text, "spacing")

    x = np.fromfile(recording, dtype="<c8").astype(np.complex128)
    frames = x.size // (snapshots * channels)
    x = x[: frames * snapshots * channels].reshape(-1, channels)
    # One continuous filter per channel: the stream's first samples see zeros before them.
    filtered = np.stack(
        [np.convolve(x[:, c], taps)[: x.shape[0]] for c in range(channels)], axis=1
    )[::decimation]
    weights = np.exp(-2j * np.pi * spacing * np.outer(np.sin(angles), np.arange(channels)))
    beams = filtered @ weights.T / channels
    per_frame = snapshots // decimation
    beams = beams.reshape(frames, per_frame, len(angles))
    power = (np.abs(beams) ** 2).mean(axis=1)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "beams.npy", beams.astype("<c8"))
    np.save(out / "beam_power.npy", power.astype("<f4"))
    print(f"reference.py: {frames} frames, {x.shape[0]} snapshots of {channels} channels, "
          f"{len(taps)} taps, decimation {decimation}, beam power of the whole stream "
          + ", ".join(f"{p:.4g}" for p in power.mean(axis=0)))


if __name__ == "__main__":
    main()
