#!/usr/bin/env python3
"""The kplace radar workload in NumPy/SciPy, tuned: what an expert writes, where receiver.py
is what a user writes in an afternoon.

Same wire format, frame assembly rules, detection format and command line as receiver.py
(whose helpers it shares); what differs is how each frame is processed and how packets are
taken off the socket:

- float32 end to end on the signal path: int16 samples times a precomputed 2-D Hann window
  (the outer product of the range and Doppler windows, interleaved for I/Q, rounded to
  float32 once) in one ufunc into a preallocated buffer, then ONE 2-D FFT
  (`scipy.fft.fft2`, pocketfft, `workers` = every core this process may use), which is the
  range FFT and the Doppler FFT without a corner turn: the map stays chirp-major [M, N], and
  the CFAR's square window does not care about the orientation;
- power |X|^2 into a preallocated float32 map;
- the CA-CFAR's window and guard sums from one summed-area table of the wrap-padded map,
  built in place in a preallocated float64 table (two in-place cumulative sums, then four
  corners per box); float64 because a target's power is up to 10^10 times the noise floor,
  and a float32 table would lose the noise under it (scipy.ndimage's uniform_filter1d, the
  other candidate, took 1.5 times as long here);
- the threshold test in place, detected cells listed in (range, Doppler) order, clustered by
  receiver.py's union-find;
- a receive buffer of 64 MiB (SO_RCVBUFFORCE where permitted), drained completely between
  frames into one staging buffer.

Usage: tuned.py --port P --frames F --cpi NxM --out FILE [--times FILE] [--workers W]
"""

import os
import sys

import numpy as np
import scipy.fft

from receiver import (
    GUARD,
    PFA,
    TRAIN,
    Frame,
    Processor,
    Receiver,
    arguments,
    hann,
    open_socket,
    serve,
)

RECV_BUFFER_BYTES = 64 << 20
FRAME_POOL = 8
"""Frame buffers allocated once: at most this many frames are assembled at a time."""


class TunedProcessor:
    """The signal chain for one CPI shape with every buffer allocated once."""

    def __init__(self, samples, chirps, workers, guard=GUARD, train=TRAIN, pfa=PFA):
        """Windows, CFAR constants and work buffers for frames of `chirps` x `samples`."""
        # Processor checks the window fits and holds the clustering; reuse both.
        self.plain = Processor(samples, chirps, guard, train, pfa)
        self.samples, self.chirps, self.workers = samples, chirps, workers
        self.half, self.guard = guard + train, guard
        window = np.outer(hann(chirps).astype(np.float64), hann(samples).astype(np.float64))
        self.window = np.repeat(window, 2, axis=1).astype(np.float32)  # [M, 2N], I and Q
        self.signal = np.empty((chirps, 2 * samples), dtype=np.float32)
        self.power_map = np.empty((chirps, samples), dtype=np.float32)
        self.table = np.zeros((chirps + 2 * self.half + 1, samples + 2 * self.half + 1))
        self.window_sum = np.empty((chirps, samples), dtype=np.float64)
        self.guard_sum = np.empty((chirps, samples), dtype=np.float64)
        self.detected = np.empty((chirps, samples), dtype=bool)
        cells = (2 * self.half + 1) ** 2 - (2 * guard + 1) ** 2
        alpha = cells * (pfa ** (-1.0 / cells) - 1.0)
        self.scale = alpha / cells

    def power(self, raw):
        """The power map, float32 [M, N] (chirp-major), of int16 [M, 2N] samples."""
        np.multiply(raw, self.window, out=self.signal)
        spectrum = scipy.fft.fft2(
            self.signal.view(np.complex64), overwrite_x=True, workers=self.workers
        )
        parts = spectrum.view(np.float32)
        np.square(parts, out=parts)
        np.add(parts[:, 0::2], parts[:, 1::2], out=self.power_map)
        return self.power_map

    def _fill_table(self, power):
        """The summed-area table of the map padded by `half` cells on every side with its
        own wrapped edges, built in place: a zero row and column, then cumulative sums."""
        h, rows, cols = self.half, self.chirps, self.samples
        inner = self.table[1:, 1:]
        inner[h : h + rows, h : h + cols] = power
        inner[h : h + rows, :h] = power[:, cols - h :]
        inner[h : h + rows, h + cols :] = power[:, :h]
        inner[:h] = inner[rows : rows + h]
        inner[h + rows :] = inner[h : 2 * h]
        np.cumsum(inner, axis=0, out=inner)
        np.cumsum(inner, axis=1, out=inner)

    def _box_sum(self, half, out):
        """The sum over the wrapped (2 half + 1)^2 square around every cell, into `out`:
        four corners of the table."""
        rows, cols, table = self.chirps, self.samples, self.table
        lo = self.half - half
        hi = lo + 2 * half + 1
        np.subtract(table[hi : hi + rows, hi : hi + cols], table[lo : lo + rows, hi : hi + cols], out=out)
        out -= table[hi : hi + rows, lo : lo + cols]
        out += table[lo : lo + rows, lo : lo + cols]

    def cfar(self, power):
        """Boolean [M, N]: power > alpha * mean(training cells), wrapping on both axes."""
        self._fill_table(power)
        self._box_sum(self.half, self.window_sum)
        self._box_sum(self.guard, self.guard_sum)
        threshold = self.window_sum
        threshold -= self.guard_sum
        threshold *= self.scale
        return np.greater(power, threshold, out=self.detected)

    def detect(self, raw):
        """The clusters of one frame, (range_bin, doppler_bin, power) sorted by bins."""
        power = self.power(raw)
        detected = self.cfar(power)
        # The map is [Doppler, range]: list cells in (range, Doppler) order, as kplace does.
        doppler, ranges = np.nonzero(detected)
        order = np.lexsort((doppler, ranges))
        return self.plain.clustered(ranges[order], doppler[order], power[doppler, ranges][order])


class TunedReceiver(Receiver):
    """receiver.py's Receiver with a pool of frame buffers allocated once."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pool = [
            Frame(
                raw=np.empty((self.chirps, 2 * self.samples), dtype=np.int16),
                arrived=np.zeros(self.chirps, dtype=bool),
            )
            for _ in range(FRAME_POOL)
        ]

    def new_frame(self):
        """A cleared frame from the pool; with every buffer in use, the oldest pending frame
        is abandoned for it (frames are assembled FRAME_POOL at a time at most)."""
        if not self.pool:
            self.abandon(next(iter(self.pending)))
        frame = self.pool.pop()
        frame.arrived[:] = False
        frame.count = 0
        return frame

    def retire(self, frame):
        """Returns a frame's buffers to the pool."""
        self.pool.append(frame)


def main():
    """Parses the command line, receives and processes the stream, and writes detections."""
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workers",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="FFT threads (default: every core this process may use)",
    )
    args = parser.parse_args()
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    samples, chirps = args.cpi
    return serve(
        args,
        TunedProcessor(samples, chirps, args.workers),
        open_socket(args.port, RECV_BUFFER_BYTES, force=True),
        TunedReceiver,
        note=f", {args.workers} FFT workers",
    )


if __name__ == "__main__":
    sys.exit(main())
