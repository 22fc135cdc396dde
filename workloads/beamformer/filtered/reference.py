#!/usr/bin/env python3
"""The filtered beamformer computed by NumPy over a whole recording at once.

Reads a SigMF recording of the graph's source (complex float32, the C channels of each
snapshot together), filters every channel with one continuous convolution over the whole
stream (the FIR's taps from the .npy file the graph names, float32 as kplace reads them),
keeps every D-th sample, steers the beams and averages their power per frame; writes the
golden files `kplace run --check golden:DIR` reads: DIR/beams.npy and DIR/beam_power.npy.

With --bursts, every frame is filtered on its own, from zeros, as the graph does with
`--set lowpass.stream=false`. With --lost F,G,... those frames (0-based) are silence in the
stream, as kplace's FIR fills a frame lost on the way.

Usage: reference.py [--bursts] [--lost F,G,...] GRAPH RECORDING.sigmf-data OUT_DIR
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
    args = sys.argv[1:]
    bursts = args[:1] == ["--bursts"]
    args = args[1:] if bursts else args
    lost = []
    if args[:1] == ["--lost"] and len(args) > 1:
        lost = [int(f) for f in args[1].split(",")]
        args = args[2:]
    if len(args) != 3:
        sys.exit(__doc__)
    graph, recording, out = Path(args[0]), Path(args[1]), Path(args[2])
    text = graph.read_text()
    channels, snapshots = int(number(text, "C")), int(number(text, "T")) * int(number(text, "R"))
    decimation = int(number(text, "decimation"))
    taps_file = re.search(r"\btaps:\s*\{npy:\s*([^}\s]+)\s*\}", text)
    if not taps_file:
        sys.exit("reference.py: the graph's taps are not {npy: FILE}")
    taps = np.load(graph.parent / taps_file.group(1)).astype(np.float32).astype(np.float64)
    angles = np.radians(number_list(text, "angles"))
    spacing = number(text, "spacing")

    x = np.fromfile(recording, dtype="<c8").astype(np.complex128)
    frames = x.size // (snapshots * channels)
    x = x[: frames * snapshots * channels].reshape(frames, snapshots, channels)
    x[lost] = 0
    x = x.reshape(-1, channels)
    # One continuous filter per channel (the stream's first samples see zeros before them),
    # or one per frame.
    pieces = np.split(x, frames) if bursts else [x]
    filtered = np.concatenate(
        [
            np.stack([np.convolve(p[:, c], taps)[: p.shape[0]] for c in range(channels)], axis=1)
            for p in pieces
        ]
    )[::decimation]
    weights = np.exp(-2j * np.pi * spacing * np.outer(np.sin(angles), np.arange(channels)))
    beams = filtered @ weights.T / channels
    per_frame = snapshots // decimation
    beams = beams.reshape(frames, per_frame, len(angles))
    power = (np.abs(beams) ** 2).mean(axis=1)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "beams.npy", beams.astype("<c8"))
    np.save(out / "beam_power.npy", power.astype("<f4"))
    print(f"reference.py: {'each of ' if bursts else ''}{frames} frames, {x.shape[0]} snapshots of {channels} channels, "
          f"{len(taps)} taps, decimation {decimation}, beam power of the whole stream "
          + ", ".join(f"{p:.4g}" for p in power.mean(axis=0)))


if __name__ == "__main__":
    main()
