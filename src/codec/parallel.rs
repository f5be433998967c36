//! Parallel parsing of a model's graph initializers: a quick scan finds every
//! `graph.initializer` element, rayon parses them, and the sequential decode picks the results
//! up in place, so the model is the same as a sequential parse (errors included).

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::storage::par::prelude::*;

use super::ParseOptions;
use crate::error::{DecodeError, try_box};
use crate::proto::{Message, TensorProto};
use crate::storage::thread_pool;
use crate::wire::{LEN, Reader, tag};

const MODEL_GRAPH: u32 = tag(7, LEN);
const GRAPH_INITIALIZER: u32 = tag(5, LEN);

#[cfg(feature = "test-hooks")]
thread_local! {
    /// Parses this thread started on the parallel path (a test hook, per thread so that tests
    /// running at the same time do not count each other's).
    pub(crate) static PARALLEL_PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One initializer found by the scan.
struct Part {
    /// Position of the length prefix (just after the tag).
    len_at: usize,
    start: usize,
    end: usize,
}

/// Scans the top level of a model for graph fields and their initializers. Returns `None` when
/// the bytes do not scan cleanly (the sequential decode then reports the error).
fn scan(r: &Reader<'_>) -> Option<Vec<Part>> {
    let input = r.input();
    let mut top = r.sub_reader(r.position(), input.len(), 0, u64::MAX);
    let mut parts = Vec::new();
    while let Some(t) = top.read_tag().ok()? {
        if t == MODEL_GRAPH {
            let body = top.read_bytes().ok()?;
            let start = body.as_ptr() as usize - input.as_ptr() as usize;
            let mut g = top.sub_reader(start, start + body.len(), 1, u64::MAX);
            while let Some(gt) = g.read_tag().ok()? {
                if gt == GRAPH_INITIALIZER {
                    let len_at = g.position();
                    let t_body = g.read_bytes().ok()?;
                    let s = t_body.as_ptr() as usize - input.as_ptr() as usize;
                    parts.try_reserve(1).ok()?;
                    parts.push(Part {
                        len_at,
                        start: s,
                        end: s + t_body.len(),
                    });
                } else {
                    g.skip_value(gt).ok()?;
                }
            }
        } else {
            top.skip_value(t).ok()?;
        }
    }
    Some(parts)
}

/// Parses every initializer of the model in `r` in parallel; the map is keyed by the position
/// of each element's length prefix, as [`Reader::take_preparsed`] expects.
pub(super) fn preparse_initializers(
    r: &Reader<'_>,
    opts: &ParseOptions,
) -> Option<HashMap<usize, Box<dyn Any + Send>>> {
    // Initializers can only reach `min_parallel_block_size` in an input at least that long: a
    // smaller model is not scanned at all (a fixed cost that showed in parses of small models).
    let input_left = (r.input().len() - r.position()) as u64;
    if opts.max_recursion_depth < 2 || input_left < opts.min_parallel_block_size {
        return None;
    }
    let parts = scan(r)?;
    let total: u64 = parts.iter().map(|p| (p.end - p.start) as u64).sum();
    if parts.len() < 2 || total < opts.min_parallel_block_size {
        return None;
    }
    // Each part gets a share of the metadata budget in proportion to its size (the shares sum
    // to the budget); the sequential decode charges what each part used (see
    // `Reader::take_preparsed`).
    //
    // Everything here is sized by the input and allocated fallibly: when memory runs out, a part
    // (or the whole) is left to the sequential decode, which reports it as an error.
    let budget = r.metadata_budget() as u128;
    let mut readers: Vec<(usize, Reader<'_>)> = Vec::new();
    readers.try_reserve_exact(parts.len()).ok()?;
    for p in &parts {
        let share = budget * (p.end - p.start) as u128 / total.max(1) as u128;
        let share = u64::try_from(share).unwrap_or(u64::MAX);
        readers.push((p.len_at, r.sub_reader(p.start, p.end, 2, share)));
    }
    let mut map: HashMap<usize, Box<dyn Any + Send>> = HashMap::new();
    map.try_reserve(parts.len()).ok()?;
    drop(parts);
    // After a failure the other parts are left to the sequential decode, which stops at the
    // first error (errors pile up no further when memory has run out).
    let failed = AtomicBool::new(false);
    let parse = |(len_at, mut sub): (usize, Reader<'_>)| {
        if failed.load(Ordering::Relaxed) {
            return None;
        }
        let mut t = TensorProto::new();
        let res: Result<TensorProto, Box<DecodeError>> = t.merge_from(&mut sub).map(|()| t);
        if res.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        let boxed = try_box((res, sub.metadata_used())).ok()?;
        Some((len_at, boxed as Box<dyn Any + Send>))
    };
    let pool = thread_pool(opts.threads())?;
    #[cfg(feature = "test-hooks")]
    PARALLEL_PARSES.with(|n| n.set(n.get() + 1));
    let mut results = Vec::new();
    results.try_reserve_exact(readers.len()).ok()?;
    pool.install(|| {
        readers
            .into_par_iter()
            .map(parse)
            .collect_into_vec(&mut results)
    });
    map.extend(results.into_iter().flatten());
    Some(map)
}
