#!/usr/bin/env python3
"""A NumPy radar receiver: the kplace workload as a user would write it in an afternoon.

It binds 127.0.0.1:PORT over UDP, assembles the chirp packets `kplace send` emits into
frames of M chirps x N complex int16 samples, and processes every complete frame with
vectorised NumPy:

1. range FFT of each chirp after a Hann window over N;
2. corner turn, then Doppler FFT of each range bin after a Hann window over M;
3. power |X|^2;
4. 2-D cell-averaging CFAR (guard 2, training 8, Pfa 1e-6), wrapping on both axes, with the
   training sums taken in float64 from wrapped cumulative sums;
5. 8-connected clustering with wrap-around, reporting the strongest cell of each cluster.

Detections go to OUT in kplace's detection format (workloads/radar/src/detections.rs). A frame
still missing chirps when no packet of it has arrived for --frame-timeout-s is abandoned and
not written, so the verifier counts it missing. The receiver exits once FRAMES frames have
been written or abandoned, or after --idle-timeout-s without packets (once the first has
arrived), and prints its counters to stderr.

Usage: receiver.py --port P --frames F --cpi NxM --out FILE [--idle-timeout-s 2]
"""

import argparse
import dataclasses
import select
import socket
import struct
import sys
import time
from collections import Counter

import numpy as np

HEADER = struct.Struct("<4I")
"""The meaningful header fields: frame_id, chirp_id, channel_id, n_samples (little endian)."""
HEADER_BYTES = 64
SAMPLE_BYTES = 4
"""One complex sample on the wire: i16 I, then i16 Q."""

GUARD = 2
TRAIN = 8
PFA = 1e-6
RECV_BUFFER_BYTES = 8 << 20

FORWARD_NEIGHBOURS = ((0, 1), (1, -1), (1, 0), (1, 1))
"""Half of the 8-neighbourhood as (range, Doppler) offsets: every adjacent pair of cells
differs by one of these in one direction or the other."""


def hann(length):
    """The symmetric Hann window w[i] = 0.5 (1 - cos(2 pi i / (L - 1))), computed in float64
    and rounded once to float32; a window of one point is [1]."""
    if length == 1:
        return np.ones(1, dtype=np.float32)
    i = np.arange(length, dtype=np.float64)
    return (0.5 * (1.0 - np.cos(2.0 * np.pi * i / (length - 1)))).astype(np.float32)


def wrapped_box_sums(values, halves):
    """Sums of `values` over the (2 k + 1)^2 square around every cell, wrapping on both axes,
    for each half-width k in `halves`: differences of one summed-area table of a wrapped
    copy, so every box size costs four slices."""
    rows, cols = values.shape
    pad = max(halves)
    table = np.zeros((rows + 2 * pad + 1, cols + 2 * pad + 1))
    table[1:, 1:] = np.pad(values, pad, mode="wrap").cumsum(axis=0).cumsum(axis=1)
    sums = []
    for half in halves:
        lo = pad - half
        hi = lo + 2 * half + 1
        sums.append(
            table[hi : hi + rows, hi : hi + cols]
            - table[lo : lo + rows, hi : hi + cols]
            - table[hi : hi + rows, lo : lo + cols]
            + table[lo : lo + rows, lo : lo + cols]
        )
    return sums


