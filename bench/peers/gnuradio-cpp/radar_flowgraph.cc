// kplace's radar workload as a GNU Radio 3.10 flowgraph with no Python in the streaming path:
//
//   udp_chirp_source -> fft_vcc(N, Hann) -> radar::transpose_matrix_vcvc(N, M)
//     -> fft_vcc(M, Hann) -> complex_to_mag_squared(M) -> cacfar_cluster_sink
//
// The source and sink are this directory's C++ blocks (radar_blocks.h); the rest is stock
// GNU Radio and Debian's gr-radar. Fed by `kplace send`, judged by `kplace verify` and
// `kplace bisect-rate --sut-cmd` like every other peer (README.md).
//
// Usage: radar_flowgraph --port P --frames F --cpi NxM --out FILE [--times FILE]
//        [--idle-timeout S] [--rcvbuf BYTES] [--buffer-frames K] [--fft-threads T]
//        [--affinity C,C,C,C,C,C] [--rt-priority P]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gnuradio/blocks/complex_to_mag_squared.h>
#include <gnuradio/fft/fft_v.h>
#include <gnuradio/fft/window.h>
#include <gnuradio/radar/transpose_matrix_vcvc.h>
#include <gnuradio/top_block.h>

#include "radar_blocks.h"

namespace {

struct Options {
    int port = 0;
    uint64_t frames = 0;
    unsigned samples = 1024, chirps = 128;
    std::string out, times;
    double idle_timeout_s = 10.0;
    int rcvbuf = 64 << 20;
    int buffer_frames = 2;
    int fft_threads = 1;
    std::vector<int> affinity;  // one core per block, in flowgraph order; empty: none
    int rt_priority = 0;         // 0: the default scheduling class
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "radar_flowgraph: %s\nusage: radar_flowgraph --port P --frames F --cpi NxM "
                 "--out FILE [--times FILE] [--idle-timeout S] [--rcvbuf BYTES] "
                 "[--buffer-frames K] [--fft-threads T] [--affinity C,C,C,C,C,C] "
                 "[--rt-priority P]\n",
                 why.c_str());
    std::exit(2);
}

