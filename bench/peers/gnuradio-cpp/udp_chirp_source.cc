// udp_chirp_source: kplace's chirp datagrams in, complete frames out (radar_blocks.h).
#include "radar_blocks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <gnuradio/io_signature.h>
#include <cmath>
using std::isinf;  // volk_common.h calls isinf unqualified
#include <volk/volk.h>

namespace kplace_peer {

namespace {
constexpr size_t kHeaderBytes = 64;
constexpr size_t kBatch = 64;           // datagrams per recvmmsg
constexpr size_t kFinishedRing = 256;   // frame ids remembered as finished
constexpr int kPollMs = 20;             // how often a waiting work() checks for stop

uint32_t le32(const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
}  // namespace

int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

udp_chirp_source::udp_chirp_source(int port, unsigned samples, unsigned chirps,
                                   int rcvbuf_bytes, Progress* progress)
    : gr::sync_block("udp_chirp_source", gr::io_signature::make(0, 0, 0),
                     gr::io_signature::make(1, 1, sizeof(gr_complex) * samples)),
      samples_(samples),
      chirps_(chirps),
      packet_bytes_(kHeaderBytes + size_t(samples) * 4),
      progress_(progress),
      slots_(kAssembling + kReady),
      finished_(kFinishedRing, UINT32_MAX),
      staging_(kBatch * (kHeaderBytes + size_t(samples) * 4 + 1)) {
    for (size_t i = 0; i < slots_.size(); ++i) {
        slots_[i].raw.assign(size_t(chirps) * 2 * samples, 0);
        slots_[i].arrived.assign(chirps, 0);
        free_.push_back(i);
    }
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + strerror(errno));
    // As root, SO_RCVBUFFORCE passes net.core.rmem_max; otherwise the kernel caps the request.
    if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf_bytes, sizeof rcvbuf_bytes) != 0)
        setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes);
    socklen_t len = sizeof granted_rcvbuf_;
    getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &granted_rcvbuf_, &len);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        int err = errno;
        close(fd_);
        throw std::runtime_error("bind 127.0.0.1:" + std::to_string(port) + ": " + strerror(err));
    }
    // Whole frames only: every work call emits complete frames of M chirp vectors.
    set_output_multiple(int(chirps));
}

udp_chirp_source::~udp_chirp_source() {
    if (fd_ >= 0) close(fd_);
}

int udp_chirp_source::work(int noutput_items, gr_vector_const_void_star&,
                           gr_vector_void_star& output_items) {
    auto* out = static_cast<gr_complex*>(output_items[0]);
    const int room = noutput_items / int(chirps_);
    const size_t frame_values = size_t(chirps_) * 2 * samples_;
    // Never return 0 while running: the thread-per-block scheduler would park this source
    // until a neighbour wakes it (up to 250 ms). Wait here, in short polls, for a frame.
    while (ready_.empty()) {
        if (progress_->stopping.load(std::memory_order_relaxed)) return WORK_DONE;
        receive(kPollMs);
    }
    int emitted = 0;
    while (!ready_.empty() && emitted < room) {
        const size_t index = ready_.front();
        ready_.pop_front();
        Slot& slot = slots_[index];
        float* values = reinterpret_cast<float*>(out + size_t(emitted) * chirps_ * samples_);
        volk_16i_s32f_convert_32f(values, slot.raw.data(), 1.0f, unsigned(frame_values));
        const uint64_t first = nitems_written(0) + uint64_t(emitted) * chirps_;
        add_item_tag(0, first, pmt::intern("frame_id"), pmt::from_uint64(slot.frame_id));
        add_item_tag(0, first, pmt::intern("packet_len"), pmt::from_long(chirps_));
        release(index);
        ++emitted;
        ++counters_.frames_emitted;
    }
    return emitted * int(chirps_);
}

void udp_chirp_source::receive(int timeout_ms) {
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return;
    const size_t stride = packet_bytes_ + 1;
    mmsghdr msgs[kBatch];
    iovec iov[kBatch];
    // Drain what is waiting, a batch at a time, but hand complete frames on promptly.
    for (int round = 0; round < 16 && ready_.empty(); ++round) {
        for (size_t i = 0; i < kBatch; ++i) {
            iov[i] = {staging_.data() + i * stride, stride};
            msgs[i] = {};
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        const int got = recvmmsg(fd_, msgs, kBatch, MSG_DONTWAIT, nullptr);
        if (got <= 0) return;
        progress_->last_activity_ns.store(monotonic_ns(), std::memory_order_relaxed);
        for (int i = 0; i < got; ++i)
            accept(staging_.data() + size_t(i) * stride, msgs[i].msg_len,
                   (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0);
    }
}

void udp_chirp_source::accept(const uint8_t* data, size_t size, bool truncated) {
    // kplace's order: size, sample count, chirp range, channel; then late and duplicate.
    if (truncated || size != packet_bytes_) {
        ++counters_.wrong_size;
        return;
    }
    const uint32_t frame_id = le32(data), chirp = le32(data + 4), channel = le32(data + 8),
                   n_samples = le32(data + 12);
    if (n_samples != samples_) {
        ++counters_.wrong_samples;
        return;
    }
    if (chirp >= chirps_) {
        ++counters_.chirp_out_of_range;
        return;
    }
    if (channel != 0) {
        ++counters_.wrong_channel;
        return;
    }
    size_t index = SIZE_MAX;
    for (size_t candidate : assembling_)
        if (slots_[candidate].frame_id == frame_id) index = candidate;
    if (index == SIZE_MAX) {
        // Only a packet of a frame not being assembled can be late.
        if (finished(frame_id)) {
            ++counters_.late;
            return;
        }
        if (assembling_.size() == kAssembling) {
            // A fifth frame starts: the oldest incomplete one will not complete in time.
            const size_t oldest = assembling_.front();
            assembling_.pop_front();
            mark_finished(slots_[oldest].frame_id);
            release(oldest);
            ++counters_.frames_abandoned;
        }
        index = free_.back();
        free_.pop_back();
        Slot& slot = slots_[index];
        slot.frame_id = frame_id;
        slot.count = 0;
        std::fill(slot.arrived.begin(), slot.arrived.end(), 0);
        assembling_.push_back(index);
    }
    Slot& slot = slots_[index];
    if (slot.arrived[chirp]) {
        ++counters_.duplicate;
        return;
    }
    std::memcpy(slot.raw.data() + size_t(chirp) * 2 * samples_, data + kHeaderBytes,
                size_t(samples_) * 4);
    slot.arrived[chirp] = 1;
    ++counters_.packets;
    if (++slot.count < chirps_) return;
    for (auto it = assembling_.begin(); it != assembling_.end(); ++it)
        if (*it == index) {
            assembling_.erase(it);
            break;
        }
    mark_finished(frame_id);
    if (ready_.size() == kReady) {
        // The flowgraph is behind by kReady frames: drop this one rather than grow.
        release(index);
        ++counters_.frames_overrun;
        return;
    }
    ready_.push_back(index);
}

bool udp_chirp_source::finished(uint32_t frame_id) const {
    for (uint32_t id : finished_)
        if (id == frame_id) return true;
    return false;
}

void udp_chirp_source::mark_finished(uint32_t frame_id) {
    finished_[finished_next_] = frame_id;
    finished_next_ = (finished_next_ + 1) % finished_.size();
}

void udp_chirp_source::release(size_t slot) { free_.push_back(slot); }

}  // namespace kplace_peer
