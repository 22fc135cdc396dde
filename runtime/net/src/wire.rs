//! The packet format: one UDP datagram per slice of a frame's source tensor along its packet
//! axis (for the radar, one chirp; docs/workload.md, "The wire format").
//!
//! A packet is a 64-byte little-endian header — `u32 frame_id`, `u32 packet_id` (the slice's
//! index), `u32 channel_id` (always 0), `u32 n_elements` (elements in the payload), then 48 zero
//! bytes — followed by the payload, `n_elements` elements of the source tensor's type in the
//! host's byte order (for the radar `(i16 I, i16 Q)`). The payload is exactly one row of the
//! source tensor, so a receiver copies it into place unchanged.
//!
//! Guarantees:
//! - [`PacketHeader::read_from`] and [`classify`] accept any bytes and any length and never
//!   panic: whatever arrives from the network is either a well-formed packet of the configured
//!   [`WireShape`] or one [`Malformed`] class, never both.
//! - [`classify`] checks in a fixed order (size, element count, packet range, channel), so every
//!   bad packet is counted under exactly one name, the same on every receiver.
//! - Nothing that writes, reads or classifies a packet allocates.

/// Bytes in a packet header.
pub const HEADER_BYTES: usize = 64;

/// The largest UDP payload over IPv4 (65535 less the IP and UDP headers): a packet of the
/// configured shape must fit.
pub const MAX_DATAGRAM_BYTES: usize = 65_507;

/// The meaningful fields of a packet header; the 48 bytes after them are zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketHeader {
    /// The frame this packet belongs to; consecutive frames have consecutive ids,
    /// wrapping at `u32::MAX`.
    pub frame_id: u32,
    /// The packet's index within its frame, `0..packets`: the source tensor's row.
    pub packet_id: u32,
    /// The receive channel; always 0 (one channel).
    pub channel_id: u32,
    /// Elements in the payload.
    pub n_elements: u32,
}

impl PacketHeader {
    /// Writes the header: the four fields little endian, then 48 zero bytes.
    pub fn write_to(&self, out: &mut [u8; HEADER_BYTES]) {
        let fields = [
            self.frame_id,
            self.packet_id,
            self.channel_id,
            self.n_elements,
        ];
        for (chunk, field) in out.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&field.to_le_bytes());
        }
        out[16..].fill(0);
    }

    /// Reads a header from the start of `bytes`: `None` if there are fewer than
    /// [`HEADER_BYTES`]. The 48 reserved bytes are not checked. Never panics.
    pub fn read_from(bytes: &[u8]) -> Option<PacketHeader> {
        let header = bytes.get(..HEADER_BYTES)?;
        let field = |i: usize| {
            let mut word = [0u8; 4];
            word.copy_from_slice(&header[4 * i..4 * i + 4]);
            u32::from_le_bytes(word)
        };
        Some(PacketHeader {
            frame_id: field(0),
            packet_id: field(1),
            channel_id: field(2),
            n_elements: field(3),
        })
    }
}

/// Why a graph's source tensor does not go on the wire.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Its elements are not numbers (a record list, say).
    #[error(
        "source {tensor} is {dtype}; packets carry numeric elements (ci8, ci16, cf32, f32, ...)"
    )]
    NotNumeric {
        /// The tensor.
        tensor: String,
        /// Its element type.
        dtype: &'static str,
    },
    /// A count past what the packet header carries.
    #[error("{what} of source {tensor} ({value}) do not fit the packet header")]
    Header {
        /// What is counted (`elements per packet`, `packets per frame`).
        what: &'static str,
        /// The tensor.
        tensor: String,
        /// The count.
        value: u64,
    },
    /// The source of the graph at `path`.
    #[error("graph {}: {why}", .path.display())]
    Graph {
        /// The graph file.
        path: std::path::PathBuf,
        /// Why its source does not go on the wire.
        why: Box<WireError>,
    },
}

/// A frame as the wire sees it: elements per packet (one packet's payload), packets per frame,
/// and bytes per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireShape {
    /// Elements per packet: one row of the source tensor (for the radar, a chirp's N samples).
    pub elements: u32,
    /// Packets per frame: the source tensor's outermost extent (for the radar, M chirps).
    pub packets: u32,
    /// Bytes of one element: 4 for `ci16` and `f32`, 8 for `cf32`.
    pub element_bytes: u32,
}

