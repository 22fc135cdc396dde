#!/usr/bin/env python3
"""The kplace radar chain in CuPy: what a user with a GPU and Python would write instead.

It takes the scene's frames once over UDP from `kplace send` (the wire format of
docs/workload.md), keeps them on the GPU, and then processes them closed loop, frame i being
scene frame i mod K, exactly as `kplace run --scene-frames K` replays them:

1. int16 -> complex64, Hann window over N, range FFT (cuFFT through `cupy.fft`);
2. corner turn, Hann window over M, Doppler FFT, power |X|^2 (float32);
3. 2-D CA-CFAR (guard 2, training 8, Pfa 1e-6, wrapping on both axes) by kplace's exact rule
   (workloads/radar/kernels/cpu/src/cfar.rs): q(p) = floor(p * 2^8) summed exactly over the 416 training
   cells (two 43-bit limbs in wrapping uint64 summed-area tables), rounded once to f64, one
   f64 multiply by alpha / K / 2^8, detect iff p > that;
4. the detected cells' indices and powers come down to the host, where 8-connected wrapping
   clusters are joined and each reported as its strongest cell (as kplace's placements keep
   clustering on the CPU).

Detections go to --out in kplace's detection format, for `kplace verify` and `kplace
compare-detections`. The throughput printed (and written to --result as JSON) is closed-loop
frames per second over the frames after --warmup-frames, timed from a synchronized device to
a synchronized device with every frame's clusters on the host.

`--array-module numpy` runs the very same code with NumPy on the CPU (FFTs from pocketfft):
a check of the chain and the CFAR rule on a machine without a GPU.

Usage: radar_cupy.py --port P --cpi NxM --scene-frames K --frames F [--warmup-frames W]
                     --out FILE [--result FILE] [--array-module cupy|numpy]
"""

import argparse
import json
import select
import socket
import struct
import sys
import time

import numpy as np

HEADER = struct.Struct("<4I")
"""frame_id, chirp_id, channel_id, n_samples, little endian, at the start of a 64-byte header."""
HEADER_BYTES = 64
GUARD = 2
TRAIN = 8
PFA = 1e-6
FRACTION_BITS = 8
LIMB = float(2**43)
FORWARD_NEIGHBOURS = ((0, 1), (1, -1), (1, 0), (1, 1))


def parse_cpi(text):
    """`NxM` (samples x chirps) as a pair of positive ints."""
    try:
        samples, chirps = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not SAMPLESxCHIRPS") from None
    if samples < 1 or chirps < 1:
        raise argparse.ArgumentTypeError(f"{text!r} has an empty dimension")
    return samples, chirps


def hann(xp, length):
    """The symmetric Hann window, computed in float64 and rounded once to float32."""
    if length == 1:
        return xp.ones(1, dtype=xp.float32)
    i = np.arange(length, dtype=np.float64)
    return xp.asarray((0.5 * (1.0 - np.cos(2.0 * np.pi * i / (length - 1)))).astype(np.float32))