class Processor:
    """The signal chain for one CPI shape: windows and CFAR constants are computed once."""

    def __init__(self, samples, chirps, guard=GUARD, train=TRAIN, pfa=PFA):
        """Prepares the chain for frames of `chirps` x `samples`, checking the CFAR window
        fits the map so no cell is counted twice."""
        half = guard + train
        if 2 * half + 1 > min(samples, chirps):
            raise ValueError(f"the CFAR window {2 * half + 1} does not fit {samples}x{chirps}")
        self.samples = samples
        self.chirps = chirps
        self.guard = guard
        self.half = half
        self.range_window = hann(samples)
        self.doppler_window = hann(chirps)
        cells = (2 * half + 1) ** 2 - (2 * guard + 1) ** 2
        alpha = cells * (pfa ** (-1.0 / cells) - 1.0)
        self.scale = alpha / cells

    def power(self, raw):
        """The range-Doppler power map, float32 [N, M], of one frame of int16 I/Q
        samples, int16 [M, 2N] chirp-major."""
        chirps = raw.astype(np.float32).view(np.complex64)
        chirps *= self.range_window
        ranges = np.fft.fft(chirps, axis=1)
        turned = np.ascontiguousarray(ranges.T)
        turned *= self.doppler_window
        spectrum = np.fft.fft(turned, axis=1)
        return spectrum.real**2 + spectrum.imag**2

    def cfar(self, power):
        """The boolean map of cells whose power exceeds alpha times the mean of their
        training cells (the window minus the guard square), wrapping on both axes."""
        power64 = power.astype(np.float64)
        window, guard = wrapped_box_sums(power64, (self.half, self.guard))
        return power64 > (window - guard) * self.scale

    def clusters(self, power, detected):
        """The strongest cell of every 8-connected (wrapping) cluster of detected cells, as
        (range_bin, doppler_bin, power) sorted by bins; ties go to the smallest bins."""
        rows, cols = np.nonzero(detected)
        return self.clustered(rows, cols, power[rows, cols])

    def clustered(self, rows, cols, powers):
        """The strongest cell of every 8-connected (wrapping) cluster of the detected cells
        given as arrays of range bins, Doppler bins and powers, in (range, Doppler) order."""
        cells = list(zip(rows.tolist(), cols.tolist()))
        index = {cell: i for i, cell in enumerate(cells)}
        parent = list(range(len(cells)))

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i, (r, d) in enumerate(cells):
            for dr, dd in FORWARD_NEIGHBOURS:
                j = index.get(((r + dr) % self.samples, (d + dd) % self.chirps))
                if j is not None:
                    a, b = find(i), find(j)
                    if a != b:
                        parent[max(a, b)] = min(a, b)

        powers = powers.tolist()
        strongest = {}
        for i, p in enumerate(powers):
            root = find(i)
            if root not in strongest or p > powers[strongest[root]]:
                strongest[root] = i
        return [(*cells[i], powers[i]) for i in sorted(strongest.values())]

    def detect(self, raw):
        """The clusters of one frame of raw samples, int16 [M, 2N]."""
        power = self.power(raw)
        return self.clusters(power, self.cfar(power))


@dataclasses.dataclass
class Frame:
    """A frame being assembled: its samples, which chirps have arrived, and when the last
    packet for it did."""

    raw: np.ndarray
    arrived: np.ndarray
    count: int = 0
    last_packet: float = 0.0


class DetectionWriter:
    """Writes kplace's detection format: a header line, then per frame `frame <id> <count>`
    and one `<range_bin> <doppler_bin> <power>` line per cluster."""

    def __init__(self, path, samples, chirps, times_path=None):
        """Opens `path` and writes the header for a samples x chirps CPI; with `times_path`,
        also records `frame_id,done_ns` (CLOCK_MONOTONIC, the sender's clock) per frame, from
        which `kplace bisect-rate` computes this receiver's post-CPI latency."""
        self.file = open(path, "w", encoding="utf-8")
        self.file.write(f"kplace-detections v1 cpi={samples}x{chirps}\n")
        self.times = open(times_path, "w", encoding="utf-8") if times_path else None

    def write_frame(self, frame_id, clusters):
        """Writes one frame's clusters; powers as the shortest positional float32 text, as
        kplace prints them."""
        lines = [f"frame {frame_id} {len(clusters)}\n"]
        lines += [
            f"{r} {d} {np.format_float_positional(np.float32(p), trim='-')}\n"
            for r, d, p in clusters
        ]
        self.file.writelines(lines)
        if self.times:
            self.times.write(f"{frame_id},{time.monotonic_ns()}\n")

    def close(self):
        """Flushes and closes the files."""
        self.file.close()
        if self.times:
            self.times.close()