impl WireShape {
    /// A wire of `elements` complex int16 elements per packet, `packets` packets per frame
    /// (the radar's: a chirp's samples per packet, a CPI's chirps per frame).
    pub const fn ci16(elements: u32, packets: u32) -> WireShape {
        WireShape {
            elements,
            packets,
            element_bytes: 4,
        }
    }

    /// The wire of `graph`'s source: see [`WireShape::for_tensor`]; errors name the graph.
    pub fn for_source(graph: &kplace_core::model::graph::Graph) -> Result<WireShape, WireError> {
        WireShape::for_tensor(graph.tensor(graph.source.tensor)).map_err(|e| WireError::Graph {
            path: graph.path.clone(),
            why: Box::new(e),
        })
    }

    /// The wire of a source `tensor`: one packet per index of its first axis, each the rest of
    /// the tensor's elements (any numeric dtype). Errors name the tensor.
    pub fn for_tensor(
        tensor: &kplace_core::model::graph::TensorSpec,
    ) -> Result<WireShape, WireError> {
        let element_bytes = match tensor.dtype.element() {
            Some(element) => element.bytes() as u32,
            None => {
                return Err(WireError::NotNumeric {
                    tensor: tensor.name.clone(),
                    dtype: tensor.dtype.name().unwrap_or("?"),
                });
            }
        };
        let elements: u64 = tensor.shape[1..].iter().product();
        let fit = |value: u64, what: &'static str| {
            u32::try_from(value).map_err(|_| WireError::Header {
                what,
                tensor: tensor.name.clone(),
                value,
            })
        };
        Ok(WireShape {
            elements: fit(elements, "elements per packet")?,
            packets: fit(tensor.shape[0], "packets per frame")?,
            element_bytes,
        })
    }

    /// Payload bytes of one packet: `elements * element_bytes`.
    pub fn payload_bytes(&self) -> usize {
        self.elements as usize * self.element_bytes as usize
    }

    /// Bytes of one whole packet: header plus payload (4160 for 1024 ci16 elements).
    pub fn packet_bytes(&self) -> usize {
        HEADER_BYTES + self.payload_bytes()
    }

    /// Bytes of one frame's payloads, all packets: `elements * packets * element_bytes`.
    pub fn frame_bytes(&self) -> usize {
        self.payload_bytes() * self.packets as usize
    }
}

/// Why a received datagram is not a packet of the configured shape. Every class is counted and
/// the packet dropped; none corrupts a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Malformed {
    /// The datagram is not exactly one header plus `elements` elements (or had no whole header,
    /// or was longer than the receive buffer).
    WrongSize,
    /// The size is right but the header's `n_elements` is not the configured `elements`.
    WrongElements,
    /// `packet_id` is not below the configured `packets`.
    PacketOutOfRange,
    /// `channel_id` is not 0.
    WrongChannel,
}

impl Malformed {
    /// Every class, in the order [`classify`] checks them.
    pub const ALL: [Malformed; 4] = [
        Malformed::WrongSize,
        Malformed::WrongElements,
        Malformed::PacketOutOfRange,
        Malformed::WrongChannel,
    ];

