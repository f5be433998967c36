//! The ONNX messages: generated from the one schema table ([`schema`]); each implements the wire
//! layer's [`Message`] trait (decode/encode entry points).

mod data_type;
mod display;
#[rustfmt::skip]
#[allow(clippy::all, unused_variables)]
mod generated;
mod payload;
pub mod schema;
pub mod text_format;

pub(crate) use crate::wire::{InlineVec, MsgBox, Rare, RareFields};
pub use crate::wire::{Message, MessageVisitor, Repeated, RepeatedField};
pub use data_type::DataType;
pub use generated::*;

pub(crate) use crate::wire::message::{encode_into_spare, put_packed_fixed};
