//! The blocks a parse cuts repeated-field chunks and long strings from (docs/design.md,
//! "Metadata memory"): elements keep their address through any mutation, parts of a model
//! outlive it, and the blocks of a dropped model are taken back by the next parse instead of
//! growing the process. One test in this binary: the memory-reuse store is process-wide (and
//! the allocation counter is too).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use onnx_light::proto::{GraphProto, ModelProto, NodeProto};
use onnx_light::{
    Message, ParseOptions, memory_held_for_reuse, release_memory_held_for_reuse,
    set_memory_reuse_limit,
};

/// Counts the allocations of the global allocator.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

const NODES: usize = 30_000;

/// Node `i`: name, op type, input, output and two attributes (a float and an int list), so
/// that every node has a repeated message field of its own; its input and output names are
/// longer than a string holds inline, and its input is the previous node's output.
fn node(i: usize) -> NodeProto {
    let mut n = NodeProto::new();
    n.set_name(format!("/model/layers.{}/Op_{i}", i / 1000));
    n.set_op_type("LeakyRelu");
    n.input.push(
        format!(
            "/model/layers.{}/self_attn/act_{}",
            i / 1000,
            i.wrapping_sub(1)
        )
        .into(),
    );
    n.output
        .push(format!("/model/layers.{}/self_attn/act_{i}", i / 1000).into());
    let a = n.add_attribute();
    a.set_name("alpha");
    a.set_f(i as f32);
    let b = n.add_attribute();
    b.set_name("perm");
    b.ints.extend([i as i64, 1, 2]);
    n
}

fn model_bytes() -> Vec<u8> {
    let mut g = GraphProto::new();
    g.set_name("g");
    for i in 0..NODES {
        g.node.push(node(i));
    }
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    m.graph = Some(Box::new(g));
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
    m.graph.as_mut().expect("graph")
}

#[test]
fn parsed_chunks_keep_their_address_outlive_their_model_and_are_reused() {
    set_memory_reuse_limit(1 << 30);
    release_memory_held_for_reuse();
    let bytes = model_bytes();
    for threads in [1, 2] {
        // The long names are copied into the blocks too: a parse makes a few allocations, not
        // two per node.
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let mut m = parse(&bytes, threads);
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert!(
            allocations < NODES / 100,
            "{threads} threads: {allocations} allocations for {NODES} nodes"
        );
        let g = graph(&mut m);
        assert_eq!(g.node.len(), NODES);
        assert!(g.node.iter().enumerate().all(|(i, n)| *n == node(i)));
        assert!(g.node[9].output[0].len() > 30);
        // A node's input shares the copy of the previous node's output (equal strings read
        // shortly after one another), except across the blocks of the parse.
        let shared = (1..NODES)
            .filter(|&i| {
                let (out, input) = (&g.node[i - 1].output[0], &g.node[i].input[0]);
                std::ptr::eq(out.as_bytes().as_ptr(), input.as_bytes().as_ptr())
            })
            .count();
        assert!(
            shared > NODES * 9 / 10,
            "{threads} threads: {shared} shared"
        );

        // Addresses survive growth, removal and reordering of parsed fields.
        let kept: *const NodeProto = &g.node[7];
        let attr: *const _ = &g.node[7].attribute[1];
        for i in NODES..NODES + 5000 {
            g.node.push(node(i));
        }
        g.node[7].add_attribute().set_name("added");
        let removed = g.node.remove(3);
        g.node.swap(0, 100);
        assert!(std::ptr::eq(kept, &g.node[6]));
        assert!(std::ptr::eq(attr, &g.node[6].attribute[1]));
        assert_eq!(removed, node(3));

        // Parts taken out of the model outlive it (its blocks are not given back to the next
        // parse while they live), and stay mutable.
        let mut taken = std::mem::take(&mut g.node[500]);
        let moved_attrs = std::mem::take(&mut g.node[501].attribute);
        let long_name = std::mem::take(&mut g.node[502].output[0]);
        let cloned_name = g.node[503].input[0].clone();
        g.node[504].input[0].push_bytes(b"/more");
        // (Node 3 was removed above: `g.node[k]` is `node(k + 1)` from there on.)
        assert_eq!(
            g.node[504].input[0],
            *format!("{}/more", node(505).input[0])
        );
        // The output whose copy that input shared is unchanged.
        assert_eq!(g.node[503].output[0], node(504).output[0]);
        drop(m);
        let again = parse(&bytes, threads);
        assert_eq!(taken, node(501));
        assert_eq!(long_name, node(503).output[0]);
        assert_eq!(cloned_name, node(504).input[0]);
        assert_eq!(moved_attrs.len(), 2);
        assert_eq!(moved_attrs[1].ints.as_slice(), &[502, 1, 2]);
        taken.attribute.remove(0);
        taken.add_attribute().set_name("late");
        assert_eq!(taken.attribute[1].name(), "late");
        drop((taken, moved_attrs, removed, again, long_name, cloned_name));

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
}
