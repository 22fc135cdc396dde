// cacfar_cluster_sink and its pure pieces, CaCfar and strongest_cells (radar_blocks.h).
#include "radar_blocks.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include <gnuradio/io_signature.h>

namespace kplace_peer {

namespace {
using u128 = unsigned __int128;

constexpr int kFractionBits = 8;
constexpr double kSaturatingPower = 0x1p78;  // powers at or above map to 2^86
const u128 kSaturated = u128(1) << 86;

/// q(p) = floor(p * 2^8): 0 for NaN and negative values, 2^86 from 2^78 up (inf included).
u128 fixed_point(float p) {
    const double wide = p;
    if (!(wide > 0.0)) return 0;
    if (wide >= kSaturatingPower) return kSaturated;
    return u128(std::floor(wide * double(1 << kFractionBits)));
}
}  // namespace

CaCfar::CaCfar(unsigned rows, unsigned cols, unsigned guard, unsigned train, double pfa)
    : rows_(rows), cols_(cols), guard_(guard), half_(guard + train),
      q_(size_t(rows) * cols) {
    if (2 * half_ + 1 > std::min(rows, cols))
        throw std::invalid_argument("the CFAR window " + std::to_string(2 * half_ + 1) +
                                    " does not fit " + std::to_string(rows) + "x" +
                                    std::to_string(cols));
    const unsigned window = 2 * half_ + 1, guard_side = 2 * guard + 1;
    const double cells = double(window * window - guard_side * guard_side);
    // As kplace_kernels::cfar: alpha = K (pfa^(-1/K) - 1), scale = alpha / K / 2^8.
    const double alpha = cells * (std::pow(pfa, -1.0 / cells) - 1.0);
    scale_ = alpha / cells / std::pow(2.0, kFractionBits);
}

void CaCfar::detect(const float* power, std::vector<uint32_t>& cells) {
    u128 largest = 0;
    const size_t n = q_.size();
    for (size_t i = 0; i < n; ++i) {
        q_[i] = fixed_point(power[i]);
        largest = std::max(largest, q_[i]);
    }
    // A window sum of 64-bit integers is exact while (2h+1)^2 * largest q fits.
    const u128 window_cells = u128(2 * half_ + 1) * (2 * half_ + 1);
    if (largest * window_cells < (u128(1) << 64))
        detect_with<uint64_t>(power, cells);
    else
        detect_with<u128>(power, cells);
}

template <typename Sum>
void CaCfar::detect_with(const float* power, std::vector<uint32_t>& cells) {
    const size_t rows = rows_, cols = cols_, h = half_, g = guard_;
    // Horizontal (Doppler, wrapping) box sums of width 2h+1 and 2g+1 for every cell, from one
    // prefix sum per row; then vertical running sums over 2h+1 and 2g+1 rows. Integers, so
    // the order of summation cannot change S.
    static thread_local std::vector<Sum> wide, narrow, prefix, acc_wide, acc_narrow;
    wide.resize(rows * cols);
    narrow.resize(rows * cols);
    prefix.resize(cols + 2 * h + 1);
    acc_wide.assign(cols, 0);
    acc_narrow.assign(cols, 0);
    for (size_t r = 0; r < rows; ++r) {
        const u128* q = q_.data() + r * cols;
        prefix[0] = 0;
        for (size_t k = 0; k < cols + 2 * h; ++k)
            prefix[k + 1] = prefix[k] + Sum(q[(k + cols - h) % cols]);
        Sum* w = wide.data() + r * cols;
        Sum* v = narrow.data() + r * cols;
        for (size_t c = 0; c < cols; ++c) {
            w[c] = prefix[c + 2 * h + 1] - prefix[c];
            v[c] = prefix[c + h + g + 1] - prefix[c + h - g];
        }
    }
    for (size_t dr = 0; dr < 2 * h + 1; ++dr) {
        const Sum* w = wide.data() + ((dr + rows - h) % rows) * cols;
        for (size_t c = 0; c < cols; ++c) acc_wide[c] += w[c];
    }
    for (size_t dr = 0; dr < 2 * g + 1; ++dr) {
        const Sum* v = narrow.data() + ((dr + rows - g) % rows) * cols;
        for (size_t c = 0; c < cols; ++c) acc_narrow[c] += v[c];
    }
    for (size_t r = 0; r < rows; ++r) {
        const float* p = power + r * cols;
        for (size_t c = 0; c < cols; ++c) {
            // Unsigned arithmetic wraps, but the true S fits, so the difference is exact;
            // converting rounds to the nearest double, one multiply, no fused multiply-add.
            const Sum training = acc_wide[c] - acc_narrow[c];
            const double threshold = double(training) * scale_;
            if (double(p[c]) > threshold) cells.push_back(uint32_t(r * cols + c));
        }
        const Sum* w_in = wide.data() + ((r + h + 1) % rows) * cols;
        const Sum* w_out = wide.data() + ((r + rows - h) % rows) * cols;
        const Sum* v_in = narrow.data() + ((r + g + 1) % rows) * cols;
        const Sum* v_out = narrow.data() + ((r + rows - g) % rows) * cols;
        for (size_t c = 0; c < cols; ++c) {
            acc_wide[c] += w_in[c] - w_out[c];
            acc_narrow[c] += v_in[c] - v_out[c];
        }
    }
}

void strongest_cells(const std::vector<uint32_t>& cells, const float* power, unsigned rows,
                     unsigned cols, std::vector<Detection>& out) {
    constexpr int forward[4][2] = {{0, 1}, {1, -1}, {1, 0}, {1, 1}};
    constexpr uint32_t none = UINT32_MAX;
    const size_t n = cells.size();
    static thread_local std::vector<uint32_t> parent, best;
    parent.resize(n);
    best.assign(n, none);
    for (size_t i = 0; i < n; ++i) parent[i] = uint32_t(i);
    auto find = [](uint32_t i) {
        while (parent[i] != i) i = parent[i] = parent[parent[i]];
        return i;
    };
    for (size_t i = 0; i < n; ++i) {
        const uint32_t r = cells[i] / cols, d = cells[i] % cols;
        for (const auto& step : forward) {
            const uint32_t nr = (r + uint32_t(step[0])) % rows;
            const uint32_t nd = (d + cols + uint32_t(step[1])) % cols;
            const uint32_t key = nr * cols + nd;
            const auto it = std::lower_bound(cells.begin(), cells.end(), key);
            if (it == cells.end() || *it != key) continue;
            const uint32_t a = find(uint32_t(i)), b = find(uint32_t(it - cells.begin()));
            if (a != b) parent[std::max(a, b)] = std::min(a, b);
        }
    }
    for (size_t i = 0; i < n; ++i) {
        const uint32_t root = find(uint32_t(i));
        // Strictly greater: a tie keeps the earlier (smaller) cell.
        if (best[root] == none || power[cells[i]] > power[cells[best[root]]])
            best[root] = uint32_t(i);
    }
    out.clear();
    for (size_t i = 0; i < n; ++i)
        if (best[find(uint32_t(i))] == i)
            out.push_back({cells[i] / cols, cells[i] % cols, power[cells[i]]});
}

cacfar_cluster_sink::cacfar_cluster_sink(unsigned samples, unsigned chirps,
                                         const std::string& out_path,
                                         const std::string& times_path, Progress* progress)
    : gr::sync_block("cacfar_cluster_sink",
                     gr::io_signature::make(1, 1, sizeof(float) * chirps),
                     gr::io_signature::make(0, 0, 0)),
      samples_(samples),
      chirps_(chirps),
      cfar_(samples, chirps, 2, 8, 1e-6),
      progress_(progress) {
    out_ = std::fopen(out_path.c_str(), "w");
    if (!out_) throw std::runtime_error(out_path + ": " + std::strerror(errno));
    std::fprintf(out_, "kplace-detections v1 cpi=%ux%u\n", samples, chirps);
    if (!times_path.empty()) {
        times_ = std::fopen(times_path.c_str(), "w");
        if (!times_) throw std::runtime_error(times_path + ": " + std::strerror(errno));
    }
    // Whole frames only: N range-bin vectors per call, processed where they lie.
    set_output_multiple(int(samples));
}

cacfar_cluster_sink::~cacfar_cluster_sink() {
    if (out_) std::fclose(out_);
    if (times_) std::fclose(times_);
}

int cacfar_cluster_sink::work(int noutput_items, gr_vector_const_void_star& input_items,
                              gr_vector_void_star&) {
    const auto* in = static_cast<const float*>(input_items[0]);
    const int frames = noutput_items / int(samples_);
    static const pmt::pmt_t frame_key = pmt::intern("frame_id");
    std::vector<gr::tag_t> tags;
    for (int f = 0; f < frames; ++f) {
        const uint64_t first = nitems_read(0) + uint64_t(f) * samples_;
        get_tags_in_range(tags, 0, first, first + 1, frame_key);
        uint64_t frame_id;
        if (tags.empty()) {
            ++untagged_;
            frame_id = next_untagged_id_;
        } else {
            frame_id = pmt::to_uint64(tags.front().value);
        }
        next_untagged_id_ = frame_id + 1;
        write_frame(frame_id, in + size_t(f) * samples_ * chirps_);
    }
    return frames * int(samples_);
}

void cacfar_cluster_sink::write_frame(uint64_t frame_id, const float* power) {
    cells_.clear();
    cfar_.detect(power, cells_);
    strongest_cells(cells_, power, samples_, chirps_, detections_);
    std::fprintf(out_, "frame %llu %zu\n", static_cast<unsigned long long>(frame_id),
                 detections_.size());
    char text[64];
    for (const Detection& d : detections_) {
        // The shortest text that reads back as the same f32, positional, as Rust prints it.
        const auto end = std::to_chars(text, text + sizeof text, d.power,
                                       std::chars_format::fixed).ptr;
        *end = '\0';
        std::fprintf(out_, "%u %u %s\n", d.range_bin, d.doppler_bin, text);
    }
    const int64_t done = monotonic_ns();
    if (times_)
        std::fprintf(times_, "%llu,%lld\n", static_cast<unsigned long long>(frame_id),
                     static_cast<long long>(done));
    progress_->last_activity_ns.store(done, std::memory_order_relaxed);
    progress_->frames_written.fetch_add(1, std::memory_order_release);
}

}  // namespace kplace_peer
