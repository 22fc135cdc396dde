#!/usr/bin/python3
"""The kplace radar workload (docs/workload.md) as a GNU Radio 3.10 flowgraph.

Run it with the system Python, where GNU Radio's bindings live:

    /usr/bin/python3 radar_flowgraph.py --port P --frames F --cpi NxM --out FILE

The flowgraph, stock blocks marked (*):

    network.socket_pdu (*)        one PDU (message) per UDP datagram
    => ChirpDeframer              check the 64-byte headers, assemble whole frames,
                                  emit each frame's M chirps in order (N complex each)
    -> fft.fft_vcc(N) (*)         range FFT: Hann over N, forward, no shift
    -> CornerTurn                 M chirp vectors -> N range-bin vectors of M chirps
    -> fft.fft_vcc(M) (*)         Doppler FFT: Hann over M, forward, no shift
    -> blocks.complex_to_mag_squared(M) (*)   power |X|^2
    -> CaCfar                     2-D CA-CFAR over the frame's N x M map; detections as a message
    => Clusterer                  8-connected clusters (wrapping), strongest cell of each
    => DetectionSink              the verifier's detection format; signals the end

(-> stream connection, => message connection). Each frame's id travels as a `frame_id`
stream tag on its first item, then inside the messages. The process stops after `--frames`
frames are written, or after `--idle-timeout` seconds without a packet or a written frame.
"""

import argparse
import collections
import struct
import sys
import threading
import time

import numpy as np
import pmt
from gnuradio import blocks, fft, gr, network

HEADER_BYTES = 64
FRAME_TAG = pmt.intern("frame_id")


def frame_tags(block, port, start, count):
    """The `frame_id` tags on items [start, start + count) of input `port`, as
    (relative offset, frame id) pairs in item order."""
    tags = block.get_tags_in_window(port, 0, count, FRAME_TAG)
    return sorted((tag.offset - start, pmt.to_uint64(tag.value)) for tag in tags)


