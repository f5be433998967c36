//! [`Root`]: the owner of one Rust value (a model, a message, or a detached piece of one) that
//! Python views point into, with the registry of those views and the busy state that keeps
//! operations running without the GIL from racing with Python code.
//!
//! # The access protocol
//! Python code reads and writes the Rust value only while holding the GIL, so two Python
//! threads never touch it at once. Operations that release the GIL (save, serialize, conversions)
//! first mark the root busy: `busy > 0` counts such readers (Python may still read; a Python
//! write waits until they are done), `busy == -1` is one such writer (every Python access waits).
//! Waiting releases the GIL, so the operation that holds the root can take it back when it ends.
//!
//! The protocol is fair to writers: while a Python write (or an operation that writes without the
//! GIL) waits, `writers_waiting > 0` and new readers without the GIL wait behind it, so a thread
//! that saves or serializes back to back cannot keep a write waiting for longer than the
//! operation in progress. A waiting writer stops counting itself only once it holds the GIL
//! again, and it writes before it releases the GIL, so no new reader can slip in between.

use std::any::Any;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use pyo3::prelude::*;

/// Identifies a message type (its index in the generated type table).
pub type Tag = u16;

/// Key of a registered view: the address of the Rust message it shows and its type (a message and
/// its first inline sub-message may share an address).
pub type ViewKey = (usize, Tag);

/// A multiply-shift hasher for [`ViewKey`]s: addresses are already well spread.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(26);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(v as u64);
    }
}

/// The live views of a root, by the message they show: borrowed pointers to Python objects of
/// class `Message`, removed by the view's destructor.
pub type Registry = HashMap<ViewKey, *mut pyo3::ffi::PyObject, BuildHasherDefault<AddrHasher>>;

/// The owner of one Rust value that Python views point into.
pub struct Root {
    /// The value (`Box::into_raw` of a `Box<dyn Any + Send + Sync>`); only dropped by `Drop`.
    storage: NonNull<dyn Any + Send + Sync>,
    /// Operations running without the GIL: > 0 readers, -1 one writer, 0 none.
    busy: AtomicIsize,
    /// Writers (Python writes or operations that write without the GIL) waiting for `busy` to
    /// become 0; new readers without the GIL wait while it is not 0.
    writers_waiting: AtomicUsize,
    /// Wakes Python threads waiting for `busy` to change.
    wait_lock: Mutex<()>,
    wait_cv: Condvar,
    /// Live views into `storage`; only touched with the GIL held.
    registry: std::cell::UnsafeCell<Registry>,
}

// SAFETY: the stored value is `Send + Sync`; the registry holds Python object pointers and is only
// touched with the GIL held (every caller has a `Python` token), which serializes all access to it;
// `busy` is atomic.
unsafe impl Send for Root {}
// SAFETY: see `Send`: shared access from several threads goes through the GIL (registry, Python
// reads/writes of the value) or through the busy protocol (operations without the GIL only read,
// or write while every Python access waits).
unsafe impl Sync for Root {}

impl Drop for Root {
    fn drop(&mut self) {
        // SAFETY: `storage` came from `Box::into_raw` in `Root::new` and is dropped only here.
        drop(unsafe { Box::from_raw(self.storage.as_ptr()) });
    }
}

impl Root {
    /// A root owning `value`; returns it with the address of the value inside.
    pub fn new<V: Any + Send + Sync>(value: Box<V>) -> (Arc<Root>, *mut V) {
        let (root, p) = Root::from_any(value);
        (root, p as *mut V)
    }

    /// A root owning a boxed value of a type known at run time; returns it with the address of
    /// the value.
    pub fn from_any(value: Box<dyn Any + Send + Sync>) -> (Arc<Root>, *mut ()) {
        let raw: *mut (dyn Any + Send + Sync) = Box::into_raw(value);
        let root = Arc::new(Root {
            // SAFETY: `Box::into_raw` never returns null.
            storage: unsafe { NonNull::new_unchecked(raw) },
            busy: AtomicIsize::new(0),
            writers_waiting: AtomicUsize::new(0),
            wait_lock: Mutex::new(()),
            wait_cv: Condvar::new(),
            registry: std::cell::UnsafeCell::new(Registry::default()),
        });
        (root, raw as *mut ())
    }

