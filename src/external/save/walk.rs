//! The tensors of a model as a save sees them: a walk that tells where each tensor sits
//! (initializer or node attribute, dense or sparse), and a copy of the model's metadata with each
//! tensor rewritten. Both follow the generated visitor's order (`visit_tensors`) and reach the
//! same places: graph initializers and sparse initializers (values, indices), node attributes
//! `t`, `tensors`, `sparse_tensor(s)`, subgraphs `g` / `graphs` recursively, function bodies
//! (default attributes and nodes), and training graphs.

use crate::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, SparseTensorProto,
    TensorProto, TrainingInfoProto,
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

/// A tensor-by-tensor rewriter used by [`clone_model`].
type TensorFn<'f> = dyn FnMut(&TensorProto) -> TensorProto + 'f;

/// A copy of `m` in which every tensor is `f(original)`; every other field is cloned. The
/// structs are destructured exhaustively, so a field added to the schema fails to compile here
/// instead of being silently deep-copied.
pub(crate) fn clone_model(m: &ModelProto, f: &mut TensorFn<'_>) -> ModelProto {
    let ModelProto {
        ir_version,
        opset_import,
        producer_name,
        producer_version,
        domain,
        model_version,
        doc_string,
        graph,
        metadata_props,
        training_info,
        functions,
        configuration,
        unknown_fields,
    } = m;
    ModelProto {
        ir_version: *ir_version,
        opset_import: opset_import.clone(),
        producer_name: producer_name.clone(),
        producer_version: producer_version.clone(),
        domain: domain.clone(),
        model_version: *model_version,
        doc_string: doc_string.clone(),
        graph: graph.as_ref().map(|g| Box::new(clone_graph(g, f))),
        metadata_props: metadata_props.clone(),
        training_info: training_info.iter().map(|t| clone_training(t, f)).collect(),
        functions: functions.iter().map(|x| clone_function(x, f)).collect(),
        configuration: configuration.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_training(t: &TrainingInfoProto, f: &mut TensorFn<'_>) -> TrainingInfoProto {
    let TrainingInfoProto {
        initialization,
        algorithm,
        initialization_binding,
        update_binding,
        unknown_fields,
    } = t;
    TrainingInfoProto {
        initialization: initialization.as_ref().map(|g| Box::new(clone_graph(g, f))),
        algorithm: algorithm.as_ref().map(|g| Box::new(clone_graph(g, f))),
        initialization_binding: initialization_binding.clone(),
        update_binding: update_binding.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_function(x: &FunctionProto, f: &mut TensorFn<'_>) -> FunctionProto {
    let FunctionProto {
        name,
        input,
        output,
        attribute,
        attribute_proto,
        node,
        doc_string,
        opset_import,
        domain,
        overload,
        value_info,
        metadata_props,
        unknown_fields,
    } = x;
    FunctionProto {
        name: name.clone(),
        input: input.clone(),
        output: output.clone(),
        attribute: attribute.clone(),
        attribute_proto: attribute_proto.iter().map(|a| clone_attr(a, f)).collect(),
        node: node.iter().map(|n| clone_node(n, f)).collect(),
        doc_string: doc_string.clone(),
        opset_import: opset_import.clone(),
        domain: domain.clone(),
        overload: overload.clone(),
        value_info: value_info.clone(),
        metadata_props: metadata_props.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_graph(g: &GraphProto, f: &mut TensorFn<'_>) -> GraphProto {
    let GraphProto {
        node,
        name,
        initializer,
        sparse_initializer,
        doc_string,
        input,
        output,
        value_info,
        quantization_annotation,
        metadata_props,
        unknown_fields,
    } = g;
    // Field order of the visitor: nodes, then initializers, then sparse initializers.
    let node = node.iter().map(|n| clone_node(n, f)).collect();
    let initializer = initializer.iter().map(&mut *f).collect();
    let sparse_initializer = sparse_initializer
        .iter()
        .map(|s| clone_sparse(s, f))
        .collect();
    GraphProto {
        node,
        name: name.clone(),
        initializer,
        sparse_initializer,
        doc_string: doc_string.clone(),
        input: input.clone(),
        output: output.clone(),
        value_info: value_info.clone(),
        quantization_annotation: quantization_annotation.clone(),
        metadata_props: metadata_props.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_sparse(s: &SparseTensorProto, f: &mut TensorFn<'_>) -> SparseTensorProto {
    let SparseTensorProto {
        values,
        indices,
        dims,
        unknown_fields,
    } = s;
    SparseTensorProto {
        values: values.as_ref().map(|t| Box::new(f(t))),
        indices: indices.as_ref().map(|t| Box::new(f(t))),
        dims: dims.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_node(n: &NodeProto, f: &mut TensorFn<'_>) -> NodeProto {
    let NodeProto {
        input,
        output,
        name,
        op_type,
        domain,
        overload,
        attribute,
        doc_string,
        metadata_props,
        device_configurations,
        unknown_fields,
    } = n;
    NodeProto {
        input: input.clone(),
        output: output.clone(),
        name: name.clone(),
        op_type: op_type.clone(),
        domain: domain.clone(),
        overload: overload.clone(),
        attribute: attribute.iter().map(|a| clone_attr(a, f)).collect(),
        doc_string: doc_string.clone(),
        metadata_props: metadata_props.clone(),
        device_configurations: device_configurations.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

fn clone_attr(a: &AttributeProto, f: &mut TensorFn<'_>) -> AttributeProto {
    let AttributeProto {
        name,
        ref_attr_name,
        doc_string,
        r#type,
        f: float,
        i,
        s,
        t,
        g,
        sparse_tensor,
        tp,
        floats,
        ints,
        strings,
        tensors,
        graphs,
        sparse_tensors,
        type_protos,
        unknown_fields,
    } = a;
    // Visitor order: t, g, sparse_tensor, tensors, graphs, sparse_tensors.
    let t = t.as_ref().map(|t| Box::new(f(t)));
    let g = g
        .as_ref()
        .map(|g| Box::new(guard_stack(|| clone_graph(g, f))));
    let sparse_tensor = sparse_tensor.as_ref().map(|s| Box::new(clone_sparse(s, f)));
    let tensors = tensors.iter().map(&mut *f).collect();
    let graphs = graphs
        .iter()
        .map(|g| guard_stack(|| clone_graph(g, f)))
        .collect();
    let sparse_tensors = sparse_tensors.iter().map(|s| clone_sparse(s, f)).collect();
    AttributeProto {
        name: name.clone(),
        ref_attr_name: ref_attr_name.clone(),
        doc_string: doc_string.clone(),
        r#type: *r#type,
        f: *float,
        i: *i,
        s: s.clone(),
        t,
        g,
        sparse_tensor,
        tp: tp.clone(),
        floats: floats.clone(),
        ints: ints.clone(),
        strings: strings.clone(),
        tensors,
        graphs,
        sparse_tensors,
        type_protos: type_protos.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}

/// `t` without its payload: every field cloned except `raw_data`.
pub(crate) fn clone_without_payload(t: &TensorProto) -> TensorProto {
    let TensorProto {
        dims,
        data_type,
        segment,
        float_data,
        int32_data,
        string_data,
        int64_data,
        name,
        doc_string,
        raw_data: _,
        external_data,
        data_location,
        double_data,
        uint64_data,
        metadata_props,
        unknown_fields,
    } = t;
    TensorProto {
        dims: dims.clone(),
        data_type: *data_type,
        segment: segment.clone(),
        float_data: float_data.clone(),
        int32_data: int32_data.clone(),
        string_data: string_data.clone(),
        int64_data: int64_data.clone(),
        name: name.clone(),
        doc_string: doc_string.clone(),
        raw_data: None,
        external_data: external_data.clone(),
        data_location: *data_location,
        double_data: double_data.clone(),
        uint64_data: uint64_data.clone(),
        metadata_props: metadata_props.clone(),
        unknown_fields: unknown_fields.clone(),
    }
}
