#!/usr/bin/env python3
"""Designs the weighted beamformer's weights and saves them where graph.yaml names them
(`npy: weights.npy`): for an 8-channel uniform linear array half a wavelength apart, one row per
look direction (-30, 0 and 14.4775 degrees), each channel's steering phase times a Hamming
taper, normalised so that a plane wave from the look direction keeps its amplitude; complex64,
shape [3, 8] (what blocks.combine reads: y[b] = sum over c of w[b, c] * x[c]).

Usage: design.py [OUT.npy]   (default: weights.npy beside this script)
"""

import sys
from pathlib import Path

import numpy as np

CHANNELS = 8
SPACING = 0.5  # wavelengths
ANGLES = [-30.0, 0.0, 14.4775]  # degrees from broadside


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("weights.npy")
    c = np.arange(CHANNELS)
    taper = np.hamming(CHANNELS)
    taper /= taper.sum()
    sines = np.sin(np.radians(ANGLES))
    weights = taper * np.exp(-2j * np.pi * SPACING * np.outer(sines, c))
    np.save(out, weights.astype(np.complex64))
    # Each beam's gain towards every look direction, in dB: 0 on the diagonal.
    steer = np.exp(2j * np.pi * SPACING * np.outer(c, sines))
    gains = 20 * np.log10(np.abs(weights @ steer) + 1e-12)
    print(f"design.py: weights {weights.shape} to {out}; gains (beam x direction, dB):")
    print(np.array2string(gains, precision=1, suppress_small=True))


if __name__ == "__main__":
    main()
