//! One `sendmmsg` batch: headers, gather vectors and message headers allocated once and reused,
//! so sending a batch allocates nothing; payloads are gathered straight from the prepared
//! frames.
//!
//! The call itself is libc's: nix 0.32's `sendmmsg` says how many messages went out only
//! through an iterator that reads its address slots as initialised, and `sendmmsg` never
//! writes them. The destination is nix's socket address.

use std::io;
use std::mem;
use std::os::fd::RawFd;

use nix::sys::socket::{SockaddrLike as _, SockaddrStorage};

use crate::wire::HEADER_BYTES;

use super::cursor::Planned;
use super::{BATCH_PACKETS, monotonic_ns};

/// What the report needs of a sent packet.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry<'a> {
    pub(super) frame: u64,
    pub(super) frame_id: u32,
    pub(super) offset_ns: u64,
    pub(super) payload: &'a [u8],
}

/// Up to [`BATCH_PACKETS`] packets and the `sendmmsg` arguments describing them, all allocated
/// once: each message gathers its header from `headers` and its payload from the prepared
/// frame.
pub(super) struct Batch<'a> {
    pub(super) headers: Box<[[u8; HEADER_BYTES]]>,
    pub(super) iovecs: Box<[[libc::iovec; 2]]>,
    pub(super) messages: Box<[libc::mmsghdr]>,
    pub(super) entries: Vec<Entry<'a>>,
}

impl<'a> Batch<'a> {
    pub(super) fn new() -> Self {
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        Batch {
            headers: vec![[0; HEADER_BYTES]; BATCH_PACKETS].into_boxed_slice(),
            iovecs: vec![[empty; 2]; BATCH_PACKETS].into_boxed_slice(),
            messages: (0..BATCH_PACKETS)
                // SAFETY: mmsghdr is plain old data (pointers, lengths, flags); all zeroes is a
                // valid, empty message.
                .map(|_| unsafe { mem::zeroed::<libc::mmsghdr>() })
                .collect(),
            entries: Vec::with_capacity(BATCH_PACKETS),
        }
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
    }

    pub(super) fn is_full(&self) -> bool {
        self.entries.len() == BATCH_PACKETS
    }

    pub(super) fn push(&mut self, p: &Planned<'a>) {
        let i = self.entries.len();
        p.header.write_to(&mut self.headers[i]);
        self.entries.push(Entry {
            frame: p.frame,
            frame_id: p.header.frame_id,
            offset_ns: p.offset_ns,
            payload: p.payload,
        });
    }

    /// Sends every packet of the batch to `dest`, in order, in as few `sendmmsg` calls as the
    /// kernel allows. After each call, `sent(before_ns, after_ns, entries)` is told which
    /// packets it sent and when. Interrupted calls are retried.
    pub(super) fn send(
        &mut self,
        fd: RawFd,
        dest: &SockaddrStorage,
        mut sent: impl FnMut(u64, u64, &[Entry<'a>]),
    ) -> io::Result<()> {
        let n = self.entries.len();
        // Every pointer below is taken from these base pointers, after the last write through
        // a reference, so none is invalidated before the kernel reads it.
        let headers = self.headers.as_mut_ptr();
        let iovecs = self.iovecs.as_mut_ptr();
        let messages = self.messages.as_mut_ptr();
        for (i, entry) in self.entries.iter().enumerate() {
            // SAFETY: i < n <= BATCH_PACKETS, the length of all three arrays, so every `add`
            // stays in bounds. The iovecs point at this batch's header and at the payload,
            // which `'a` keeps alive for the call; the kernel only reads through them
            // (`cast_mut` is for the C type only). `msg_name` points at `dest`, alive for the
            // call and only read.
            unsafe {
                let iov = &mut *iovecs.add(i);
                iov[0] = libc::iovec {
                    iov_base: headers.add(i).cast(),
                    iov_len: HEADER_BYTES,
                };
                iov[1] = libc::iovec {
                    iov_base: entry.payload.as_ptr().cast_mut().cast(),
                    iov_len: entry.payload.len(),
                };
                let m = &mut *messages.add(i);
                m.msg_hdr.msg_name = dest.as_ptr().cast_mut().cast();
                m.msg_hdr.msg_namelen = dest.len();
                m.msg_hdr.msg_iov = iov.as_mut_ptr();
                m.msg_hdr.msg_iovlen = 2;
                m.msg_len = 0;
            }
        }
        let mut done = 0;
        while done < n {
            let before = monotonic_ns();
            // SAFETY: messages[done..n] are initialised above and point only at memory alive
            // for this call; `n - done <= BATCH_PACKETS` fits a c_uint.
            let r =
                unsafe { libc::sendmmsg(fd, messages.add(done), (n - done) as libc::c_uint, 0) };
            let after = monotonic_ns();
            if r < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::Interrupted => continue,
                    // Not expected on a blocking UDP socket; wait a little rather than fail.
                    io::ErrorKind::WouldBlock => {
                        std::thread::yield_now();
                        continue;
                    }
                    _ => return Err(err),
                }
            }
            let count = (r as usize).min(n - done);
            sent(before, after, &self.entries[done..done + count]);
            done += count;
        }
        Ok(())
    }
}
