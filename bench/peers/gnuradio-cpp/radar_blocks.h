// The two C++ blocks GNU Radio lacks for kplace's radar workload (docs/workload.md), and the
// pure signal-processing pieces they use:
//
// - `udp_chirp_source`: receives kplace's chirp datagrams (recvmmsg, a large socket buffer),
//   checks each in kplace's order, assembles frames, and emits every complete frame as M
//   vectors of N gr_complex, tagged with its `frame_id` and with `packet_len` = M for
//   gr-radar's tagged-stream transpose.
// - `cacfar_cluster_sink`: takes each frame's N power vectors of M floats, applies kplace's
//   CA-CFAR rule exactly (`CaCfar`), joins 8-connected wrapping clusters (`strongest_cells`)
//   and writes kplace's detection format, plus `frame_id,done_ns` per frame for latency.
//
// Everything between them is stock GNU Radio (fft_vcc, gr-radar's transpose,
// complex_to_mag_squared); radar_flowgraph.cc connects the flowgraph.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include <gnuradio/sync_block.h>

namespace kplace_peer {

/// What the main thread watches: the last sign of life (a datagram received or a frame
/// written) and the frames written; and how it asks the source to finish.
struct Progress {
    std::atomic<int64_t> last_activity_ns{0};
    std::atomic<uint64_t> frames_written{0};
    std::atomic<bool> stopping{false};
};

/// CLOCK_MONOTONIC in nanoseconds: the clock `kplace send` stamps and `bisect-rate` reads.
int64_t monotonic_ns();

/// Counters of the source, one per packet class, named as kplace names them.
struct SourceCounters {
    uint64_t packets = 0;
    uint64_t wrong_size = 0;
    uint64_t wrong_samples = 0;
    uint64_t chirp_out_of_range = 0;
    uint64_t wrong_channel = 0;
    uint64_t duplicate = 0;
    uint64_t late = 0;
    uint64_t frames_emitted = 0;
    uint64_t frames_abandoned = 0;
    uint64_t frames_overrun = 0;
};

/// Receives chirp datagrams on 127.0.0.1:port and emits complete frames (see file comment).
///
/// At most `kAssembling` frames are assembled at once (a packet of a new frame beyond that
/// abandons the oldest) and at most `kReady` complete frames wait for output space (a frame
/// completed beyond that is dropped as an overrun), so memory is bounded whatever arrives.
class udp_chirp_source : public gr::sync_block {
public:
    static constexpr size_t kAssembling = 4;
    static constexpr size_t kReady = 4;

    udp_chirp_source(int port, unsigned samples, unsigned chirps, int rcvbuf_bytes,
                     Progress* progress);
    ~udp_chirp_source() override;

    int work(int noutput_items, gr_vector_const_void_star& input_items,
             gr_vector_void_star& output_items) override;

    /// The receive buffer the kernel granted.
    int granted_rcvbuf() const { return granted_rcvbuf_; }
    const SourceCounters& counters() const { return counters_; }

private:
    struct Slot {
        uint32_t frame_id = 0;
        unsigned count = 0;
        std::vector<int16_t> raw;    // M x 2N, chirp-major
        std::vector<uint8_t> arrived;  // M flags
    };

    /// Waits up to `timeout_ms` for datagrams and files every one waiting.
    void receive(int timeout_ms);
    /// Checks one datagram of `size` bytes at `data` and files its payload.
    void accept(const uint8_t* data, size_t size, bool truncated);
    bool finished(uint32_t frame_id) const;
    void mark_finished(uint32_t frame_id);
    void release(size_t slot);

    int fd_ = -1;
    int granted_rcvbuf_ = 0;
    unsigned samples_;
    unsigned chirps_;
    size_t packet_bytes_;
    Progress* progress_;
    std::vector<Slot> slots_;           // kAssembling + kReady buffers
    std::vector<size_t> free_;          // indices of unused slots
    std::deque<size_t> assembling_;     // oldest first
    std::deque<size_t> ready_;          // complete, oldest first
    std::vector<uint32_t> finished_;    // ring of recently finished frame ids
    size_t finished_next_ = 0;
    std::vector<uint8_t> staging_;      // kBatch datagrams of packet_bytes_ + 1
    SourceCounters counters_;
};

/// kplace's CA-CFAR rule, exactly (workloads/radar/kernels/cpu/src/cfar.rs): q(p) = floor(p * 2^8) as an
/// integer, summed exactly over the K training cells of the wrapping window, then
/// p > (double)S * scale with scale = alpha / K / 2^8. The sums are separable running box
/// sums in 64-bit integers when the frame's largest q allows, else in 128-bit.
class CaCfar {
public:
    CaCfar(unsigned rows, unsigned cols, unsigned guard, unsigned train, double pfa);

    /// Appends the detected cells of the row-major `power` map [rows x cols] to `cells`
    /// (as row * cols + col, ascending).
    void detect(const float* power, std::vector<uint32_t>& cells);

private:
    template <typename Sum>
    void detect_with(const float* power, std::vector<uint32_t>& cells);

    unsigned rows_, cols_, guard_, half_;
    double scale_;
    std::vector<unsigned __int128> q_;
};

/// One reported cluster: its strongest cell.
struct Detection {
    uint32_t range_bin;
    uint32_t doppler_bin;
    float power;
};

/// The strongest cell of every 8-connected cluster (wrapping on both axes) of `cells`
/// (ascending row-major indices into a rows x cols map), in ascending cell order; ties go to
/// the smallest cell, as kplace's `radar.cluster`.
void strongest_cells(const std::vector<uint32_t>& cells, const float* power, unsigned rows,
                     unsigned cols, std::vector<Detection>& out);

/// Applies the CFAR and clustering to every frame of N power vectors of M floats and writes
/// kplace's detection format (and the times file); counts frames in `progress`.
class cacfar_cluster_sink : public gr::sync_block {
public:
    cacfar_cluster_sink(unsigned samples, unsigned chirps, const std::string& out_path,
                        const std::string& times_path, Progress* progress);
    ~cacfar_cluster_sink() override;

    int work(int noutput_items, gr_vector_const_void_star& input_items,
             gr_vector_void_star& output_items) override;

    uint64_t untagged() const { return untagged_; }

private:
    void write_frame(uint64_t frame_id, const float* power);

    unsigned samples_, chirps_;
    CaCfar cfar_;
    Progress* progress_;
    FILE* out_ = nullptr;
    FILE* times_ = nullptr;
    std::vector<uint32_t> cells_;
    std::vector<Detection> detections_;
    uint64_t untagged_ = 0;
    uint64_t next_untagged_id_ = 0;
};

}  // namespace kplace_peer
