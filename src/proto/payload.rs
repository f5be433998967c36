//! Copies of a tensor without its payload: the save's metadata copy writes each tensor's bytes
//! elsewhere, and `SerializeOptions::skip_raw_data` writes the structure only.

use super::TensorProto;

impl TensorProto {
    /// A copy of every field except `raw_data` (unset in the copy). The struct is destructured
    /// exhaustively, so a field added to the schema fails to compile here instead of being
    /// dropped.
    pub fn clone_without_payload(&self) -> TensorProto {
        let TensorProto {
            dims,
            data_type,
            float_data,
            int64_data,
            name,
            raw_data: _,
            rare,
        } = self;
        TensorProto {
            dims: dims.clone(),
            data_type: *data_type,
            float_data: float_data.clone(),
            int64_data: int64_data.clone(),
            name: name.clone(),
            raw_data: None,
            // The rare fields (external data references and unknown fields included) hold no
            // payload.
            rare: rare.clone(),
        }
    }

    /// A copy without `raw_data` when it holds at least `min_len` bytes (and at least one),
    /// else a full copy: what [`crate::wire::Message::without_payloads`] writes for each tensor.
    pub fn without_payload(&self, min_len: u64) -> TensorProto {
        let mut copy = self.clone_without_payload();
        if let Some(r) = &self.raw_data
            && (r.is_empty() || (r.len() as u64) < min_len)
        {
            copy.raw_data = Some(r.clone());
        }
        copy
    }
}