class Receiver:
    """Receives chirp packets, assembles frames and hands each complete one to a
    `Processor`, writing its clusters with a `DetectionWriter`."""

    def __init__(self, sock, processor, writer, frames, frame_timeout_s, idle_timeout_s):
        """Prepares to receive `frames` frames from the bound, non-blocking `sock`."""
        self.sock = sock
        self.processor = processor
        self.writer = writer
        self.frames = frames
        self.frame_timeout_s = frame_timeout_s
        self.idle_timeout_s = idle_timeout_s
        samples, chirps = processor.samples, processor.chirps
        self.chirps = chirps
        self.samples = samples
        self.packet_bytes = HEADER_BYTES + samples * SAMPLE_BYTES
        # One byte more than a packet, so an oversized datagram shows as one.
        self.buffer = bytearray(self.packet_bytes + 1)
        self.payload = np.frombuffer(
            self.buffer, dtype="<i2", count=2 * samples, offset=HEADER_BYTES
        )
        self.pending = {}
        self.finished = set()
        self.counters = Counter()
        self.processing_s = 0.0

    def run(self):
        """Receives until `frames` frames are finished or the stream goes idle, then
        abandons whatever is still pending."""
        last_packet = None
        while len(self.finished) < self.frames:
            wait = None if last_packet is None else self.idle_timeout_s
            readable, _, _ = select.select([self.sock], [], [], wait)
            if not readable:
                break
            last_packet = self.drain()
            self.expire(last_packet)
        for frame_id in list(self.pending):
            self.abandon(frame_id)

    def drain(self):
        """Reads every datagram waiting on the socket; returns the time of the last."""
        now = time.monotonic()
        while len(self.finished) < self.frames:
            try:
                size = self.sock.recv_into(self.buffer)
            except BlockingIOError:
                break
            now = time.monotonic()
            self.accept(size, now)
        return now

    def accept(self, size, now):
        """Checks one datagram of `size` bytes in the buffer, in kplace's order (size, sample
        count, chirp range, channel, duplicate), and files its payload into its frame."""
        if size != self.packet_bytes:
            self.counters["wrong_size"] += 1
            return
        frame_id, chirp, channel, samples = HEADER.unpack_from(self.buffer)
        if samples != self.samples:
            self.counters["wrong_samples"] += 1
            return
        if chirp >= self.chirps:
            self.counters["chirp_out_of_range"] += 1
            return
        if channel != 0:
            self.counters["wrong_channel"] += 1
            return
        if frame_id in self.finished:
            self.counters["late"] += 1
            return
        frame = self.pending.get(frame_id)
        if frame is None:
            self.expire(now)
            frame = self.new_frame()
            self.pending[frame_id] = frame
        if frame.arrived[chirp]:
            self.counters["duplicate"] += 1
            return
        frame.raw[chirp] = self.payload
        frame.arrived[chirp] = True
        frame.count += 1
        frame.last_packet = now
        self.counters["packets"] += 1
        if frame.count == self.chirps:
            self.complete(frame_id)

    def complete(self, frame_id):
        """Processes a complete frame and writes its clusters."""
        frame = self.pending.pop(frame_id)
        start = time.perf_counter()
        clusters = self.processor.detect(frame.raw)
        self.processing_s += time.perf_counter() - start
        self.retire(frame)
        self.writer.write_frame(frame_id, clusters)
        self.finished.add(frame_id)
        self.counters["frames_written"] += 1

    def abandon(self, frame_id):
        """Gives up on an incomplete frame: it is not written."""
        self.retire(self.pending.pop(frame_id))
        self.finished.add(frame_id)
        self.counters["frames_abandoned"] += 1

    def new_frame(self):
        """An empty frame to assemble into."""
        return Frame(
            raw=np.empty((self.chirps, 2 * self.samples), dtype=np.int16),
            arrived=np.zeros(self.chirps, dtype=bool),
        )

    def retire(self, frame):
        """A frame is done with (processed or abandoned); a subclass may reuse it."""

    def expire(self, now):
        """Abandons every pending frame that has had no packet for the frame timeout."""
        stale = [
            frame_id
            for frame_id, frame in self.pending.items()
            if frame.count and now - frame.last_packet > self.frame_timeout_s
        ]
        for frame_id in stale:
            self.abandon(frame_id)

    def report(self):
        """One line of counters for stderr."""
        written = self.counters["frames_written"]
        mean_ms = 1e3 * self.processing_s / written if written else 0.0
        fields = " ".join(f"{k}={v}" for k, v in sorted(self.counters.items()))
        return f"receiver: {fields} mean_processing_ms={mean_ms:.2f}"


