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
    let mut f = Some(f);
    let mut r = None;
    on_guarded_stack(&mut || r = f.take().map(|f| f()));
    // `stacker::maybe_grow` runs the closure before it returns (or panics when it cannot map a
    // segment): a promise of that crate, not of this one, so it is checked, not assumed.
    r.expect("the guarded call ran")
}

/// The body of [`guard_stack`], one for every guarded call (the check, and the segment taken
/// when the red zone is reached), given the call as a closure: runs it exactly once.
#[inline(never)]
fn on_guarded_stack(f: &mut dyn FnMut()) {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}

/// [`guard_stack`] for dropping the nested messages of a field that closes a cycle: when no
/// segment can be mapped (memory exhausted), the drop continues on the current stack instead
/// of failing — a drop cannot report an error, and its frames are a fraction of those of the
/// parse that built the message, so the nesting a parse reached before running out of memory
/// is freed within the stack it left.
#[inline(always)]
pub fn guard_drop(f: impl FnOnce()) {
    let mut work = Some(f);
    let _ = try_guard_stack(|| {
        if let Some(f) = work.take() {
            f();
        }
    });
    // Still there when the segment was refused: run it here.
    if let Some(f) = work {
        f();
    }
}

/// [`guard_stack`] for work whose stack segment may be refused: `Err(bytes)` when the segment
/// needed could not be mapped (an address-space limit), and `f` did not run. A panic of `f`
/// itself propagates.
#[inline(always)]
pub fn try_guard_stack<R>(f: impl FnOnce() -> R) -> Result<R, usize> {
    let mut f = Some(f);
    let mut r = None;
    on_guarded_stack_fallibly(&mut || r = f.take().map(|f| f()))?;
    // `Ok` from a new segment rests on `stacker::grow` running the closure before it returns:
    // checked, as in `guard_stack`.
    Ok(r.expect("the guarded call ran"))
}

/// The body of [`try_guard_stack`], one for every guarded call, given the call as a closure:
/// runs it once and returns `Ok`, or returns `Err(bytes)` without running it.
#[inline(never)]
fn on_guarded_stack_fallibly(f: &mut dyn FnMut()) -> Result<(), usize> {
    if stacker::remaining_stack().is_some_and(|left| left >= RED_ZONE) {
        f();
        return Ok(());
    }
    grow_fallibly(f)
}

/// The slow path of [`try_guard_stack`]: runs `f` on a new segment, if one can be had.
#[cold]
#[inline(never)]
fn grow_fallibly(f: &mut dyn FnMut()) -> Result<(), usize> {
    if !segment_available() {
        return Err(SEGMENT);
    }
    // `stacker` panics when its mapping fails (here only if memory ran out since the probe):
    // such a panic, raised before `f` starts, is the refusal.
    let mut started = false;
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stacker::grow(SEGMENT, || {
            started = true;
            f()
        })
    }));
    match run {
        Ok(()) => Ok(()),
        Err(_) if !started => Err(SEGMENT),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// True when a mapping the size of a segment (with its guard pages) can be made now: maps and
/// unmaps one the way `stacker` does, so that a refusal is seen without `stacker` panicking.
#[cfg(unix)]
fn segment_available() -> bool {
    let size = SEGMENT + (64 << 10);
    // SAFETY: an anonymous private mapping of `size` bytes, unmapped at once; no memory of
    // this process is touched.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANON,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return false;
        }
        libc::munmap(p, size);
    }
    true
}

/// Elsewhere the segment's own allocation is the test (see [`grow_fallibly`]).
#[cfg(not(unix))]
fn segment_available() -> bool {
    true
}