def receive_frames(port, samples, chirps, count, timeout_s):
    """Frames 0..count-1 from UDP 127.0.0.1:port as int16 [count, chirps, 2 samples]; prints
    `listening` on stderr once bound. Fails, naming what is missing, after timeout_s."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Room for every scene frame at once: SO_RCVBUFFORCE passes net.core.rmem_max where the
    # process may (root, CAP_NET_ADMIN); else SO_RCVBUF, which the kernel caps at rmem_max.
    want = min(256 << 20, max(4 << 20, 2 * count * chirps * (HEADER_BYTES + 4 * samples)))
    try:
        sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), want)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, want)
    got = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    sock.bind(("127.0.0.1", port))
    print(f"radar_cupy: listening on 127.0.0.1:{port} (receive buffer {got >> 10} KiB)",
          file=sys.stderr, flush=True)
    frames = np.zeros((count, chirps, 2 * samples), dtype=np.int16)
    arrived = np.zeros((count, chirps), dtype=bool)
    packet = HEADER_BYTES + 4 * samples
    buffer = bytearray(packet + 1)
    payload = np.frombuffer(buffer, dtype="<i2", count=2 * samples, offset=HEADER_BYTES)
    deadline = time.monotonic() + timeout_s
    while not arrived.all():
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            missing = int((~arrived).sum())
            raise SystemExit(f"radar_cupy: {missing} chirps of {count} frames never arrived")
        size = sock.recv_into(buffer)
        frame_id, chirp, channel, n = HEADER.unpack_from(buffer)
        if size == packet and n == samples and channel == 0 and chirp < chirps and frame_id < count:
            frames[frame_id, chirp] = payload
            arrived[frame_id, chirp] = True
    sock.close()
    return frames


class Chain:
    """The signal chain for one CPI shape on array module xp (cupy or numpy)."""

    def __init__(self, xp, samples, chirps, guard=GUARD, train=TRAIN, pfa=PFA):
        """Windows and CFAR constants, computed once; refuses a window that does not fit."""
        half = guard + train
        if 2 * half + 1 > min(samples, chirps):
            raise ValueError(f"the CFAR window {2 * half + 1} does not fit {samples}x{chirps}")
        self.xp, self.samples, self.chirps = xp, samples, chirps
        self.guard, self.half = guard, half
        self.range_window = hann(xp, samples)
        self.doppler_window = hann(xp, chirps)[None, :]
        cells = (2 * half + 1) ** 2 - (2 * guard + 1) ** 2
        alpha = cells * (pfa ** (-1.0 / cells) - 1.0)
        self.scale = alpha / cells / 2.0**FRACTION_BITS

    def power(self, raw):
        """float32 [N, M] power map of int16 [M, 2N] chirp-major samples."""
        xp = self.xp
        chirps = raw.astype(xp.float32).view(xp.complex64)
        chirps *= self.range_window
        ranges = xp.fft.fft(chirps, axis=1)
        turned = xp.ascontiguousarray(ranges.T)
        turned *= self.doppler_window
        spectrum = xp.fft.fft(turned, axis=1).astype(xp.complex64, copy=False)
        return (spectrum.real * spectrum.real + spectrum.imag * spectrum.imag).astype(xp.float32)

    def _box(self, table, half):
        """Wrapped (2 half + 1)^2 box sums from a summed-area table padded by self.half."""
        rows, cols = self.samples, self.chirps
        lo = self.half - half
        hi = lo + 2 * half + 1
        return (
            table[hi : hi + rows, hi : hi + cols]
            - table[lo : lo + rows, hi : hi + cols]
            - table[hi : hi + rows, lo : lo + cols]
            + table[lo : lo + rows, lo : lo + cols]
        )

    def _training_sums(self, limb):
        """Exact training sums of one uint64 limb: sums wrap modulo 2^64, but every box sum
        is below 2^52, so differences of the wrapped table are exact."""
        xp = self.xp
        padded = xp.pad(limb, self.half, mode="wrap")
        table = xp.zeros((padded.shape[0] + 1, padded.shape[1] + 1), dtype=xp.uint64)
        table[1:, 1:] = padded.cumsum(axis=0, dtype=xp.uint64).cumsum(axis=1, dtype=xp.uint64)
        return self._box(table, self.half) - self._box(table, self.guard)

    def cfar(self, power):
        """Boolean [N, M]: kplace's exact CA-CFAR rule (module doc, step 3)."""
        xp = self.xp
        p64 = power.astype(xp.float64)
        q = p64 * 2.0**FRACTION_BITS
        hi = xp.floor(q / LIMB)
        lo = xp.floor(q - hi * LIMB)
        s_hi = self._training_sums(hi.astype(xp.uint64)).astype(xp.float64)
        s_lo = self._training_sums(lo.astype(xp.uint64)).astype(xp.float64)
        # s_hi * 2^43 and s_lo are exact f64s: their sum is S rounded once, as kplace rounds it.
        total = s_hi * LIMB + s_lo
        return p64 > total * self.scale

    def detect(self, raw):
        """The clusters of one frame: (range_bin, doppler_bin, power) sorted by bins."""
        xp = self.xp
        power = self.power(raw)
        rows, cols = xp.nonzero(self.cfar(power))
        powers = power[rows, cols]
        if xp is not np:
            rows, cols, powers = rows.get(), cols.get(), powers.get()
        return clusters(rows.tolist(), cols.tolist(), powers.tolist(), self.samples, self.chirps)