class ChirpDeframer(gr.basic_block):
    """Turns UDP datagrams into whole frames of chirps.

    Input: message port `pdus`, one PDU per datagram, as network.socket_pdu delivers them.
    Output: complex64 vectors of N samples, one per chirp; a frame's M chirps leave together,
    in chirp order, the first tagged `frame_id`.

    A packet is a 64-byte header (u32 frame_id, chirp_id, channel_id = 0, n_samples = N,
    48 zero bytes) and N int16 I/Q pairs. A datagram of the wrong size, with a wrong channel
    or sample count, a chirp id out of range, or that duplicates a chirp already held is
    counted and dropped. At most `max_open` frames are assembled at once; starting another
    abandons the oldest (an incomplete frame is never emitted). At most `max_ready` complete
    frames wait for output space, and at most `max_ready` frames of datagrams wait to be
    checked; a frame or a datagram beyond that is dropped (an overrun).
    """

    def __init__(self, samples, chirps, max_open=4, max_ready=4):
        gr.basic_block.__init__(
            self, name="chirp_deframer", in_sig=None, out_sig=[(np.complex64, samples)]
        )
        self.samples = samples
        self.chirps = chirps
        self.packet_bytes = HEADER_BYTES + 4 * samples
        self.max_open = max_open
        self.max_ready = max_ready
        self.open = collections.OrderedDict()  # frame id -> (int16 [M, 2N], received [M])
        self.finished = collections.deque(maxlen=64)  # recently completed frame ids
        self.ready = collections.deque()  # (frame id, complex64 [M, N]) awaiting output
        self.ready_row = 0  # rows of ready[0] already written
        self.inbox = collections.deque()  # datagrams (PMT u8vectors) not yet checked
        self.max_inbox = max_ready * chirps
        self.last_packet = None  # time.monotonic() of the last datagram
        self.stats = collections.Counter()
        self.message_port_register_in(pmt.intern("pdus"))
        self.set_msg_handler(pmt.intern("pdus"), self.handle)

    def handle(self, pdu):
        """Queues one datagram for the next `general_work`.

        GNU Radio drains a block's whole message queue before each call of its work function,
        so the handler only queues: were it to assemble frames, a steady stream of datagrams
        would keep the block from ever emitting them."""
        self.last_packet = time.monotonic()
        if len(self.inbox) >= self.max_inbox:
            self.stats["overrun_packets"] += 1
        else:
            self.inbox.append(pmt.cdr(pdu))

    def general_work(self, input_items, output_items):
        while self.inbox:
            self._check(pmt.to_python(self.inbox.popleft()))
        return self._emit(output_items[0])

    def _check(self, packet):
        """Validates one datagram and files its chirp."""
        if len(packet) != self.packet_bytes:
            self.stats["wrong_size"] += 1
            return
        frame_id, chirp_id, channel_id, n_samples = struct.unpack_from("<4I", packet)
        if n_samples != self.samples:
            self.stats["wrong_samples"] += 1
        elif chirp_id >= self.chirps:
            self.stats["chirp_out_of_range"] += 1
        elif channel_id != 0:
            self.stats["wrong_channel"] += 1
        else:
            self._store(frame_id, chirp_id, packet[HEADER_BYTES:])

    def _store(self, frame_id, chirp_id, payload):
        """Files one chirp's payload into its frame; moves a completed frame to `ready`."""
        if frame_id in self.finished:
            self.stats["duplicates"] += 1
            return
        frame = self.open.get(frame_id)
        if frame is None:
            if len(self.open) >= self.max_open:
                self.open.popitem(last=False)
                self.stats["incomplete_frames"] += 1
            frame = (
                np.empty((self.chirps, 2 * self.samples), np.int16),
                np.zeros(self.chirps, bool),
            )
            self.open[frame_id] = frame
        raw, received = frame
        if received[chirp_id]:
            self.stats["duplicates"] += 1
            return
        raw[chirp_id] = payload.view(np.int16)
        received[chirp_id] = True
        self.stats["packets"] += 1
        if received.all():
            del self.open[frame_id]
            self.finished.append(frame_id)
            if len(self.ready) >= self.max_ready:
                self.stats["overrun_frames"] += 1
                return
            chirps = raw.astype(np.float32).view(np.complex64)
            self.ready.append((frame_id, chirps))
            self.stats["frames"] += 1

    def _emit(self, out):
        """Copies waiting chirps into `out`, tagging each frame's first; returns the count."""
        written = 0
        while self.ready and written < len(out):
            frame_id, chirps = self.ready[0]
            if self.ready_row == 0:
                self.add_item_tag(
                    0, self.nitems_written(0) + written, FRAME_TAG, pmt.from_uint64(frame_id)
                )
            count = min(len(out) - written, self.chirps - self.ready_row)
            out[written : written + count] = chirps[self.ready_row : self.ready_row + count]
            written += count
            self.ready_row += count
            if self.ready_row == self.chirps:
                self.ready.popleft()
                self.ready_row = 0
        return written