def parse_cpi(text):
    """Parses `NxM` (samples x chirps) into a pair of positive ints."""
    try:
        samples, chirps = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not SAMPLESxCHIRPS") from None
    if samples < 1 or chirps < 1:
        raise argparse.ArgumentTypeError(f"{text!r} has an empty dimension")
    return samples, chirps


def open_socket(port, buffer_bytes=RECV_BUFFER_BYTES, force=False):
    """A non-blocking UDP socket bound to 127.0.0.1:`port` with a receive buffer of
    `buffer_bytes`; with `force`, past net.core.rmem_max where the process may
    (SO_RCVBUFFORCE needs CAP_NET_ADMIN), else capped by it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        if not force:
            raise PermissionError
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUFFORCE, buffer_bytes)
    except (AttributeError, PermissionError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
    sock.bind(("127.0.0.1", port))
    sock.setblocking(False)
    return sock


def arguments(description):
    """The command line every NumPy peer takes (`kplace bisect-rate --sut-cmd` fills it in)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, required=True, help="UDP port on 127.0.0.1")
    parser.add_argument("--frames", type=int, required=True, help="frames to receive")
    parser.add_argument("--cpi", type=parse_cpi, default=(1024, 128), help="SAMPLESxCHIRPS")
    parser.add_argument("--out", required=True, help="the detections file to write")
    parser.add_argument(
        "--times", help="also write frame_id,done_ns (CLOCK_MONOTONIC) per frame to this file"
    )
    parser.add_argument(
        "--idle-timeout-s",
        type=float,
        default=2.0,
        help="exit after this long without packets, once the first has arrived",
    )
    parser.add_argument(
        "--frame-timeout-s",
        type=float,
        default=0.5,
        help="abandon an incomplete frame after this long without packets for it",
    )
    return parser


def serve(args, processor, sock, receiver_class=None, note=""):
    """Receives and processes the stream on `sock` with `processor`, writes the detections,
    prints the counters; returns the exit status: 0 only if every frame was written."""
    samples, chirps = args.cpi
    writer = DetectionWriter(args.out, samples, chirps, args.times)
    granted = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    print(
        f"receiver: listening on 127.0.0.1:{args.port}, SO_RCVBUF {granted}{note}",
        file=sys.stderr,
    )
    receiver = (receiver_class or Receiver)(
        sock, processor, writer, args.frames, args.frame_timeout_s, args.idle_timeout_s
    )
    try:
        receiver.run()
    finally:
        writer.close()
        sock.close()
        print(receiver.report(), file=sys.stderr)
    return 0 if receiver.counters["frames_written"] == args.frames else 1


def main():
    """Parses the command line, receives and processes the stream, and writes detections."""
    args = arguments(__doc__.split("\n\n")[0]).parse_args()
    samples, chirps = args.cpi
    return serve(args, Processor(samples, chirps), open_socket(args.port))


if __name__ == "__main__":
    sys.exit(main())
