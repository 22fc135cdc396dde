//! Datagrams in batches: the [`Datagrams`] seam the receiver reads through, and its socket
//! implementation on `recvmmsg` (through nix), which scatters each datagram's header and
//! payload into separate buffers and reports its sender.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg};

/// One message of a batch: where its header and payload are to go, and what arrived.
#[derive(Clone, Copy, Debug)]
pub struct Message {
    /// Where the first header bytes go.
    pub header: *mut u8,
    /// Bytes `header` holds.
    pub header_len: usize,
    /// Where the bytes after the header go.
    pub payload: *mut u8,
    /// Bytes `payload` holds.
    pub payload_len: usize,
    /// Out: the datagram's length (at most `header_len + payload_len` unless truncated).
    pub len: usize,
    /// Out: the datagram was longer than both buffers together.
    pub truncated: bool,
    /// Out: who sent it, if known.
    pub source: Option<SocketAddr>,
}

impl Message {
    /// A message with no buffers yet.
    pub fn empty() -> Self {
        Self {
            header: std::ptr::null_mut(),
            header_len: 0,
            payload: std::ptr::null_mut(),
            payload_len: 0,
            len: 0,
            truncated: false,
            source: None,
        }
    }
}

/// A source of datagrams, received a batch at a time.
pub trait Datagrams {
    /// Receives at least one and at most `messages.len()` datagrams into the messages'
    /// buffers, waiting a short while (the receiver's poll interval) for the first; fills in
    /// each message's `len`, `truncated` and `source`. `Err` of kind `WouldBlock` or
    /// `TimedOut` when none came in that while; `Ok(0)` when none will ever come again.
    ///
    /// # Safety
    /// Every message's `header` and `payload` point at writable memory of `header_len` and
    /// `payload_len` bytes, not otherwise accessed during the call.
    unsafe fn recv_batch(&mut self, messages: &mut [Message]) -> io::Result<usize>;
}

/// The most messages one `recvmmsg` takes: a batch's gather vectors are built on the stack for
/// every call (so a batch allocates nothing), and building more than the receiver's batch of
/// 64 would cost every call for nothing; a longer batch is received in several calls.
pub const MAX_BATCH: usize = 64;

/// [`Datagrams`] from a UDP socket through nix's `recvmmsg`; its message headers and address
/// slots are allocated once, for `batch` messages (at most [`MAX_BATCH`]), and each call's
/// gather vectors live on the stack, so receiving allocates nothing.
pub struct SocketDatagrams<'s> {
    socket: &'s UdpSocket,
    headers: MultiHeaders<SockaddrStorage>,
    batch: usize,
}

impl<'s> SocketDatagrams<'s> {
    /// Batches of up to `batch` messages (at most [`MAX_BATCH`]) from `socket` (which has a
    /// read timeout).
    pub fn new(socket: &'s UdpSocket, batch: usize) -> Self {
        let batch = batch.clamp(1, MAX_BATCH);
        Self {
            socket,
            headers: MultiHeaders::preallocate(batch, None),
            batch,
        }
    }
}

