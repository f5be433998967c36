//! Message views: the Python objects that show a Rust message in place, and how they stay valid.
//!
//! # Lifetime scheme
//! A view is *direct* (a root + the address of its message) or *lazy* (a parent view + a
//! sub-message field that is not set yet: reads see the default message, the first write sets
//! the field and makes the view direct).
//!
//! A Rust message keeps its address while it stays where it is: elements of a repeated message
//! field never move (see `onnx_light::proto::RepeatedField`), boxed sub-messages neither, and
//! inline ones move only with their parent. So a direct view is valid until its message is
//! removed or replaced. Every Python operation that removes or replaces messages (`del`,
//! `clear`, `pop`, `remove`, `ClearField`, `Clear`, `CopyFrom`, `ParseFromString`, switching a
//! oneof, `MergeFrom` switching a oneof) hands the removed value to [`Ctx::detach`] instead of
//! dropping it. When views point into that value, it becomes a root of its own and those views
//! move there (their address is adjusted when the value itself moved); their content stays as
//! it was, as protobuf's Python objects do. Direct views are found through the root's registry
//! (address and type → view), which also makes `x.graph is x.graph` hold.
//!
//! No Python code runs between resolving a view's address and using it: arguments are converted
//! before, Python objects that may trigger the garbage collector (lists, views) are made after.

use std::cell::UnsafeCell;
use std::sync::Arc;

use pyo3::prelude::*;

use crate::root::{Root, Tag, ViewKey};
use crate::schema::MsgInfo;
pub use crate::schema::{Ctx, Loc, Message, SubField};

/// Visits every message inside a value: `f(address, type)`.
pub trait Walk {
    /// Calls `f` for each message in `self` (itself first, when it is one).
    fn walk(&self, f: &mut dyn FnMut(usize, Tag));
}

impl<T: Walk> Walk for Option<T> {
    fn walk(&self, f: &mut dyn FnMut(usize, Tag)) {
        if let Some(v) = self {
            v.walk(f)
        }
    }
}
impl<T: Walk> Walk for &T {
    fn walk(&self, f: &mut dyn FnMut(usize, Tag)) {
        (**self).walk(f)
    }
}
impl<T: Walk> Walk for Box<T> {
    fn walk(&self, f: &mut dyn FnMut(usize, Tag)) {
        (**self).walk(f)
    }
}
impl<T: Walk> Walk for onnx_light::proto::RepeatedField<T> {
    fn walk(&self, f: &mut dyn FnMut(usize, Tag)) {
        for v in self.iter() {
            v.walk(f)
        }
    }
}

impl Ctx<'_> {
    /// Takes `old`, which was at `old_addr` inside this root and has just been removed or
    /// replaced: views into it move to a new root that owns it; without views it is dropped.
    /// `skip` is a view that stays where it is (the message whose content `old` was).
    pub fn detach<V: Walk + Send + Sync + 'static>(&self, old: V, old_addr: usize) {
        self.detach_except(old, old_addr, None)
    }

    /// [`Ctx::detach`] leaving the view registered under `skip` in place.
    pub fn detach_except<V: Walk + Send + Sync + 'static>(
        &self,
        old: V,
        old_addr: usize,
        skip: Option<ViewKey>,
    ) {
        let reg = self.root.registry(self.py);
        if reg.is_empty() || reg.len() == 1 && skip.is_some_and(|k| reg.contains_key(&k)) {
            drop(old);
            return;
        }
        let boxed = Box::new(old);
        let base = &*boxed as *const V as usize;
        let size = std::mem::size_of::<V>();
        let mut found: Vec<(*mut pyo3::ffi::PyObject, usize, Tag)> = Vec::new();
        boxed.walk(&mut |addr, tag| {
            let key_addr = if (base..base + size).contains(&addr) {
                addr - base + old_addr
            } else {
                addr
            };
            let key = (key_addr, tag);
            if Some(key) == skip {
                return;
            }
            if let Some(obj) = reg.remove(&key) {
                found.push((obj, addr, tag));
            }
        });
        if found.is_empty() {
            drop(boxed);
            return;
        }
        let (new_root, _) = Root::new(boxed);
        let new_reg = new_root.registry(self.py);
        for (obj, addr, tag) in found {
            // SAFETY: registry entries are live `Message` objects (removed by their destructor).
            let view = unsafe { Bound::from_borrowed_ptr(self.py, obj) };
            let view = view
                .cast_into::<Message>()
                .expect("registry holds messages");
            // SAFETY: GIL held; no reference into this view's `loc` is alive (views being
            // detached are never the ones an operation is resolving).
            unsafe {
                *view.get().loc.get() = Loc::Direct {
                    root: new_root.clone(),
                    ptr: addr as *mut (),
                    registered: true,
                };
            }
            new_reg.insert((addr, tag), obj);
        }
    }
}

