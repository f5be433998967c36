//! The protobuf wire format, nothing ONNX-specific: varints, tags, length-delimited fields, a
//! bounded [`Reader`] over a byte slice, the [`Sink`] trait the encoder writes to, the
//! [`Message`] trait every message implements, [`RepeatedField`] (the list of a repeated
//! message field) and [`Repeated`] (what the list of a repeated scalar or string field offers).

mod cursor;
pub(crate) mod inline_vec;
pub(crate) mod message;
mod msg_box;
#[cfg(feature = "inline-alignment")]
mod padding;
#[cfg(feature = "inline-alignment")]
mod padding_field;
pub(crate) mod prefetch;
pub(crate) mod rare;
mod reader;
mod repeated;
pub mod stack;
mod writer;

pub(crate) use inline_vec::InlineVec;
pub use inline_vec::{MAX_LEN, Repeated};
pub use message::{Message, MessageVisitor, SizeTable};
pub(crate) use msg_box::MsgBox;

pub use cursor::Cursor;
pub(crate) use message::{DynMessage, encode_streaming};
#[cfg(feature = "inline-alignment")]
pub(crate) use padding::align_payloads;
pub(crate) use rare::{Rare, RareFields};
pub use reader::{
    AUTO_METADATA_BASE_BYTES, AUTO_METADATA_BYTES_PER_INPUT_BYTE, DecodeConfig,
    MAX_RECURSION_DEPTH_LIMIT, PayloadMode, ReadSource, Reader, ReleaseSource, metadata_budget,
};
pub use repeated::RepeatedField;
pub use stack::{guard_stack, try_guard_stack};
pub(crate) use writer::Spill;
pub use writer::{Sink, SizeCursor, SliceWriter, put_tag, put_varint};

/// Wire type 0: varint.
pub const VARINT: u32 = 0;
/// Wire type 1: 8 little-endian bytes.
pub const FIXED64: u32 = 1;
/// Wire type 2: length-delimited.
pub const LEN: u32 = 2;
/// Wire type 3: start of a group (deprecated, kept as unknown).
pub const START_GROUP: u32 = 3;
/// Wire type 4: end of a group.
pub const END_GROUP: u32 = 4;
/// Wire type 5: 4 little-endian bytes.
pub const FIXED32: u32 = 5;

/// Largest field number protobuf allows.
pub const MAX_FIELD_NUMBER: u32 = (1 << 29) - 1;

/// The field of the padding an aligned save writes before a tensor's `raw_data`
/// (`SerializeOptions::inline_alignment`): a length-delimited field of zero bytes, numbered
/// [`MAX_FIELD_NUMBER`], which no message of `onnx.proto` uses (docs/aligned-models.md). Parses
/// skip it in a `TensorProto` (other readers keep it as an unknown field).
pub const PADDING_FIELD: u32 = MAX_FIELD_NUMBER;

/// The tag of [`PADDING_FIELD`] (wire type 2; 5 bytes as a varint).
pub const PADDING_TAG: u32 = tag(PADDING_FIELD, LEN);

/// The tag value for `field` with `wire_type`.
pub const fn tag(field: u32, wire_type: u32) -> u32 {
    (field << 3) | wire_type
}

/// Number of bytes of `v` as a varint (1..=10).
#[inline]
pub const fn varint_len(v: u64) -> u64 {
    // 1 + floor(bits/7), computed without a loop.
    let bits = 64 - (v | 1).leading_zeros() as u64;
    (bits * 9 + 64) / 64
}

/// Size of a length-delimited field body of `len` bytes with its length prefix.
#[inline]
pub const fn len_delimited_size(len: u64) -> u64 {
    varint_len(len) + len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_len_matches_encoding() {
        for v in [
            0u64,
            1,
            127,
            128,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX,
            1 << 63,
        ] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf.len() as u64, varint_len(v), "value {v}");
        }
    }
}
