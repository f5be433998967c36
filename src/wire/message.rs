//! The [`Message`] trait: what every message of the wire format can do (merge from bytes,
//! compute its size, encode), and the helpers generated message code calls.

use super::writer::{Spill, as_uninit};
use super::{DecodeConfig, Reader, Sink, SizeCursor, SliceWriter};
use crate::bytes::UnknownFields;
use crate::error::{DecodeError, Result};

/// What every ONNX message can do: merge from wire bytes, compute its size, encode.
pub trait Message: Default + Clone + Send + Sync + 'static {
    /// Full schema name, e.g. `TensorProto.Segment`.
    const NAME: &'static str;

    /// Decodes fields from `r` (up to the end of the current message) and merges them into
    /// `self`: scalars are overwritten, repeated fields appended, messages merged.
    fn merge_from(&mut self, r: &mut Reader<'_>) -> std::result::Result<(), Box<DecodeError>>;

    /// Size of the encoded message body; records the size of every embedded message into
    /// `sizes`, in pre-order, for [`Message::encode_to`].
    fn compute_size(&self, sizes: &mut SizeTable) -> u64;

    /// Writes the encoded message body; `c` reads back the sizes of `compute_size`.
    fn encode_to<S: Sink + ?Sized>(&self, s: &mut S, c: &mut SizeCursor<'_>);

    /// Fields not in the schema, as read.
    fn unknown_fields(&self) -> &UnknownFields;

    /// Fields not in the schema, for editing.
    fn unknown_fields_mut(&mut self) -> &mut UnknownFields;

    /// Asks the CPU to fetch the storage of this message's sub-messages, without reading it
    /// (a hint for walks over a whole model: see `RepeatedField::iter_prefetching`).
    #[doc(hidden)]
    #[inline(always)]
    fn prefetch_children(&self) {}

    /// An emptied boxed message of this type that the parse of `r` may reuse (see
    /// `Reader::recycle_from`): the generated messages take one from the parse's recycler.
    /// Internal to the C++ classes' parse, not API.
    #[doc(hidden)]
    #[inline]
    fn take_recycled(r: &Reader<'_>) -> Option<super::MsgBox<Self>> {
        let _ = r;
        None
    }

    /// A copy in which every tensor with at least `min_len` (and at least 1) `raw_data` bytes
    /// has none (`SerializeOptions::skip_raw_data`); `None` for messages that hold no tensor.
    fn without_payloads(&self, min_len: u64) -> Option<Self> {
        let _ = min_len;
        None
    }

    /// Parses `bytes` (payloads copied, default limits), like protobuf's `ParseFromString`.
    fn parse_from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut m = Self::default();
        m.merge_from_bytes(bytes, &DecodeConfig::default())?;
        Ok(m)
    }

    /// Parses `bytes` and merges them into `self` with the settings of `config`.
    ///
    /// `config` must not borrow payloads without an owner (see [`Reader::new_unowned`]).
    fn merge_from_bytes(&mut self, bytes: &[u8], config: &DecodeConfig) -> Result<()> {
        merge_from_bytes_dyn(self, bytes, config)
    }

    /// Size of the encoded message in bytes.
    fn encoded_len(&self) -> u64 {
        encoded_len_dyn(self)
    }

    /// Encodes into a new buffer, like protobuf's `SerializeToString`.
    fn serialize_to_vec(&self) -> Vec<u8> {
        serialize_to_vec_dyn(self)
    }

    /// Encodes into `sink`; returns the number of bytes written.
    fn serialize_to_sink<S: Sink + ?Sized>(&self, sink: &mut S) -> u64 {
        let mut sizes = SizeTable::new();
        let len = self.compute_size(&mut sizes);
        self.encode_to(sink, &mut sizes.cursor());
        len
    }
}

/// [`Message::merge_from_bytes`] (one body for every message type).
fn merge_from_bytes_dyn(m: &mut dyn DynMessage, bytes: &[u8], config: &DecodeConfig) -> Result<()> {
    let mut r = Reader::new(bytes, config);
    m.decode_from(&mut r)
}

/// [`Message::encoded_len`] (one body for every message type).
fn encoded_len_dyn(m: &dyn DynMessage) -> u64 {
    m.size_into(&mut SizeTable::new())
}

/// [`Message::serialize_to_vec`] (one body for every message type).
fn serialize_to_vec_dyn(m: &dyn DynMessage) -> Vec<u8> {
    let mut sizes = SizeTable::new();
    let len = m.size_into(&mut sizes);
    let mut out = Vec::with_capacity(len as usize);
    encode_into_spare(m, &sizes, &mut out, len as usize);
    out
}

