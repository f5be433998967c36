//! The memory a load puts a model in, below the wire format: one source of anonymous memory and
//! the three ways a load cuts it up. Each type here exists because the others cannot do its job
//! at its cost (the numbers are in each module's doc and in docs/design.md):
//!
//! | type | module | what it is for | why it is not one of the others |
//! |---|---|---|---|
//! | `ReusableMap` | `recycle.rs` | every anonymous mapping a load makes, kept in a bounded process-wide store when freed and taken back by the next load | the one source: the others are built on it |
//! | `ChunkRegion` | `region.rs` | the blocks one parse bump-allocates its metadata from (repeated-field chunks, sub-message boxes, spilled lists, copied strings), freed by share counts | metadata parts are freed one by one in any order by mutation, so a block needs a live count; payloads do not |
//! | origin words | `origin.rs` | one `free` for memory from the heap and from a block (mutation and the C++ classes' `new` mix both) | a word before each object, not a type: it lets a block box and a heap box be the same type |
//! | `PayloadPool` | `placement.rs` | aligned homes of the tensor payloads a load copies: small ones share 64 KiB chunks, large ones get a mapping of their own | payloads need an alignment and an owner token each (a `ByteSpan` can outlive its model), metadata needs neither |
//!
//! `storage::Arena` (a whole file read into memory) and the image of a stream the C++ classes
//! parse (`codec::sparse`) take their mappings from `ReusableMap` too. The share count of a
//! block (`bytes::SharedBlock`) lives with the byte containers, whose strings hold shares of
//! blocks too.

mod origin;
mod placement;
mod recycle;
mod region;

pub(crate) use origin::{
    ORIGIN_WORD_BEFORE, alloc_raw, alloc_raw_in, free_raw, heap_layout, in_block, realloc_raw,
};
#[doc(hidden)]
pub use placement::REGION_OWNER_BYTES;
pub(crate) use placement::{MAP_MIN_BYTES, PayloadPool};
pub(crate) use recycle::ReusableMap;
pub use recycle::{
    memory_held_for_reuse, memory_reuse_limit, release_memory_held_for_reuse,
    set_memory_reuse_limit,
};
pub(crate) use region::{BlockHeader, ChunkRegion, free_chunk};

/// Test hook: see `codec::set_metadata_regions_off`.
#[cfg(feature = "test-hooks")]
pub(crate) fn set_regions_off(off: bool) {
    region::REGIONS_OFF.store(off, std::sync::atomic::Ordering::Relaxed);
}
