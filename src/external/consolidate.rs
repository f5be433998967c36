//! `ConsolidateTensorsToBuffer`: move the payloads of every tensor of at least
//! `raw_data_threshold` bytes into ONE shared buffer whose start and every offset are aligned to
//! `alignment`; each tensor then borrows its range under the buffer's shared owner token, so the
//! returned owner may be dropped at once.

use std::sync::Arc;

use crate::bytes::ByteSpan;
use crate::codec::TensorBufferOptions;
use crate::error::{Error, Result};
use crate::proto::ModelProto;

/// The shared buffer made by [`consolidate_tensors_to_buffer`]; every consolidated tensor holds
/// a clone of it (as its owner token).
pub struct TensorBuffer {
    data: Vec<u8>,
    start: usize,
    len: usize,
    tensors: usize,
}

impl TensorBuffer {
    /// The buffer's bytes (aligned start; padding between tensors is zero).
    pub fn as_slice(&self) -> &[u8] {
        &self.data[self.start..self.start + self.len]
    }

    /// Number of tensors moved into it.
    pub fn tensors(&self) -> usize {
        self.tensors
    }
}

impl AsRef<[u8]> for TensorBuffer {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for TensorBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TensorBuffer({} bytes, {} tensors)",
            self.len, self.tensors
        )
    }
}

/// Moves every tensor payload (`raw_data` present) of at least `opts.raw_data_threshold` bytes
/// into one new buffer, at offsets rounded up to `opts.alignment` (0/1 = packed) from a start
/// aligned to the same boundary, and makes each of those tensors borrow its range with the
/// buffer as shared owner. Reaches every tensor of the model (initializers, sparse
/// initializers, attributes, subgraphs, functions, training graphs). Smaller tensors are left
/// as they were. Returns the buffer (`None` when no tensor qualified); the tensors keep it
/// alive, so it may be dropped.
pub fn consolidate_tensors_to_buffer(
    model: &mut ModelProto,
    opts: &TensorBufferOptions,
) -> Result<Option<Arc<TensorBuffer>>> {
    opts.validate()?;
    let align = opts.alignment.max(1);
    let align_usize = usize::try_from(align)
        .map_err(|_| Error::LimitExceeded(format!("alignment {align} does not fit in memory")))?;
    // Offsets, in visitor order.
    let mut offsets: Vec<Option<usize>> = Vec::new();
    let mut total: u64 = 0;
    let mut overflow = false;
    model.visit_tensors(&mut |t| {
        let slot = match &t.raw_data {
            Some(r) if r.len() as u64 >= opts.raw_data_threshold => {
                let start = total.div_ceil(align).checked_mul(align);
                match start.and_then(|s| s.checked_add(r.len() as u64).map(|e| (s, e))) {
                    Some((s, e)) => {
                        total = e;
                        usize::try_from(s).ok()
                    }
                    None => {
                        overflow = true;
                        None
                    }
                }
            }
            _ => None,
        };
        offsets.push(slot);
    });
    let tensors = offsets.iter().flatten().count();
    if tensors == 0 {
        return Ok(None);
    }
    let len = usize::try_from(total)
        .ok()
        .filter(|_| !overflow)
        .and_then(|l| l.checked_add(align_usize))
        .ok_or_else(|| Error::LimitExceeded("tensors do not fit in one buffer".into()))?;
    let mut data: Vec<u8> = Vec::new();
    data.try_reserve_exact(len)
        .map_err(|_| Error::alloc_failed(len, "the consolidated buffer"))?;
    data.resize(len, 0);
    let start = data.as_ptr().align_offset(align_usize);
    let total = total as usize;
    {
        let region = &mut data[start..start + total];
        let mut i = 0usize;
        model.visit_tensors(&mut |t| {
            if let (Some(off), Some(r)) = (offsets[i], &t.raw_data) {
                region[off..off + r.len()].copy_from_slice(r);
            }
            i += 1;
        });
    }
    let buffer = Arc::new(TensorBuffer {
        data,
        start,
        len: total,
        tensors,
    });
    let mut i = 0usize;
    model.visit_tensors_mut(&mut |t| {
        if let (Some(off), Some(r)) = (offsets[i], &mut t.raw_data) {
            let n = r.len();
            *r = ByteSpan::from_shared(buffer.clone(), off..off + n);
        }
        i += 1;
    });
    Ok(Some(buffer))
}