    /// The class's place in [`Malformed::ALL`]: its counter's index.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The class's name in counters and on the command line: `wrong_size`, `wrong_elements`,
    /// `packet_out_of_range`, `wrong_channel`.
    pub fn name(self) -> &'static str {
        match self {
            Malformed::WrongSize => "wrong_size",
            Malformed::WrongElements => "wrong_elements",
            Malformed::PacketOutOfRange => "packet_out_of_range",
            Malformed::WrongChannel => "wrong_channel",
        }
    }

    /// The class named `name` (as [`Malformed::name`] spells it, or by its name of report
    /// version 1: `wrong_samples`, `chirp_out_of_range`), if any.
    pub fn from_name(name: &str) -> Option<Malformed> {
        match name {
            "wrong_samples" => Some(Malformed::WrongElements),
            "chirp_out_of_range" => Some(Malformed::PacketOutOfRange),
            _ => Malformed::ALL.into_iter().find(|m| m.name() == name),
        }
    }

    /// Makes a well-formed packet of `shape` (`elements >= 1`) malformed in exactly this way, so
    /// that [`classify`] reports this class and no other: returns the header to send and how many
    /// bytes of the packet's payload to send after it.
    ///
    /// - `WrongSize`: the payload one element short, header unchanged;
    /// - `WrongElements`: `n_elements` one more than the shape's;
    /// - `PacketOutOfRange`: `packet_id` moved to `packets + packet_id` (saturating);
    /// - `WrongChannel`: `channel_id` 1.
    pub fn corrupt(self, header: PacketHeader, shape: WireShape) -> (PacketHeader, usize) {
        let mut header = header;
        let mut payload = shape.payload_bytes();
        match self {
            Malformed::WrongSize => {
                payload = payload.saturating_sub(shape.element_bytes.max(1) as usize)
            }
            Malformed::WrongElements => header.n_elements = shape.elements.wrapping_add(1),
            Malformed::PacketOutOfRange => {
                header.packet_id = shape.packets.saturating_add(header.packet_id)
            }
            Malformed::WrongChannel => header.channel_id = 1,
        }
        (header, payload)
    }
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Malformed {
    type Err = UnknownMalformed;

    /// The class `text` names, as [`Malformed::from_name`] reads it (the command line's KIND).
    fn from_str(text: &str) -> Result<Malformed, UnknownMalformed> {
        Malformed::from_name(text).ok_or_else(|| UnknownMalformed(text.to_string()))
    }
}

/// A name no [`Malformed`] class has; the message lists those that exist.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown kind {0:?}: expected one of {names}",
    names = Malformed::ALL.map(Malformed::name).join(", ")
)]
pub struct UnknownMalformed(pub String);

/// Classifies a received datagram of `len` bytes whose header is `header` (as
/// [`PacketHeader::read_from`] read it; `None` when the datagram was shorter than a header).
/// `truncated` says the datagram was longer than the receive buffer, so `len` is not its size.
///
/// Checks, in this order: the size (`len != shape.packet_bytes()`, `truncated` or no header:
/// [`Malformed::WrongSize`]), `n_elements != shape.elements`, `packet_id >= shape.packets`,
/// `channel_id != 0`. The first that fails names the class; a packet passing all four is
/// returned as its header. Never panics.
pub fn classify(
    header: Option<PacketHeader>,
    len: usize,
    truncated: bool,
    shape: WireShape,
) -> Result<PacketHeader, Malformed> {
    let header = match header {
        Some(h) if !truncated && len == shape.packet_bytes() => h,
        _ => return Err(Malformed::WrongSize),
    };
    if header.n_elements != shape.elements {
        Err(Malformed::WrongElements)
    } else if header.packet_id >= shape.packets {
        Err(Malformed::PacketOutOfRange)
    } else if header.channel_id != 0 {
        Err(Malformed::WrongChannel)
    } else {
        Ok(header)
    }
}

