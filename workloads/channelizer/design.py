#!/usr/bin/env python3
"""Designs the channelizer's prototype low-pass and saves it where graph.yaml names it
(`taps: {npy: prototype.npy}`): 8 taps per channel for 16 channels (128 taps), a
Hann-windowed sinc whose cutoff is half a channel (1/32 cycles per sample), float32.

Usage: design.py [OUT.npy]   (default: prototype.npy beside this script)
"""

import sys
from pathlib import Path

import numpy as np

CHANNELS = 16
PER_CHANNEL = 8


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("prototype.npy")
    taps = CHANNELS * PER_CHANNEL
    n = np.arange(taps) - (taps - 1) / 2
    prototype = np.sinc(n / CHANNELS) * np.hanning(taps + 2)[1:-1] / CHANNELS
    np.save(out, prototype.astype(np.float32))
    response = np.abs(np.fft.rfft(prototype, 8192))
    at = lambda f: 20 * np.log10(response[int(f * 8192)] / response[0])  # noqa: E731
    print(f"design.py: {taps} taps to {out}: {at(0.5 / CHANNELS):.1f} dB at the channel edge, "
          f"{at(1.5 / CHANNELS):.1f} dB at the next channel's centre")


if __name__ == "__main__":
    main()
