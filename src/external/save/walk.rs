//! The tensors of a model as a save sees them: a walk that tells where each tensor sits
//! (initializer or node attribute, dense or sparse). It follows the generated visitor's order
//! (`visit_tensors`, also the order of the generated `clone_with_tensors` the save's metadata
//! copy is made with) and reaches the same places: graph initializers and sparse initializers
//! (values, indices), node attributes `t`, `tensors`, `sparse_tensor(s)`, subgraphs `g` /
//! `graphs` recursively, function bodies (default attributes and nodes), and training graphs.

use crate::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto, TensorProto,
};
use crate::wire::guard_stack;

/// Where a tensor sits in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// In a node attribute (else graph or function data: an initializer).
    pub(crate) attribute: bool,
    /// The values or indices of a sparse tensor.
    pub(crate) sparse: bool,
}

const INITIALIZER: Place = Place {
    attribute: false,
    sparse: false,
};
const ATTRIBUTE: Place = Place {
    attribute: true,
    sparse: false,
};

/// Calls `f` on every tensor of `m` with its place.
pub(crate) fn walk_model<'a>(m: &'a ModelProto, f: &mut dyn FnMut(&'a TensorProto, Place)) {
    if let Some(g) = &m.graph {
        walk_graph(g, f);
    }
    for t in &m.training_info {
        if let Some(g) = &t.initialization {
            walk_graph(g, f);
        }
        if let Some(g) = &t.algorithm {
            walk_graph(g, f);
        }
    }
    for func in &m.functions {
        for a in &func.attribute_proto {
            walk_attr(a, f);
        }
        for n in &func.node {
            walk_node(n, f);
        }
    }
}

fn walk_sparse<'a>(
    s: &'a SparseTensorProto,
    place: Place,
    f: &mut dyn FnMut(&'a TensorProto, Place),
) {
    if let Some(v) = &s.values {
        f(
            v,
            Place {
                sparse: true,
                ..place
            },
        );
    }
    if let Some(i) = &s.indices {
        f(
            i,
            Place {
                sparse: true,
                ..place
            },
        );
    }
}

fn walk_graph<'a>(g: &'a GraphProto, f: &mut dyn FnMut(&'a TensorProto, Place)) {
    for n in &g.node {
        walk_node(n, f);
    }
    for t in &g.initializer {
        f(t, INITIALIZER);
    }
    for s in &g.sparse_initializer {
        walk_sparse(s, INITIALIZER, f);
    }
}

fn walk_node<'a>(n: &'a NodeProto, f: &mut dyn FnMut(&'a TensorProto, Place)) {
    for a in &n.attribute {
        walk_attr(a, f);
    }
}

fn walk_attr<'a>(a: &'a AttributeProto, f: &mut dyn FnMut(&'a TensorProto, Place)) {
    if let Some(t) = &a.t {
        f(t, ATTRIBUTE);
    }
    // Subgraphs close a cycle of the schema: the stack is guarded there (see `wire::stack`).
    if let Some(g) = &a.g {
        guard_stack(|| walk_graph(g, f));
    }
    if let Some(s) = &a.sparse_tensor {
        walk_sparse(s, ATTRIBUTE, f);
    }
    for t in &a.tensors {
        f(t, ATTRIBUTE);
    }
    for g in &a.graphs {
        guard_stack(|| walk_graph(g, f));
    }
    for s in &a.sparse_tensors {
        walk_sparse(s, ATTRIBUTE, f);
    }
}