/// Writes a whole packet, `header` then `payload`, into `out`.
///
/// # Panics
/// If `out.len() != HEADER_BYTES + payload.len()`: the caller sizes its buffer from the
/// shape, so a mismatch is a bug, not a network condition.
pub fn encode(header: &PacketHeader, payload: &[u8], out: &mut [u8]) {
    assert_eq!(
        out.len(),
        HEADER_BYTES + payload.len(),
        "packet buffer must hold a header and the payload exactly"
    );
    let (head, body) = out.split_at_mut(HEADER_BYTES);
    let head: &mut [u8; HEADER_BYTES] = head
        .try_into()
        .expect("split_at_mut(HEADER_BYTES) yields HEADER_BYTES bytes");
    header.write_to(head);
    body.copy_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SHAPE: WireShape = WireShape::ci16(1024, 128);

    fn good(packet_id: u32) -> PacketHeader {
        PacketHeader {
            frame_id: 7,
            packet_id,
            channel_id: 0,
            n_elements: SHAPE.elements,
        }
    }

    fn packet(header: &PacketHeader, payload_len: usize) -> Vec<u8> {
        let payload: Vec<u8> = (0..payload_len).map(|i| (i * 31 % 251) as u8).collect();
        let mut out = vec![0xAA; HEADER_BYTES + payload_len];
        encode(header, &payload, &mut out);
        out
    }

    fn classify_bytes(bytes: &[u8], shape: WireShape) -> Result<PacketHeader, Malformed> {
        classify(PacketHeader::read_from(bytes), bytes.len(), false, shape)
    }

    #[test]
    fn each_malformed_class_indexes_its_place_in_all() {
        for (i, class) in Malformed::ALL.iter().enumerate() {
            assert_eq!(class.index(), i, "{}", class.name());
        }
    }

    #[test]
    fn sizes_match_the_workload() {
        for (samples, bytes) in [(1024, 4160), (2048, 8256), (4096, 16448)] {
            let shape = WireShape::ci16(samples, 1);
            assert_eq!(shape.payload_bytes(), samples as usize * 4);
            assert_eq!(shape.packet_bytes(), bytes);
        }
        assert_eq!(SHAPE.frame_bytes(), 1024 * 128 * 4);
    }

    #[test]
    fn header_layout_is_little_endian_then_zeros() {
        let h = PacketHeader {
            frame_id: 0x0403_0201,
            packet_id: 0x0807_0605,
            channel_id: 0x0C0B_0A09,
            n_elements: 0x100F_0E0D,
        };
        let mut out = [0xFF; HEADER_BYTES];
        h.write_to(&mut out);
        let want: Vec<u8> = (1..=16).collect();
        assert_eq!(&out[..16], &want[..]);
        assert!(out[16..].iter().all(|&b| b == 0));
        assert_eq!(PacketHeader::read_from(&out), Some(h));
    }

    #[test]
    fn read_from_needs_a_whole_header() {
        let bytes = [0u8; HEADER_BYTES];
        assert_eq!(PacketHeader::read_from(&bytes[..HEADER_BYTES - 1]), None);
        assert_eq!(PacketHeader::read_from(&[]), None);
        assert!(PacketHeader::read_from(&bytes).is_some());
    }

    #[test]
    fn encode_places_payload_after_header() {
        let p = packet(&good(3), SHAPE.payload_bytes());
        assert_eq!(p.len(), 4160);
        assert_eq!(classify_bytes(&p, SHAPE), Ok(good(3)));
        assert_eq!(p[HEADER_BYTES], 0);
        assert_eq!(p[HEADER_BYTES + 1], 31);
    }

    #[test]
    #[should_panic(expected = "packet buffer")]
    fn encode_refuses_a_wrong_buffer() {
        encode(&good(0), &[0; 8], &mut [0; HEADER_BYTES + 4]);
    }

    #[test]
    fn each_class_in_check_order() {
        let payload = SHAPE.payload_bytes();
        let last = good(SHAPE.packets - 1);
        assert_eq!(classify_bytes(&packet(&last, payload), SHAPE), Ok(last));

        // Size first: a short, a long, a truncated and a headerless datagram.
        for len in [payload - 4, payload + 4, 0] {
            let p = packet(&good(0), len);
            assert_eq!(classify_bytes(&p, SHAPE), Err(Malformed::WrongSize));
        }
        let p = packet(&good(0), payload);
        let read = PacketHeader::read_from(&p);
        assert_eq!(
            classify(read, p.len(), true, SHAPE),
            Err(Malformed::WrongSize)
        );
        assert_eq!(
            classify(None, SHAPE.packet_bytes(), false, SHAPE),
            Err(Malformed::WrongSize)
        );

        // Size wins over everything else being wrong too.
        let all_bad = PacketHeader {
            frame_id: 0,
            packet_id: SHAPE.packets,
            channel_id: 3,
            n_elements: SHAPE.elements + 1,
        };
        assert_eq!(
            classify_bytes(&packet(&all_bad, payload + 4), SHAPE),
            Err(Malformed::WrongSize)
        );
        assert_eq!(
            classify_bytes(&packet(&all_bad, payload), SHAPE),
            Err(Malformed::WrongElements)
        );
        let h = PacketHeader {
            n_elements: SHAPE.elements,
            ..all_bad
        };
        assert_eq!(
            classify_bytes(&packet(&h, payload), SHAPE),
            Err(Malformed::PacketOutOfRange)
        );
        let h = PacketHeader { packet_id: 0, ..h };
        assert_eq!(
            classify_bytes(&packet(&h, payload), SHAPE),
            Err(Malformed::WrongChannel)
        );
    }

    #[test]
    fn names_are_distinct_and_in_check_order() {
        let names: Vec<&str> = Malformed::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(
            names,
            [
                "wrong_size",
                "wrong_elements",
                "packet_out_of_range",
                "wrong_channel"
            ]
        );
        let mut sorted = Malformed::ALL;
        sorted.sort();
        assert_eq!(sorted, Malformed::ALL);
        assert_eq!(Malformed::WrongChannel.to_string(), "wrong_channel");
        for m in Malformed::ALL {
            assert_eq!(Malformed::from_name(m.name()), Some(m));
        }
        assert_eq!(Malformed::from_name("wrong"), None);
        for m in Malformed::ALL {
            assert_eq!(m.name().parse(), Ok(m));
        }
        assert_eq!("wrong_samples".parse(), Ok(Malformed::WrongElements));
        assert_eq!(
            "bogus".parse::<Malformed>().unwrap_err().to_string(),
            "unknown kind \"bogus\": expected one of wrong_size, wrong_elements, packet_out_of_range, wrong_channel"
        );
        // The names of report version 1 still select their class.
        assert_eq!(
            Malformed::from_name("wrong_samples"),
            Some(Malformed::WrongElements)
        );
        assert_eq!(
            Malformed::from_name("chirp_out_of_range"),
            Some(Malformed::PacketOutOfRange)
        );
    }

    /// A packet of `shape` made malformed in exactly the way `kind` names.
    fn crafted(kind: Malformed, shape: WireShape, row: u32, frame_id: u32) -> Vec<u8> {
        let good = PacketHeader {
            frame_id,
            packet_id: row,
            channel_id: 0,
            n_elements: shape.elements,
        };
        let (h, payload) = kind.corrupt(good, shape);
        packet(&h, payload)
    }

    fn shapes() -> impl Strategy<Value = WireShape> {
        (1u32..64, 1u32..300).prop_map(|(elements, packets)| WireShape::ci16(elements, packets))
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..400),
            cut in any::<prop::sample::Index>(),
            truncated in any::<bool>(),
            shape in shapes(),
        ) {
            for data in [&bytes[..], &bytes[..cut.index(bytes.len() + 1)]] {
                let header = PacketHeader::read_from(data);
                prop_assert_eq!(header.is_some(), data.len() >= HEADER_BYTES);
                let verdict = classify(header, data.len(), truncated, shape);
                if let Ok(h) = verdict {
                    prop_assert!(!truncated);
                    prop_assert_eq!(data.len(), shape.packet_bytes());
                    prop_assert_eq!(h.n_elements, shape.elements);
                    prop_assert!(h.packet_id < shape.packets);
                    prop_assert_eq!(h.channel_id, 0);
                }
            }
        }

        #[test]
        fn header_round_trips(
            frame_id in any::<u32>(),
            packet_id in any::<u32>(),
            channel_id in any::<u32>(),
            n_elements in any::<u32>(),
            extra in proptest::collection::vec(any::<u8>(), 0..16),
        ) {
            let h = PacketHeader { frame_id, packet_id, channel_id, n_elements };
            let mut bytes = vec![0u8; HEADER_BYTES + extra.len()];
            encode(&h, &extra, &mut bytes);
            prop_assert_eq!(PacketHeader::read_from(&bytes), Some(h));
        }

        #[test]
        fn crafted_packets_are_reported_under_their_own_name(
            shape in shapes(),
            row in any::<prop::sample::Index>(),
            frame_id in any::<u32>(),
        ) {
            let row = row.index(shape.packets as usize) as u32;
            let good = PacketHeader {
                frame_id,
                packet_id: row,
                channel_id: 0,
                n_elements: shape.elements,
            };
            let p = packet(&good, shape.payload_bytes());
            prop_assert_eq!(classify_bytes(&p, shape), Ok(good));
            for kind in Malformed::ALL {
                let p = crafted(kind, shape, row, frame_id);
                prop_assert_eq!(classify_bytes(&p, shape), Err(kind));
            }
        }
    }
}