impl Datagrams for SocketDatagrams<'_> {
    unsafe fn recv_batch(&mut self, messages: &mut [Message]) -> io::Result<usize> {
        let n = messages.len().min(self.batch);
        let mut iovs: [[IoSliceMut<'_>; 2]; MAX_BATCH] =
            std::array::from_fn(|_| [IoSliceMut::new(&mut []), IoSliceMut::new(&mut [])]);
        for (iov, m) in iovs.iter_mut().zip(&messages[..n]) {
            // SAFETY: the caller vouches that `header` and `payload` point at writable memory
            // of their stated lengths, accessed by nothing else during this call, which is as
            // long as these slices live.
            *iov = unsafe {
                [
                    buffer(m.header, m.header_len),
                    buffer(m.payload, m.payload_len),
                ]
            };
        }
        let received = recvmmsg(
            self.socket.as_raw_fd(),
            &mut self.headers,
            iovs[..n].iter_mut(),
            MsgFlags::MSG_WAITFORONE,
            None,
        )?;
        let mut got = 0;
        for (m, r) in messages.iter_mut().zip(received) {
            m.len = r.bytes;
            m.truncated = r.flags.contains(MsgFlags::MSG_TRUNC);
            m.source = r.address.as_ref().and_then(socket_addr);
            got += 1;
        }
        Ok(got)
    }
}

/// `len` bytes at `ptr` as a slice; an empty one for a length of zero (whatever the pointer).
///
/// # Safety
/// With `len > 0`, `ptr` points at `len` writable bytes that nothing else accesses while the
/// slice lives.
unsafe fn buffer<'b>(ptr: *mut u8, len: usize) -> IoSliceMut<'b> {
    if len == 0 {
        return IoSliceMut::new(&mut []);
    }
    // SAFETY: the caller's contract, above.
    IoSliceMut::new(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// The sender's address the kernel reported, as a standard socket address.
fn socket_addr(storage: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = storage.as_sockaddr_in() {
        return Some(SocketAddr::V4(SocketAddrV4::from(*v4)));
    }
    storage
        .as_sockaddr_in6()
        .map(|v6| SocketAddr::V6(SocketAddrV6::from(*v6)))
}

/// Asks for a receive buffer of `bytes` (`SO_RCVBUFFORCE` where permitted, past the system's
/// `rmem_max`; else `SO_RCVBUF`, capped by it) and returns what the kernel granted.
pub fn set_recv_buffer(socket: &UdpSocket, bytes: usize) -> io::Result<usize> {
    size_buffer(socket, Buffer::Receive, bytes)
}

/// Asks for a send buffer of `bytes` (`SO_SNDBUFFORCE` where permitted, past `wmem_max`; else
/// `SO_SNDBUF`) and returns what the kernel granted.
pub fn set_send_buffer(socket: &UdpSocket, bytes: usize) -> io::Result<usize> {
    size_buffer(socket, Buffer::Send, bytes)
}

/// A socket's kernel buffer.
#[derive(Clone, Copy)]
enum Buffer {
    Receive,
    Send,
}

/// The one setsockopt/getsockopt pair behind both buffer sizes: the forced option first (it
/// needs CAP_NET_ADMIN), then the capped one; Linux reports twice the request, counting its
/// bookkeeping.
fn size_buffer(socket: &UdpSocket, buffer: Buffer, bytes: usize) -> io::Result<usize> {
    use nix::sys::socket::{getsockopt, setsockopt, sockopt};
    // The kernel takes an int: larger requests ask for the most it can.
    let want = bytes.min(i32::MAX as usize);
    let granted = match buffer {
        Buffer::Receive => {
            if setsockopt(socket, sockopt::RcvBufForce, &want).is_err() {
                setsockopt(socket, sockopt::RcvBuf, &want)?;
            }
            getsockopt(socket, sockopt::RcvBuf)?
        }
        Buffer::Send => {
            if setsockopt(socket, sockopt::SndBufForce, &want).is_err() {
                setsockopt(socket, sockopt::SndBuf, &want)?;
            }
            getsockopt(socket, sockopt::SndBuf)?
        }
    };
    tracing::debug!(
        "socket {} buffer: asked {bytes} bytes, granted {granted} (Linux reports twice the usable size)",
        match buffer {
            Buffer::Receive => "receive",
            Buffer::Send => "send",
        }
    );
    Ok(granted)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A batch from IPv4 and IPv6 senders: each datagram scattered into its header and payload
    /// buffers, its length, truncation and sender reported (a truncated datagram's length is
    /// what fitted).
    #[test]
    fn a_batch_scatters_each_datagram_and_names_its_sender() {
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(socket) = UdpSocket::bind(bind) else {
                println!("skipped {bind}: no such loopback here");
                continue;
            };
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let sender = UdpSocket::bind(bind).unwrap();
            let to = socket.local_addr().unwrap();
            sender.send_to(b"head+payload", to).unwrap();
            sender.send_to(b"hea", to).unwrap();
            sender.send_to(b"head+payload, and more", to).unwrap();
            let mut headers = [[0u8; 4]; 3];
            let mut payloads = [[0u8; 8]; 3];
            let mut messages = [Message::empty(); 3];
            for ((m, h), p) in messages.iter_mut().zip(&mut headers).zip(&mut payloads) {
                (m.header, m.header_len) = (h.as_mut_ptr(), h.len());
                (m.payload, m.payload_len) = (p.as_mut_ptr(), p.len());
            }
            let mut datagrams = SocketDatagrams::new(&socket, 3);
            let mut got = 0;
            while got < 3 {
                // SAFETY: every message points at its own header and payload array, alive and
                // otherwise untouched for the call.
                got += unsafe { datagrams.recv_batch(&mut messages[got..]) }.unwrap();
            }
            let from = Some(sender.local_addr().unwrap());
            assert_eq!(
                messages.map(|m| (m.len, m.truncated, m.source)),
                [(12, false, from), (3, false, from), (12, true, from)],
                "{bind}"
            );
            assert_eq!(&headers[0], b"head");
            assert_eq!(&payloads[0], b"+payload");
            assert_eq!(&headers[1][..3], b"hea");
        }
    }
}
