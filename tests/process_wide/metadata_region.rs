//! The blocks a parse cuts repeated-field chunks, sub-message boxes and long strings from (docs/design.md,
//! "Metadata memory"): elements keep their address through any mutation, parts of a model
//! outlive it, and the blocks of a dropped model are taken back by the next parse instead of
//! growing the process. The test has the process to itself (and a step of it runs in a child
//! process): the memory-reuse store is process-wide (and the allocation counter is too).

use onnx_light::proto::{GraphProto, ModelProto, NodeProto, ValueInfoProto};
use onnx_light::{
    Message, ParseOptions, Repeated, memory_held_for_reuse, release_memory_held_for_reuse,
    set_memory_reuse_limit,
};

use crate::common;
use crate::heap;

const NODES: usize = 30_000;

/// Node `i`: name, op type, input, output and two attributes (a float and an int list), so
/// that every node has a repeated message field of its own; its input and output names are
/// longer than a string holds inline, and its input is the previous node's output.
fn node(i: usize) -> NodeProto {
    let mut n = NodeProto::new();
    n.set_name(format!("/model/layers.{}/Op_{i}", i / 1000));
    n.set_op_type("LeakyRelu");
    n.mutable_input().push(
        format!(
            "/model/layers.{}/self_attn/act_{}",
            i / 1000,
            i.wrapping_sub(1)
        )
        .into(),
    );
    if i % 7 == 0 {
        // Past the two inputs a node holds inline.
        n.mutable_input().extend(["scale".into(), "bias".into()]);
    }
    n.mutable_output()
        .push(format!("/model/layers.{}/self_attn/act_{i}", i / 1000).into());
    let a = n.add_attribute();
    a.set_name("alpha");
    a.set_f(i as f32);
    let b = n.add_attribute();
    b.set_name("perm");
    b.mutable_ints().extend([i as i64, 1, 2]);
    if i % 10 == 0 {
        // A boxed sub-message of its own: `ConstantOfShape`'s value.
        let t = n.add_attribute();
        t.set_name("value");
        t.mutable_t().mutable_dims().push(1);
        t.mutable_t().mutable_float_data().push(i as f32);
    }
    n
}

/// The `value_info` of node `i`'s output: three boxed sub-messages (`type`, `tensor_type`,
/// `shape`) and two dimensions.
fn value_info(i: usize) -> ValueInfoProto {
    let mut v = ValueInfoProto::new();
    v.set_name(format!("v{i}"));
    let t = v.mutable_type().mutable_tensor_type();
    t.set_elem_type(1);
    let shape = t.mutable_shape();
    shape.add_dim().set_dim_value(i as i64);
    shape.add_dim().set_dim_param("batch");
    v
}

fn model_bytes() -> Vec<u8> {
    let mut g = GraphProto::new();
    g.set_name("g");
    for i in 0..NODES {
        g.mutable_node().push(node(i));
        g.mutable_value_info().push(value_info(i));
    }
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.set_graph(g);
    m.serialize_to_vec()
}

fn parse(bytes: &[u8], threads: i32) -> ModelProto {
    let opts = ParseOptions {
        num_threads: threads,
        ..Default::default()
    };
    onnx_light::parse_from_bytes(bytes, &opts).expect("parse")
}

fn graph(m: &mut ModelProto) -> &mut GraphProto {
    m.mutable_graph()
}

