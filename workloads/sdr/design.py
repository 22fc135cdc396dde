#!/usr/bin/env python3
"""Designs the SDR chain's low-pass FIR and saves its taps where graph.yaml names them
(`taps: {npy: lowpass.npy}`): 63 taps, a Hamming-windowed sinc with its cutoff at 0.1 cycles
per sample (below 0.125, the Nyquist frequency after keeping one sample in 4), normalised to
unit gain at DC, as float32 (what blocks.fir computes with).

Usage: design.py [OUT.npy]   (default: lowpass.npy beside this script)
"""

import sys
from pathlib import Path

import numpy as np

TAPS = 63
CUTOFF = 0.1  # cycles per sample


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("lowpass.npy")
    n = np.arange(TAPS) - (TAPS - 1) / 2
    taps = 2 * CUTOFF * np.sinc(2 * CUTOFF * n) * np.hamming(TAPS)
    taps /= taps.sum()
    np.save(out, taps.astype(np.float32))
    response = np.abs(np.fft.rfft(taps, 4096))
    at = lambda f: 20 * np.log10(response[int(f * 4096)])  # noqa: E731
    print(f"design.py: {TAPS} taps to {out}: {at(0.05):.2f} dB at 0.05 cycles per sample, "
          f"{at(0.125):.1f} dB at 0.125 (the decimated Nyquist), {at(0.3):.1f} dB at 0.3")


if __name__ == "__main__":
    main()
