//! Recursion that cannot overflow the native stack.
//!
//! Messages nest (a graph in an attribute of a node of a graph, a sequence type of a sequence
//! type ...), and every operation on them (decode, size, encode, clone, compare, format, drop,
//! visit) recurses once per level. The generated code calls [`guard_stack`] on every field that
//! closes a cycle of the schema (a DFS back edge: `AttributeProto.g`, `TypeProto.Sequence.elem_type`,
//! ...), so between two calls the recursion follows an acyclic path of bounded depth. When less
//! than [`RED_ZONE`] bytes of stack are left there, the rest of the work continues on a fresh
//! [`SEGMENT`]-byte stack segment (`stacker`: `mmap`ed, with a guard page, freed on return), so
//! a chain of any length runs on any thread whose stack has [`RED_ZONE`] bytes left at the entry
//! point. Where the remaining stack is known (Linux, macOS, Windows, the BSDs) the check is a
//! thread-local read and a comparison; where it is not, every guarded call takes a new segment
//! (correct, slower).

/// Stack that must be left at a guarded call: the deepest path between two guarded calls
/// (measured at about 10 KiB in release builds: one level of the graph-in-attribute cycle with
/// a tensor, a sparse tensor and an error being built on the side) with a margin for
/// unoptimized builds, whose frames are several times larger.
pub const RED_ZONE: usize = 128 << 10;

/// Size of each stack segment taken when the red zone is reached.
pub const SEGMENT: usize = 2 << 20;

/// Runs `f`, on a new stack segment when less than [`RED_ZONE`] bytes of stack are left.
#[inline(always)]
pub fn guard_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}
