//! The data-parallel toolkit of the parallel reads, parses and writes: rayon with the `parallel`
//! feature; without it (the minimal build), stand-ins with the same names that run
//! sequentially. Without the feature [`crate::storage::thread_pool`] never returns a pool, so the
//! parallel branches that use these names are dead code the compiler drops, and rayon is not
//! linked at all.

#[cfg(feature = "parallel")]
pub(crate) use rayon::{ThreadPool, join, prelude};

#[cfg(not(feature = "parallel"))]
pub(crate) use sequential::{ThreadPool, join, prelude};

#[cfg(not(feature = "parallel"))]
mod sequential {
    /// A thread pool that cannot exist (no value of this type is ever made).
    pub(crate) enum ThreadPool {}

    impl ThreadPool {
        /// Runs `f` in the pool (never called: there is no pool).
        pub(crate) fn install<R>(&self, _f: impl FnOnce() -> R) -> R {
            match *self {}
        }
    }

    /// Runs `a` then `b`.
    pub(crate) fn join<A, B>(a: impl FnOnce() -> A, b: impl FnOnce() -> B) -> (A, B) {
        (a(), b())
    }

    /// The iterator methods of rayon's prelude the library uses, as plain iterators.
    pub(crate) mod prelude {
        /// `into_par_iter`: the sequential `into_iter`.
        pub(crate) trait IntoParallelIterator: IntoIterator + Sized {
            fn into_par_iter(self) -> Self::IntoIter {
                self.into_iter()
            }
        }
        impl<I: IntoIterator> IntoParallelIterator for I {}

        /// `par_iter_mut` and `par_chunks_mut` of a slice, sequential.
        pub(crate) trait ParallelSlice<T> {
            fn par_iter_mut(&mut self) -> std::slice::IterMut<'_, T>;
            fn par_chunks_mut(&mut self, n: usize) -> std::slice::ChunksMut<'_, T>;
        }
        impl<T> ParallelSlice<T> for [T] {
            fn par_iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
                self.iter_mut()
            }
            fn par_chunks_mut(&mut self, n: usize) -> std::slice::ChunksMut<'_, T> {
                self.chunks_mut(n)
            }
        }

        /// `collect_into_vec`: the items into `v` (cleared first), sequentially.
        pub(crate) trait CollectIntoVec: Iterator + Sized {
            fn collect_into_vec(self, v: &mut Vec<Self::Item>) {
                v.clear();
                v.extend(self);
            }
        }
        impl<I: Iterator> CollectIntoVec for I {}
    }
}
