//! Parallel parsing of a model's graph initializers: a quick scan finds every
//! `graph.initializer` element, rayon parses them, and the sequential decode picks the results
//! up in place, so the model is the same as a sequential parse (errors included).

use std::any::Any;
use std::collections::HashMap;

use crate::storage::par::prelude::*;

use super::ParseOptions;
use crate::error::DecodeError;
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
    let budget = r.metadata_budget() as u128;
    let readers: Vec<(usize, Reader<'_>)> = parts
        .iter()
        .map(|p| {
            let share = budget * (p.end - p.start) as u128 / total.max(1) as u128;
            let share = u64::try_from(share).unwrap_or(u64::MAX);
            (p.len_at, r.sub_reader(p.start, p.end, 2, share))
        })
        .collect();
    let parse = |(len_at, mut sub): (usize, Reader<'_>)| -> (usize, Box<dyn Any + Send>) {
        let mut t = TensorProto::new();
        let res: Result<TensorProto, Box<DecodeError>> = t.merge_from(&mut sub).map(|()| t);
        (len_at, Box::new((res, sub.metadata_used())))
    };
    let pool = thread_pool(opts.threads())?;
    #[cfg(feature = "test-hooks")]
    PARALLEL_PARSES.with(|n| n.set(n.get() + 1));
    let results: Vec<_> = pool.install(|| readers.into_par_iter().map(parse).collect());
    Some(results.into_iter().collect())
}