#[test]
fn parsed_chunks_keep_their_address_outlive_their_model_and_are_reused() {
    let _alone = crate::alone();
    set_memory_reuse_limit(1 << 30);
    release_memory_held_for_reuse();
    let bytes = model_bytes();
    for threads in [1, 2] {
        // The long names and the sub-message boxes are cut from the blocks too: a parse makes
        // a few allocations, not two per node and three per value_info.
        let before = heap::allocations();
        let mut m = parse(&bytes, threads);
        let allocations = heap::allocations() - before;
        assert!(
            allocations < NODES / 100,
            "{threads} threads: {allocations} allocations for {NODES} nodes"
        );
        let g = graph(&mut m);
        assert_eq!(g.node().len(), NODES);
        assert!(g.node().iter().enumerate().all(|(i, n)| *n == node(i)));
        assert!(
            g.value_info()
                .iter()
                .enumerate()
                .all(|(i, v)| *v == value_info(i))
        );
        // Every sub-message box, and every list past its inline slots (a node's third input,
        // an attribute's ints), is cut from the blocks.
        let probe = onnx_light::codec::block_probe(g);
        assert!(
            probe.boxes > NODES && probe.spilled_lists > NODES,
            "{probe:?}"
        );
        assert_eq!(
            (probe.boxes_in_block, probe.lists_in_block),
            (probe.boxes, probe.spilled_lists),
            "{threads} threads"
        );
        assert!(g.node()[9].output()[0].len() > 30);
        // A node's input shares the copy of the previous node's output (equal strings read
        // shortly after one another), except across the blocks of the parse.
        let shared = (1..NODES)
            .filter(|&i| {
                let (out, input) = (&g.node()[i - 1].output()[0], &g.node()[i].input()[0]);
                std::ptr::eq(out.as_bytes().as_ptr(), input.as_bytes().as_ptr())
            })
            .count();
        assert!(
            shared > NODES * 9 / 10,
            "{threads} threads: {shared} shared"
        );

        // Addresses survive growth, removal and reordering of parsed fields.
        let kept: *const NodeProto = &g.node()[7];
        let attr: *const _ = &g.node()[7].attribute()[1];
        for i in NODES..NODES + 5000 {
            g.mutable_node().push(node(i));
        }
        g.mutable_node()[7].add_attribute().set_name("added");
        let removed = g.mutable_node().remove(3);
        g.mutable_node().swap(0, 100);
        assert!(std::ptr::eq(kept, &g.node()[6]));
        assert!(std::ptr::eq(attr, &g.node()[6].attribute()[1]));
        assert_eq!(removed, node(3));

        // Parts taken out of the model outlive it (its blocks are not given back to the next
        // parse while they live), and stay mutable.
        let mut taken = std::mem::take(&mut g.mutable_node()[500]);
        let moved_attrs = std::mem::take(g.mutable_node()[501].mutable_attribute());
        let long_name = std::mem::take(&mut g.mutable_node()[502].mutable_output()[0]);
        let taken_type = g.mutable_value_info()[700].take_type().unwrap();
        let taken_shape = g.mutable_value_info()[701]
            .mutable_type()
            .mutable_tensor_type()
            .take_shape()
            .unwrap();
        // A box made by a mutation replaces a parsed one.
        g.mutable_value_info()[702].set_type(value_info(7).type_opt().unwrap().clone());
        let mut unboxed = g.mutable_value_info()[703].take_type().unwrap();
        let cloned_name = g.node()[503].input()[0].clone();
        // A parsed list grown by a mutation.
        let ints = g.mutable_node()[505].mutable_attribute()[1].mutable_ints();
        ints.push(9);
        assert_eq!(ints[..], [506, 1, 2, 9]);
        g.mutable_node()[504].mutable_input()[0].push_bytes(b"/more");
        // (Node 3 was removed above: `g.node[k]` is `node(k + 1)` from there on.)
        assert_eq!(
            g.node()[504].input()[0],
            *format!("{}/more", node(505).input()[0])
        );
        // The output whose copy that input shared is unchanged.
        assert_eq!(g.node()[503].output()[0], node(504).output()[0]);
        drop(m);
        let again = parse(&bytes, threads);
        assert_eq!(taken, node(501));
        assert_eq!(long_name, node(503).output()[0]);
        assert_eq!(Some(&taken_type), value_info(700).type_opt());
        assert_eq!(taken_shape.dim()[0].dim_value(), 701);
        unboxed.mutable_tensor_type().set_elem_type(7);
        assert_eq!(unboxed.tensor_type().shape().dim()[1].dim_param(), "batch");
        assert_eq!(cloned_name, node(504).input()[0]);
        assert_eq!(moved_attrs.len(), 2);
        assert_eq!(moved_attrs[1].ints(), [502, 1, 2]);
        taken.mutable_attribute().remove(0);
        taken.add_attribute().set_name("late");
        assert_eq!(taken.attribute()[1].name(), "late");
        drop((taken, moved_attrs, removed, again, long_name, cloned_name));
        drop((taken_type, taken_shape, unboxed));

        // Dropped models give their blocks back; the next parses take them again, so the
        // memory kept does not grow with the number of parses.
        let held = memory_held_for_reuse();
        assert!(
            held > 0,
            "{threads} threads: the blocks of the dropped model are kept"
        );
        for round in 0..4 {
            let m = parse(&bytes, threads);
            assert!(
                memory_held_for_reuse() < held,
                "{threads} threads, round {round}"
            );
            drop(m);
            assert_eq!(
                memory_held_for_reuse(),
                held,
                "{threads} threads, round {round}"
            );
        }
        assert_eq!(release_memory_held_for_reuse(), held);
    }

    // With reuse off, nothing is kept.
    set_memory_reuse_limit(0);
    drop(parse(&bytes, 1));
    assert_eq!(memory_held_for_reuse(), 0);

    // With `ONNXL_METADATA_BLOCKS=0` (for memory checkers) every part is an allocation.
    let out = common::child_process(
        module_path!(),
        "child_process_blocks_off",
        "ONNXL_METADATA_BLOCKS",
        "0",
    )
    .output()
    .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Step of the test above, in a process of its own (the variable is read once).
#[test]
#[ignore]
fn child_process_blocks_off() {
    assert_eq!(common::child_spec("ONNXL_METADATA_BLOCKS"), "0");
    set_memory_reuse_limit(1 << 30);
    let bytes = model_bytes();
    let before = heap::allocations();
    let mut m = parse(&bytes, 1);
    let allocations = heap::allocations() - before;
    // Three boxes per value_info, a chunk per attribute list, two long names per node.
    assert!(allocations > NODES * 5, "{allocations} allocations");
    let g = graph(&mut m);
    // Nothing is in a block: the boxes and the spilled lists are on the heap.
    let probe = onnx_light::codec::block_probe(g);
    assert!(
        probe.boxes > NODES && probe.spilled_lists > NODES,
        "{probe:?}"
    );
    assert_eq!((probe.boxes_in_block, probe.lists_in_block), (0, 0));
    assert!(
        g.value_info()
            .iter()
            .enumerate()
            .all(|(i, v)| *v == value_info(i))
    );
    drop(m);
    assert_eq!(memory_held_for_reuse(), 0);
}