class CornerTurn(gr.basic_block):
    """Transposes each frame: M chirp vectors of N range bins in, N range-bin vectors of M
    chirps out (a fixed M:N rate), moving the `frame_id` tag to the frame's first row."""

    def __init__(self, samples, chirps):
        gr.basic_block.__init__(
            self,
            name="corner_turn",
            in_sig=[(np.complex64, samples)],
            out_sig=[(np.complex64, chirps)],
        )
        self.samples = samples
        self.chirps = chirps
        self.set_output_multiple(samples)
        self.set_relative_rate(samples, chirps)
        self.set_tag_propagation_policy(gr.TPP_DONT)

    def forecast(self, noutput_items, ninputs):
        """Whole frames only: M chirps in for every N rows out."""
        return [noutput_items // self.samples * self.chirps] * ninputs

    def general_work(self, input_items, output_items):
        frames = min(len(input_items[0]) // self.chirps, len(output_items[0]) // self.samples)
        if frames == 0:
            return 0
        n_in, n_out = frames * self.chirps, frames * self.samples
        chirps = input_items[0][:n_in].reshape(frames, self.chirps, self.samples)
        output_items[0][:n_out] = chirps.transpose(0, 2, 1).reshape(n_out, self.chirps)
        for offset, frame_id in frame_tags(self, 0, self.nitems_read(0), n_in):
            row = offset // self.chirps * self.samples
            self.add_item_tag(
                0, self.nitems_written(0) + row, FRAME_TAG, pmt.from_uint64(frame_id)
            )
        self.consume(0, n_in)
        return n_out


class CaCfar(gr.sync_block):
    """Two-dimensional cell-averaging CFAR over each frame's N x M power map.

    Input: float32 vectors of M Doppler bins, one per range bin, N per frame, the first
    tagged `frame_id`. A cell is detected when its power exceeds `alpha` times the mean of
    its training cells: the (2h+1)^2 square around it (h = guard + train), wrapping on both
    axes, minus the (2 guard + 1)^2 guard square, K cells; alpha = K (pfa^(-1/K) - 1). The
    training sums come from an f64 summed-area table of the wrap-padded map.

    Output: on message port `detections`, per frame a dict with `frame_id`, `range_bins`,
    `doppler_bins` and `powers` (the detected cells in row-major order).
    """

    def __init__(self, samples, chirps, guard=2, train=8, pfa=1e-6):
        gr.sync_block.__init__(self, name="ca_cfar", in_sig=[(np.float32, chirps)], out_sig=None)
        self.samples = samples
        self.chirps = chirps
        self.guard = guard
        self.half = guard + train
        cells = (2 * self.half + 1) ** 2 - (2 * guard + 1) ** 2
        alpha = cells * (pfa ** (-1.0 / cells) - 1.0)
        self.scale = alpha / cells  # threshold = scale * training sum
        self.map = np.empty((samples, chirps), np.float32)
        self.rows = 0
        self.frame_id = None
        self.message_port_register_out(pmt.intern("detections"))

    def work(self, input_items, output_items):
        rows = input_items[0]
        tags = dict(frame_tags(self, 0, self.nitems_read(0), len(rows)))
        pos = 0
        while pos < len(rows):
            if self.rows == 0:
                if pos not in tags:
                    raise RuntimeError("a frame starts without its frame_id tag")
                self.frame_id = tags[pos]
            count = min(len(rows) - pos, self.samples - self.rows)
            self.map[self.rows : self.rows + count] = rows[pos : pos + count]
            self.rows += count
            pos += count
            if self.rows == self.samples:
                self.rows = 0
                self._detect()
        return len(rows)

    def _box_sums(self, table, radius):
        """Sum over the (2 radius + 1)^2 square around every cell, from the summed-area
        table of the map padded by `self.half` on every side."""
        size, off = 2 * radius + 1, self.half - radius
        n, m = self.samples, self.chirps
        lo_r, hi_r = slice(off, off + n), slice(off + size, off + size + n)
        lo_d, hi_d = slice(off, off + m), slice(off + size, off + size + m)
        return table[hi_r, hi_d] - table[lo_r, hi_d] - table[hi_r, lo_d] + table[lo_r, lo_d]

    def _detect(self):
        padded = np.pad(self.map.astype(np.float64), self.half, mode="wrap")
        table = np.zeros((padded.shape[0] + 1, padded.shape[1] + 1))
        np.cumsum(np.cumsum(padded, axis=0), axis=1, out=table[1:, 1:])
        training = self._box_sums(table, self.half) - self._box_sums(table, self.guard)
        range_bins, doppler_bins = np.nonzero(self.map > self.scale * training)
        self.message_port_pub(
            pmt.intern("detections"),
            pmt.to_pmt(
                {
                    "frame_id": self.frame_id,
                    "range_bins": range_bins.astype(np.uint32),
                    "doppler_bins": doppler_bins.astype(np.uint32),
                    "powers": self.map[range_bins, doppler_bins],
                }
            ),
        )


class Clusterer(gr.basic_block):
    """Groups a frame's detections into 8-connected clusters, wrapping on both axes, and
    reports each cluster's strongest cell (largest power, ties to the smallest
    (range, Doppler)), sorted by (range, Doppler).

    Message in `detections` (as CaCfar sends), message out `clusters` (the same fields).
    """

    def __init__(self, samples, chirps):
        gr.basic_block.__init__(self, name="clusterer", in_sig=None, out_sig=None)
        self.samples = samples
        self.chirps = chirps
        self.message_port_register_in(pmt.intern("detections"))
        self.message_port_register_out(pmt.intern("clusters"))
        self.set_msg_handler(pmt.intern("detections"), self.handle)

    def handle(self, msg):
        """Clusters one frame's detections and publishes the strongest cells."""
        frame = pmt.to_python(msg)
        cells = list(zip(frame["range_bins"].tolist(), frame["doppler_bins"].tolist()))
        powers = frame["powers"]
        index = {cell: i for i, cell in enumerate(cells)}
        parent = list(range(len(cells)))

        def root(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i, (r, d) in enumerate(cells):
            for dr, dd in ((0, 1), (1, -1), (1, 0), (1, 1)):
                j = index.get(((r + dr) % self.samples, (d + dd) % self.chirps))
                if j is not None:
                    a, b = root(i), root(j)
                    parent[max(a, b)] = min(a, b)
        strongest = {}
        for i, cell in enumerate(cells):
            key = root(i)
            best = strongest.get(key)
            if best is None or (-powers[i], cell) < (-powers[best], cells[best]):
                strongest[key] = i
        keep = sorted(strongest.values(), key=lambda i: cells[i])
        self.message_port_pub(
            pmt.intern("clusters"),
            pmt.to_pmt(
                {
                    "frame_id": frame["frame_id"],
                    "range_bins": np.array([cells[i][0] for i in keep], np.uint32),
                    "doppler_bins": np.array([cells[i][1] for i in keep], np.uint32),
                    "powers": powers[keep].astype(np.float32),
                }
            ),
        )


class DetectionSink(gr.basic_block):
    """Writes clusters in kplace's detection format (workloads/radar/src/detections.rs) and
    sets `done` once `frames` frames are written."""

    def __init__(self, path, samples, chirps, frames, times_path=None):
        gr.basic_block.__init__(self, name="detection_sink", in_sig=None, out_sig=None)
        self.file = open(path, "w", encoding="utf-8")
        self.file.write(f"kplace-detections v1 cpi={samples}x{chirps}\n")
        # `frame_id,done_ns` on CLOCK_MONOTONIC per frame: the sender's clock, so that
        # `kplace bisect-rate` can measure this receiver's post-CPI latency.
        self.times = open(times_path, "w", encoding="utf-8") if times_path else None
        self.frames = frames
        self.written = 0
        self.last_write = None
        self.done = threading.Event()
        self.message_port_register_in(pmt.intern("clusters"))
        self.set_msg_handler(pmt.intern("clusters"), self.handle)

    def handle(self, msg):
        """Writes one frame's clusters."""
        if self.done.is_set():
            return
        frame = pmt.to_python(msg)
        lines = [f"frame {frame['frame_id']} {len(frame['powers'])}\n"]
        for r, d, p in zip(frame["range_bins"], frame["doppler_bins"], frame["powers"]):
            lines.append(f"{r} {d} {np.format_float_positional(np.float32(p), trim='-')}\n")
        self.file.writelines(lines)
        if self.times:
            self.times.write(f"{frame['frame_id']},{time.monotonic_ns()}\n")
        self.written += 1
        self.last_write = time.monotonic()
        if self.written >= self.frames:
            self.done.set()

    def close(self):
        """Flushes and closes the output files."""
        self.file.close()
        if self.times:
            self.times.close()


class RadarFlowgraph(gr.top_block):
    """The whole receiver: UDP packets in, a detections file out."""

    def __init__(self, port, samples, chirps, frames, out, times=None):
        gr.top_block.__init__(self, "kplace radar workload")
        packet_bytes = HEADER_BYTES + 4 * samples

        # One PDU per datagram, so packet boundaries survive. The MTU (read size) is one byte
        # more than a packet, so that an oversized datagram shows as the wrong size.
        self.source = network.socket_pdu("UDP_SERVER", "127.0.0.1", str(port), packet_bytes + 1)
        self.deframer = ChirpDeframer(samples, chirps)
        self.range_fft = fft.fft_vcc(samples, True, fft.window.hann(samples), False, 1)
        self.corner_turn = CornerTurn(samples, chirps)
        self.doppler_fft = fft.fft_vcc(chirps, True, fft.window.hann(chirps), False, 1)
        self.power = blocks.complex_to_mag_squared(chirps)
        self.cfar = CaCfar(samples, chirps)
        self.clusterer = Clusterer(samples, chirps)
        self.sink = DetectionSink(out, samples, chirps, frames, times)

        # Stream buffers of two frames rather than GNU Radio's default 32 KiB, so that a
        # Python block's pause (the GIL, a CFAR pass) is absorbed by the next buffer.
        self.deframer.set_min_output_buffer(2 * chirps)
        self.range_fft.set_min_output_buffer(2 * chirps)
        for block in (self.corner_turn, self.doppler_fft, self.power):
            block.set_min_output_buffer(2 * samples)

        self.msg_connect(self.source, "pdus", self.deframer, "pdus")
        self.connect(
            self.deframer,
            self.range_fft,
            self.corner_turn,
            self.doppler_fft,
            self.power,
            self.cfar,
        )
        self.msg_connect(self.cfar, "detections", self.clusterer, "detections")
        self.msg_connect(self.clusterer, "clusters", self.sink, "clusters")

    def last_activity(self):
        """The latest time a packet arrived or a frame was written, if any."""
        times = [t for t in (self.deframer.last_packet, self.sink.last_write) if t is not None]
        return max(times, default=None)


def parse_cpi(text):
    """`NxM` -> (N, M)."""
    try:
        samples, chirps = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"CPI must be SAMPLESxCHIRPS, not {text!r}") from None
    if samples < 1 or chirps < 1:
        raise argparse.ArgumentTypeError(f"CPI {text!r} must be positive")
    return samples, chirps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True, help="UDP port to listen on")
    parser.add_argument("--frames", type=int, required=True, help="frames to process, then exit")
    parser.add_argument("--cpi", type=parse_cpi, default=(1024, 128), help="SAMPLESxCHIRPS")
    parser.add_argument("--out", required=True, help="detections file to write")
    parser.add_argument(
        "--times",
        help="also write frame_id,done_ns (CLOCK_MONOTONIC) per frame to this file",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=10.0,
        help="exit after this many seconds without a packet or a written frame (default 10)",
    )
    args = parser.parse_args()
    samples, chirps = args.cpi

    tb = RadarFlowgraph(args.port, samples, chirps, args.frames, args.out, args.times)
    started = time.monotonic()
    tb.start()
    try:
        while not tb.sink.done.wait(0.1):
            if time.monotonic() - (tb.last_activity() or started) > args.idle_timeout:
                print("radar_flowgraph: idle timeout", file=sys.stderr)
                break
    finally:
        tb.stop()
        tb.wait()
        tb.sink.close()
    stats = " ".join(f"{k}={v}" for k, v in sorted(tb.deframer.stats.items()))
    still_open = len(tb.deframer.open)
    print(f"radar_flowgraph: wrote {tb.sink.written} frames; {stats} open_at_exit={still_open}",
          file=sys.stderr)
    return 0 if tb.sink.written >= args.frames else 1


if __name__ == "__main__":
    sys.exit(main())