    /// The registry of live views.
    #[allow(clippy::mut_from_ref)]
    pub fn registry(&self, _py: Python<'_>) -> &mut Registry {
        // SAFETY: only called with the GIL held (the token proves it), and no caller keeps the
        // reference across Python code, so there is never a second live reference.
        unsafe { &mut *self.registry.get() }
    }

    /// True when an operation without the GIL writes the value.
    #[inline]
    pub fn has_writer(&self) -> bool {
        self.busy.load(Ordering::Acquire) < 0
    }

    /// True when no operation without the GIL uses the value.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    /// Waits, with the GIL released, until `ready()`.
    fn wait_until(&self, py: Python<'_>, ready: impl Fn() -> bool + Send + Sync) {
        py.detach(|| {
            let mut guard = self.wait_lock.lock().unwrap_or_else(|e| e.into_inner());
            while !ready() {
                guard = self.wait_cv.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
        });
    }

    /// Wakes every thread waiting for the busy state to change.
    fn notify(&self) {
        let _guard = self.wait_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.wait_cv.notify_all();
    }

    /// Waits, with the GIL released, until no operation without the GIL writes the value (what a
    /// Python read needs).
    pub fn wait_for_read(&self, py: Python<'_>) {
        self.wait_until(py, || self.busy.load(Ordering::Acquire) >= 0);
    }

    /// Waits, with the GIL released, until no operation without the GIL uses the value (what a
    /// write needs). Counts as a waiting writer meanwhile, which holds back new readers without
    /// the GIL; returns with the GIL held, so the caller can write before any new reader starts.
    pub fn wait_for_write(&self, py: Python<'_>) {
        self.writers_waiting.fetch_add(1, Ordering::AcqRel);
        self.wait_until(py, || self.busy.load(Ordering::Acquire) == 0);
        // Back with the GIL: no reader can start before this thread releases it (after its write).
        if self.writers_waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.notify();
        }
    }

    /// Marks the start of a read without the GIL (waits while a writer runs or waits).
    pub fn begin_read(self: &Arc<Self>, py: Python<'_>) -> BusyGuard {
        while self.has_writer() || self.writers_waiting.load(Ordering::Acquire) > 0 {
            self.wait_until(py, || {
                self.busy.load(Ordering::Acquire) >= 0
                    && self.writers_waiting.load(Ordering::Acquire) == 0
            });
        }
        // With the GIL held nobody else can start a writer between the check and the increment.
        self.busy.fetch_add(1, Ordering::AcqRel);
        BusyGuard {
            root: self.clone(),
            delta: -1,
        }
    }

    /// Marks the start of a write without the GIL (waits until nothing else runs).
    pub fn begin_write(self: &Arc<Self>, py: Python<'_>) -> BusyGuard {
        while !self.is_idle() {
            self.wait_for_write(py);
        }
        self.busy.store(-1, Ordering::Release);
        BusyGuard {
            root: self.clone(),
            delta: 1,
        }
    }
}

/// Ends a read or write without the GIL when dropped (also on panic), waking waiting threads.
pub struct BusyGuard {
    root: Arc<Root>,
    delta: isize,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.root.busy.fetch_add(self.delta, Ordering::AcqRel);
        self.root.notify();
    }
}

/// A raw pointer that may cross into a closure run without the GIL (the busy protocol keeps
/// what it points to alive and unmodified).
#[derive(Clone, Copy)]
pub struct SendPtr<T>(pub *const T);
// SAFETY: used only to carry a pointer into `Python::detach` while the pointee's root is marked
// busy (it is `Sync` message data), see `Root::begin_read`.
unsafe impl<T: Sync> Send for SendPtr<T> {}