def clusters(rows, cols, powers, samples, chirps):
    """The strongest cell of every 8-connected (wrapping) cluster of the detected cells, given
    in row-major order; ties go to the smallest bins."""
    cells = list(zip(rows, cols))
    index = {cell: i for i, cell in enumerate(cells)}
    parent = list(range(len(cells)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (r, d) in enumerate(cells):
        for dr, dd in FORWARD_NEIGHBOURS:
            j = index.get(((r + dr) % samples, (d + dd) % chirps))
            if j is not None:
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    strongest = {}
    for i, p in enumerate(powers):
        root = find(i)
        if root not in strongest or p > powers[strongest[root]]:
            strongest[root] = i
    return [(*cells[i], powers[i]) for i in sorted(strongest.values())]


def main():
    """Receives the scene frames, runs the chain closed loop, writes detections and rate."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True, help="UDP port on 127.0.0.1")
    parser.add_argument("--cpi", type=parse_cpi, default=(1024, 128), help="SAMPLESxCHIRPS")
    parser.add_argument("--scene-frames", type=int, default=8, help="distinct frames sent")
    parser.add_argument("--frames", type=int, required=True, help="frames to process")
    parser.add_argument("--warmup-frames", type=int, default=0, help="frames left out of the rate")
    parser.add_argument("--out", required=True, help="the detections file to write")
    parser.add_argument("--result", help="also write the rate as JSON to this file")
    parser.add_argument("--array-module", choices=("cupy", "numpy"), default="cupy")
    parser.add_argument("--receive-timeout-s", type=float, default=60.0)
    args = parser.parse_args()
    if args.scene_frames < 1 or args.frames <= args.warmup_frames or args.warmup_frames < 0:
        parser.error("need --scene-frames >= 1 and 0 <= --warmup-frames < --frames")

    if args.array_module == "cupy":
        import cupy as xp  # noqa: PLC0415 (only where asked: a CPU machine has no CuPy)

        device = xp.cuda.Device(0)
        device_name = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        sync = device.synchronize
    else:
        xp, device_name, sync = np, "cpu", lambda: None

    samples, chirps = args.cpi
    chain = Chain(xp, samples, chirps)
    host = receive_frames(args.port, samples, chirps, args.scene_frames, args.receive_timeout_s)
    frames = xp.asarray(host)
    stream = xp.cuda.Stream(non_blocking=True) if xp is not np else None
    results = []
    started = None
    with stream if stream is not None else _nothing():
        for i in range(args.frames):
            if i == args.warmup_frames:
                sync()
                started = time.perf_counter()
            results.append(chain.detect(frames[i % args.scene_frames]))
        sync()
    seconds = time.perf_counter() - started
    measured = args.frames - args.warmup_frames
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(f"kplace-detections v1 cpi={samples}x{chirps}\n")
        for frame_id, found in enumerate(results):
            out.write(f"frame {frame_id} {len(found)}\n")
            for r, d, p in found:
                out.write(f"{r} {d} {np.format_float_positional(np.float32(p), trim='-')}\n")
    result = {
        "schema": "kplace-peer-cupy/1",
        "array_module": args.array_module,
        "device": device_name,
        "cpi": f"{samples}x{chirps}",
        "frames": args.frames,
        "measured_frames": measured,
        "seconds": seconds,
        "throughput_cpi_per_s": measured / seconds if seconds > 0 else None,
    }
    if args.result:
        with open(args.result, "w", encoding="utf-8") as f:
            json.dump(result, f)
    print(
        f"radar_cupy: {measured} frames in {seconds:.3f} s: "
        f"{result['throughput_cpi_per_s']:.1f} CPI/s closed loop on {device_name}",
        file=sys.stderr,
    )
    return 0


class _nothing:
    """A context that does nothing (NumPy has no streams)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
