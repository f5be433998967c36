//! A metadata-only load of a remote model (`skip_raw_data`): the message structure is read with
//! ranged reads into a sparse image (`codec::sparse`) that skips the payloads the parse drops
//! (`TensorProto.raw_data` of at least `raw_data_threshold` bytes, the parser's own rule), so
//! they are never fetched.

use super::RemoteOptions;
use super::fetch::Object;
use crate::codec::ParseOptions;
use crate::codec::sparse::{Image, sparse_image};
use crate::error::Result;

/// The region of `obj` with every byte a `skip_raw_data` parse of a `message` (its schema
/// name) reads.
pub(crate) fn metadata_image(
    obj: &Object,
    message: &str,
    opts: &ParseOptions,
    ro: &RemoteOptions,
) -> Result<Image> {
    sparse_image(
        message,
        obj.size,
        opts.raw_data_threshold,
        opts.max_recursion_depth,
        &mut |start, dst| obj.read_range(start, dst, ro),
        &obj.loc.url,
    )
}