/// A [`Message`] without its type: the parsers and serializers (`codec`, the C ABI) work on
/// `&dyn DynMessage`, so each of them is compiled once instead of once per message type; only
/// the generated `merge_from` / `compute_size` / `encode_to` are per type.
pub(crate) trait DynMessage {
    /// Whether this is a `ModelProto` (whose parse may pre-parse initializers in parallel).
    fn is_model(&self) -> bool;
    /// [`decode_top`]: decodes a top-level message from `r`, naming the message in errors.
    fn decode_from(&mut self, r: &mut Reader<'_>) -> Result<()>;
    /// Runs `f` on a new, empty message of this type and, when it succeeds, puts that message in
    /// place of `self` (which is unchanged on failure).
    fn replace_with(&mut self, f: &mut dyn FnMut(&mut dyn DynMessage) -> Result<()>) -> Result<()>;
    /// The message's schema name ([`Message::NAME`]).
    fn message_name(&self) -> &'static str;
    /// [`Message::compute_size`].
    fn size_into(&self, sizes: &mut SizeTable) -> u64;
    /// [`Message::encode_to`] through the one sink type every serializer uses.
    fn encode_into(&self, w: &mut SliceWriter<'_>, c: &mut SizeCursor<'_>);
    /// [`Message::without_payloads`], boxed.
    fn without_payloads_dyn(&self, min_len: u64) -> Option<Box<dyn DynMessage>>;
}

impl<M: Message> DynMessage for M {
    fn is_model(&self) -> bool {
        M::NAME == "ModelProto"
    }
    fn decode_from(&mut self, r: &mut Reader<'_>) -> Result<()> {
        decode_top(self, r)
    }
    fn replace_with(&mut self, f: &mut dyn FnMut(&mut dyn DynMessage) -> Result<()>) -> Result<()> {
        let mut fresh = M::default();
        f(&mut fresh)?;
        *self = fresh;
        Ok(())
    }
    fn message_name(&self) -> &'static str {
        M::NAME
    }
    fn size_into(&self, sizes: &mut SizeTable) -> u64 {
        self.compute_size(sizes)
    }
    fn encode_into(&self, w: &mut SliceWriter<'_>, c: &mut SizeCursor<'_>) {
        self.encode_to(w, c);
    }
    fn without_payloads_dyn(&self, min_len: u64) -> Option<Box<dyn DynMessage>> {
        self.without_payloads(min_len)
            .map(|m| Box::new(m) as Box<dyn DynMessage>)
    }
}

/// Appends `m`, whose sizes `m.compute_size` recorded in `sizes` (total `len`), to `out`, which
/// has room for `len` more bytes: written through a [`SliceWriter`] into the spare capacity.
pub(crate) fn encode_into_spare(
    m: &dyn DynMessage,
    sizes: &SizeTable,
    out: &mut Vec<u8>,
    len: usize,
) {
    let at = out.len();
    let mut w = SliceWriter::new_uninit(&mut out.spare_capacity_mut()[..len]);
    m.encode_into(&mut w, &mut sizes.cursor());
    let written = w.written();
    assert_eq!(written, len, "encoded size differs from the computed size");
    // SAFETY: the writer initialized the first `written` bytes of the spare capacity.
    unsafe { out.set_len(at + written) };
}

/// Size of the buffer of [`encode_streaming`].
const STREAM_BUFFER_BYTES: u64 = 1 << 20;

/// Writes `m`, whose sizes `m.compute_size` recorded in `sizes` (total `len`), to `spill` through
/// a streaming [`SliceWriter`] (a buffer of at most 1 MiB, zeroed when dropped: it may hold a
/// model being encrypted); returns the number of bytes written. Every serializer that does not
/// write into one buffer of the planned size goes through here, so that `encode_to` is
/// instantiated for one sink type only.
pub(crate) fn encode_streaming(
    m: &dyn DynMessage,
    sizes: &SizeTable,
    len: u64,
    spill: &mut dyn Spill,
) -> u64 {
    let mut buf = zeroize::Zeroizing::new(vec![0u8; len.min(STREAM_BUFFER_BYTES) as usize]);
    let mut w = SliceWriter::streaming(as_uninit(&mut buf), spill);
    m.encode_into(&mut w, &mut sizes.cursor());
    w.finish()
}

/// The sizes [`Message::compute_size`] records (every embedded message's, and every packed
/// varint field's, in pre-order) for [`Message::encode_to`], and the nesting depth of the walk:
/// with a depth limit, messages nested deeper are not walked (their size counts as 0) and
/// [`SizeTable::too_deep`] tells the caller to refuse the message.
pub struct SizeTable {
    sizes: Vec<u64>,
    depth: u32,
    max_depth: u32,
    too_deep: bool,
    /// The padding (total field size, 0 = none) before each `raw_data` payload in encoding
    /// order, for an aligned save; empty otherwise (see [`super::align_payloads`]).
    #[cfg(feature = "inline-alignment")]
    pub(super) pads: Vec<u64>,
    /// Paddings read so far by [`SizeTable::payload_pad`].
    #[cfg(feature = "inline-alignment")]
    pads_read: usize,
}

