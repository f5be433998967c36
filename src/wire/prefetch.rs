//! Software prefetch: a hint to the CPU to start loading memory that a walk over a model is
//! about to read (sub-messages are boxed and reached through pointers, which the hardware
//! prefetcher cannot follow).

/// Cache lines fetched at most for one value.
pub(crate) const MAX_LINES: usize = 8;

/// Size of a cache line, in bytes.
const LINE: usize = 64;

/// Asks the CPU to load the cache lines of the value at `p` (at most [`MAX_LINES`]).
#[inline(always)]
pub(crate) fn prefetch_value<T>(p: *const T) {
    prefetch_lines(
        p.cast::<u8>(),
        std::mem::size_of::<T>().div_ceil(LINE).min(MAX_LINES),
    );
}

/// Asks the CPU to load `lines` cache lines starting with the one holding `p`. A hint only: it
/// never faults and reads nothing, whatever the address.
#[inline(always)]
pub(crate) fn prefetch_lines(p: *const u8, lines: usize) {
    for i in 0..lines {
        prefetch_line(p.wrapping_add(i * LINE));
    }
}

/// Asks the CPU to load the cache line holding `p`.
#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, on any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