long parse_int(const std::string& flag, const std::string& text, long lo, long hi) {
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (errno != 0 || end == text.c_str() || *end != '\0' || value < lo || value > hi)
        usage(flag + ": '" + text + "' is not an integer in [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]");
    return value;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) usage(flag + " needs a value");
        const std::string value = argv[++i];
        if (flag == "--port") {
            o.port = int(parse_int(flag, value, 1, 65535));
        } else if (flag == "--frames") {
            o.frames = uint64_t(parse_int(flag, value, 1, 100000000));
        } else if (flag == "--cpi") {
            const auto x = value.find_first_of("xX");
            if (x == std::string::npos) usage("--cpi: '" + value + "' is not SAMPLESxCHIRPS");
            o.samples = unsigned(parse_int(flag, value.substr(0, x), 1, 16384));
            o.chirps = unsigned(parse_int(flag, value.substr(x + 1), 1, 4096));
        } else if (flag == "--out") {
            o.out = value;
        } else if (flag == "--times") {
            o.times = value;
        } else if (flag == "--idle-timeout") {
            o.idle_timeout_s = std::strtod(value.c_str(), nullptr);
            if (!(o.idle_timeout_s > 0 && o.idle_timeout_s < 3600))
                usage("--idle-timeout: '" + value + "' is not seconds in (0, 3600)");
        } else if (flag == "--rcvbuf") {
            o.rcvbuf = int(parse_int(flag, value, 4096, 1 << 30));
        } else if (flag == "--buffer-frames") {
            o.buffer_frames = int(parse_int(flag, value, 1, 64));
        } else if (flag == "--fft-threads") {
            o.fft_threads = int(parse_int(flag, value, 1, 64));
        } else if (flag == "--affinity") {
            std::stringstream list(value);
            std::string core;
            while (std::getline(list, core, ','))
                o.affinity.push_back(int(parse_int(flag, core, 0, 1023)));
            if (o.affinity.size() != 6)
                usage("--affinity: give 6 cores, one per block (source, range FFT, transpose, "
                      "Doppler FFT, power, CFAR sink)");
        } else if (flag == "--rt-priority") {
            o.rt_priority = int(parse_int(flag, value, 0, 99));
        } else {
            usage("unknown option " + flag);
        }
    }
    if (o.port == 0 || o.frames == 0 || o.out.empty())
        usage("--port, --frames and --out are required");
    // Every buffer holds whole frames; GNU Radio's double-mapped buffers need the item
    // count to be representable, so bound what a user can ask for before allocating.
    const uint64_t frame_bytes = uint64_t(o.samples) * o.chirps * 8;
    if (frame_bytes * uint64_t(o.buffer_frames) > (uint64_t(1) << 30))
        usage("--buffer-frames: " + std::to_string(o.buffer_frames) + " frames of " +
              std::to_string(frame_bytes) + " bytes exceed 1 GiB per buffer");
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    const unsigned N = o.samples, M = o.chirps;
    kplace_peer::Progress progress;
    progress.last_activity_ns = kplace_peer::monotonic_ns();

    try {
        auto tb = gr::make_top_block("kplace-radar");
        auto source = gnuradio::make_block_sptr<kplace_peer::udp_chirp_source>(
            o.port, N, M, o.rcvbuf, &progress);
        auto range_fft = gr::fft::fft_v<gr_complex, true>::make(
            int(N), gr::fft::window::hann(int(N)), false, o.fft_threads);
        auto transpose = gr::radar::transpose_matrix_vcvc::make(int(N), int(M), "packet_len");
        auto doppler_fft = gr::fft::fft_v<gr_complex, true>::make(
            int(M), gr::fft::window::hann(int(M)), false, o.fft_threads);
        auto power = gr::blocks::complex_to_mag_squared::make(M);
        auto sink = gnuradio::make_block_sptr<kplace_peer::cacfar_cluster_sink>(
            N, M, o.out, o.times, &progress);

        // Buffers of whole frames between every two blocks (the defaults are 32 KiB, less
        // than one chirp frame), so a stage's pause is absorbed rather than passed upstream.
        const int chirp_items = o.buffer_frames * int(M), bin_items = o.buffer_frames * int(N);
        source->set_min_output_buffer(chirp_items);
        range_fft->set_min_output_buffer(chirp_items);
        transpose->set_min_output_buffer(bin_items);
        doppler_fft->set_min_output_buffer(bin_items);
        power->set_min_output_buffer(bin_items);
        const std::vector<gr::block_sptr> blocks = {source,      range_fft, transpose,
                                                    doppler_fft, power,     sink};
        for (size_t i = 0; i < o.affinity.size(); ++i)
            blocks[i]->set_processor_affinity({o.affinity[i]});
        if (o.rt_priority > 0)
            for (const auto& block : blocks) block->set_thread_priority(o.rt_priority);

        tb->connect(source, 0, range_fft, 0);
        tb->connect(range_fft, 0, transpose, 0);
        tb->connect(transpose, 0, doppler_fft, 0);
        tb->connect(doppler_fft, 0, power, 0);
        tb->connect(power, 0, sink, 0);

        std::fprintf(stderr, "radar_flowgraph: listening on 127.0.0.1:%d, SO_RCVBUF %d, %ux%u\n",
                     o.port, source->granted_rcvbuf(), N, M);
        tb->start();
        const auto idle_ns = int64_t(o.idle_timeout_s * 1e9);
        while (progress.frames_written.load(std::memory_order_acquire) < o.frames &&
               kplace_peer::monotonic_ns() - progress.last_activity_ns.load() < idle_ns)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        progress.stopping = true;
        tb->stop();
        tb->wait();

        const auto& c = source->counters();
        const uint64_t written = progress.frames_written.load();
        std::fprintf(stderr,
                     "radar_flowgraph: packets=%llu wrong_size=%llu wrong_samples=%llu "
                     "chirp_out_of_range=%llu wrong_channel=%llu duplicate=%llu late=%llu "
                     "frames_emitted=%llu frames_abandoned=%llu frames_overrun=%llu "
                     "frames_written=%llu untagged=%llu\n",
                     (unsigned long long)c.packets, (unsigned long long)c.wrong_size,
                     (unsigned long long)c.wrong_samples,
                     (unsigned long long)c.chirp_out_of_range,
                     (unsigned long long)c.wrong_channel, (unsigned long long)c.duplicate,
                     (unsigned long long)c.late, (unsigned long long)c.frames_emitted,
                     (unsigned long long)c.frames_abandoned,
                     (unsigned long long)c.frames_overrun, (unsigned long long)written,
                     (unsigned long long)sink->untagged());
        return written >= o.frames ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "radar_flowgraph: %s\n", e.what());
        return 1;
    }
}