impl Default for SizeTable {
    fn default() -> Self {
        Self::new()
    }
}

impl SizeTable {
    /// A table without depth limit (the infallible serializers: every level is walked, on
    /// stack segments taken as needed).
    pub fn new() -> Self {
        Self::with_max_depth(u32::MAX)
    }

    /// A table refusing messages nested more than `max_depth` levels below the top one (what
    /// a parse with `max_recursion_depth = max_depth` refuses).
    pub fn with_max_depth(max_depth: u32) -> Self {
        Self {
            sizes: Vec::new(),
            depth: 0,
            max_depth,
            too_deep: false,
            #[cfg(feature = "inline-alignment")]
            pads: Vec::new(),
            #[cfg(feature = "inline-alignment")]
            pads_read: 0,
        }
    }

    /// Recomputes the sizes of `m` (with the current paddings); returns its size.
    #[cfg(feature = "inline-alignment")]
    pub(super) fn recompute(&mut self, m: &dyn DynMessage) -> u64 {
        self.sizes.clear();
        self.depth = 0;
        self.too_deep = false;
        self.pads_read = 0;
        m.size_into(self)
    }

    /// The size of the padding before the next `raw_data` payload (0 without alignment).
    #[cfg(feature = "inline-alignment")]
    #[doc(hidden)]
    #[inline]
    pub fn payload_pad(&mut self) -> u64 {
        let p = self.pads.get(self.pads_read).copied().unwrap_or(0);
        self.pads_read += 1;
        p
    }

    /// A cursor reading back the sizes (and paddings) in order, for [`Message::encode_to`].
    pub fn cursor(&self) -> SizeCursor<'_> {
        #[cfg(feature = "inline-alignment")]
        return SizeCursor::with_pads(&self.sizes, &self.pads);
        #[cfg(not(feature = "inline-alignment"))]
        SizeCursor::new(&self.sizes)
    }

    /// Records the size of a packed field.
    #[inline]
    pub fn push(&mut self, size: u64) {
        self.sizes.push(size);
    }

    /// Computes, records and returns the size of embedded message `m` (one level deeper).
    #[inline(always)]
    pub fn nested<M: Message>(&mut self, m: &M) -> u64 {
        let i = self.sizes.len();
        self.sizes.push(0);
        if self.depth >= self.max_depth {
            self.too_deep = true;
            return 0;
        }
        self.depth += 1;
        let s = m.compute_size(self);
        self.depth -= 1;
        self.sizes[i] = s;
        s
    }

    /// [`SizeTable::nested`] for a field that closes a cycle of the schema (see
    /// [`super::stack`]).
    #[inline]
    pub fn nested_deep<M: Message>(&mut self, m: &M) -> u64 {
        super::guard_stack(|| self.nested(m))
    }

    /// True when a message was nested deeper than the table's limit (the sizes are then wrong).
    pub fn too_deep(&self) -> bool {
        self.too_deep
    }

    /// The depth limit.
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }

    /// The recorded sizes, for [`SizeCursor::new`].
    pub fn as_slice(&self) -> &[u64] {
        &self.sizes
    }
}

/// A generic operation over a message type chosen at run time (see [`crate::proto::visit_message_type`]).
pub trait MessageVisitor {
    /// What the operation returns.
    type Output;
    /// Runs the operation for message type `M`.
    fn visit<M: Message>(self) -> Self::Output;
}

/// Decodes a top-level message from `r`, naming the message in errors.
pub(crate) fn decode_top<M: Message>(m: &mut M, r: &mut Reader<'_>) -> Result<()> {
    m.merge_from(r).map_err(|mut e| {
        e.set_message(M::NAME);
        e.into()
    })
}

/// A fixed-size scalar of a packed field.
pub(crate) trait FixedScalar: Copy {
    /// Little-endian bytes.
    type Bytes: AsRef<[u8]>;
    /// The value's little-endian bytes.
    fn le_bytes(self) -> Self::Bytes;
}
impl FixedScalar for f32 {
    type Bytes = [u8; 4];
    fn le_bytes(self) -> [u8; 4] {
        self.to_le_bytes()
    }
}
impl FixedScalar for f64 {
    type Bytes = [u8; 8];
    fn le_bytes(self) -> [u8; 8] {
        self.to_le_bytes()
    }
}

/// Writes the elements of a packed fixed-size field (one copy on little-endian machines).
#[inline]
pub(crate) fn put_packed_fixed<S: Sink + ?Sized, T: FixedScalar>(s: &mut S, values: &[T]) {
    if cfg!(target_endian = "little") {
        // SAFETY: T is f32 or f64 (the only FixedScalar impls): plain data without padding, so
        // its memory is `size_of_val(values)` initialized bytes, already little-endian here.
        let bytes = unsafe {
            std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
        };
        s.put(bytes);
    } else {
        for v in values {
            s.put(v.le_bytes().as_ref());
        }
    }
}
