//! Datagrams in batches: the [`Datagrams`] seam the receiver reads through, and its socket
//! implementation on `recvmmsg`, which scatters each datagram's header and payload into
//! separate buffers and reports its sender.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

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

/// [`Datagrams`] from a UDP socket through `recvmmsg`; its buffers are sized once, for
/// `batch` messages.
pub struct SocketDatagrams<'s> {
    socket: &'s UdpSocket,
    iovecs: Vec<[libc::iovec; 2]>,
    headers: Vec<libc::mmsghdr>,
    names: Vec<libc::sockaddr_storage>,
}

impl<'s> SocketDatagrams<'s> {
    /// Batches of up to `batch` messages from `socket` (which has a read timeout).
    pub fn new(socket: &'s UdpSocket, batch: usize) -> Self {
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        Self {
            socket,
            iovecs: vec![[empty, empty]; batch],
            // SAFETY: mmsghdr is plain data (integers and null pointers); all-zero is valid.
            headers: vec![unsafe { MaybeUninit::zeroed().assume_init() }; batch],
            // SAFETY: sockaddr_storage is plain data; all-zero is valid (family AF_UNSPEC).
            names: vec![unsafe { MaybeUninit::zeroed().assume_init() }; batch],
        }
    }
}

impl Datagrams for SocketDatagrams<'_> {
    unsafe fn recv_batch(&mut self, messages: &mut [Message]) -> io::Result<usize> {
        let n = messages.len().min(self.headers.len());
        for (i, m) in messages[..n].iter().enumerate() {
            self.iovecs[i] = [
                libc::iovec {
                    iov_base: m.header.cast(),
                    iov_len: m.header_len,
                },
                libc::iovec {
                    iov_base: m.payload.cast(),
                    iov_len: m.payload_len,
                },
            ];
            let h = &mut self.headers[i];
            h.msg_hdr.msg_iov = self.iovecs[i].as_mut_ptr();
            h.msg_hdr.msg_iovlen = 2;
            h.msg_hdr.msg_name = std::ptr::from_mut(&mut self.names[i]).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every header points at two iovecs over buffers the caller vouches for, and
        // at a sockaddr_storage of the stated size; all live for the call.
        let got = unsafe {
            libc::recvmmsg(
                self.socket.as_raw_fd(),
                self.headers.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = got as usize;
        for (i, m) in messages[..got].iter_mut().enumerate() {
            let h = &self.headers[i];
            m.len = h.msg_len as usize;
            m.truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            m.source = socket_addr(&self.names[i], h.msg_hdr.msg_namelen);
        }
        Ok(got)
    }
}

/// The address the kernel wrote into `storage`.
fn socket_addr(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and it is large enough.
            let a = unsafe { &*std::ptr::from_ref(storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6, and it is large enough.
            let a = unsafe { &*std::ptr::from_ref(storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
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