impl Message {
    /// A view of the value owned by `root` at `ptr` (not registered: nothing can remove it).
    pub fn owning(root: Arc<Root>, ptr: *mut (), info: &'static MsgInfo) -> Self {
        Message {
            loc: UnsafeCell::new(Loc::Direct {
                root,
                ptr,
                registered: false,
            }),
            info,
        }
    }

    fn loc(&self) -> &Loc {
        // SAFETY: GIL held by every caller; callers copy what they need out before any code that
        // could replace `loc` runs.
        unsafe { &*self.loc.get() }
    }

    /// The address of the message for reading (waits while an operation without the GIL writes
    /// it), with its root when it exists (`None`: an unset sub-message, read as the default).
    pub fn resolve_read(&self, py: Python<'_>) -> PyResult<(*const (), Option<&Arc<Root>>)> {
        loop {
            match self.loc() {
                Loc::Direct { root, ptr, .. } => {
                    if root.has_writer() {
                        root.wait_for_read(py);
                        continue;
                    }
                    return Ok((*ptr as *const (), Some(root)));
                }
                Loc::Lazy { parent, field } => {
                    let (pp, root) = parent.get().resolve_read(py)?;
                    // SAFETY: `pp` is a live message of the parent's type (or its default).
                    let c = unsafe { (field.get)(pp) };
                    if c.is_null() {
                        return Ok(((self.info.default)(), None));
                    }
                    return Ok((c, root));
                }
            }
        }
    }

    /// The address of the message for reading.
    #[inline]
    pub fn read_ptr(&self, py: Python<'_>) -> PyResult<*const ()> {
        // Fast path of direct views.
        if let Loc::Direct { root, ptr, .. } = self.loc()
            && !root.has_writer()
        {
            return Ok(*ptr);
        }
        Ok(self.resolve_read(py)?.0)
    }

    /// The address of the message for writing (waits until no operation without the GIL uses
    /// its root; sets an unset sub-message), with its root.
    pub fn resolve_write(slf: &Bound<'_, Message>) -> PyResult<(*mut (), Arc<Root>)> {
        let py = slf.py();
        let this = slf.get();
        loop {
            match this.loc() {
                Loc::Direct { root, ptr, .. } => {
                    if !root.is_idle() {
                        root.wait_for_write(py);
                        continue;
                    }
                    return Ok((*ptr, root.clone()));
                }
                Loc::Lazy { parent, field } => {
                    let parent = parent.clone_ref(py);
                    let (pp, root) = Message::resolve_write(parent.bind(py))?;
                    let ctx = Ctx { py, root: &root };
                    // SAFETY: `pp` is a live message of the parent's type, writable (root idle).
                    let c = unsafe { (field.make)(&ctx, pp) };
                    let key = (c as usize, this.info.tag);
                    if let std::collections::hash_map::Entry::Vacant(e) =
                        root.registry(py).entry(key)
                    {
                        e.insert(slf.as_ptr());
                        // SAFETY: GIL held; nothing borrows `loc` now (`parent` was cloned out).
                        let old = unsafe {
                            std::mem::replace(
                                &mut *this.loc.get(),
                                Loc::Direct {
                                    root: root.clone(),
                                    ptr: c,
                                    registered: true,
                                },
                            )
                        };
                        drop(old);
                    }
                    drop(parent);
                    return Ok((c, root));
                }
            }
        }
    }
}

/// Creates the Python view (of the class of `info`) of the message at `ptr` inside `root`,
/// reusing the live one when there is one.
pub fn view_of(
    py: Python<'_>,
    root: &Arc<Root>,
    ptr: *mut (),
    info: &'static MsgInfo,
) -> PyResult<Py<PyAny>> {
    let key = (ptr as usize, info.tag);
    if let Some(&obj) = root.registry(py).get(&key) {
        // SAFETY: registry entries are live objects; this takes a new reference.
        return Ok(unsafe { Bound::from_borrowed_ptr(py, obj) }.unbind());
    }
    let base = Message {
        loc: UnsafeCell::new(Loc::Direct {
            root: root.clone(),
            ptr,
            registered: true,
        }),
        info,
    };
    let obj = (info.wrap)(py, base)?;
    root.registry(py).insert(key, obj.as_ptr());
    Ok(obj)
}

/// Creates a lazy view of sub-message `field` of `parent` (not set).
pub fn lazy_view(
    py: Python<'_>,
    parent: &Bound<'_, Message>,
    field: &'static SubField,
    info: &'static MsgInfo,
) -> PyResult<Py<PyAny>> {
    let base = Message {
        loc: UnsafeCell::new(Loc::Lazy {
            parent: parent.clone().unbind(),
            field,
        }),
        info,
    };
    (info.wrap)(py, base)
}

/// Creates the view owning a new root holding `value`.
pub fn owning_view<M: Send + Sync + 'static>(
    py: Python<'_>,
    value: Box<M>,
    info: &'static MsgInfo,
) -> PyResult<Py<PyAny>> {
    let (root, ptr) = Root::new(value);
    (info.wrap)(py, Message::owning(root, ptr as *mut (), info))
}
