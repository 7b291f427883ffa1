//! The core's request machine (`idemgate_core::guard::Guarded`) under every
//! order of inputs a host can hand it: for each route shape (kind, ordered events, one-time token,
//! detached, failure modes), every sequence of store answers, ordering decisions, sends, upstream
//! heads, body chunks, ends and clock failures, depth first. An input the request does not wait
//! for must be said (`Warning::OutOfOrder`) and change nothing; after every input the actions so
//! far must keep the request's promises, checked by a model that watches only the actions:
//!
//! - its fate is decided once: one answer, or one of forward / pass / detach (an answer after a
//!   detach only if the exchange never went out);
//! - it goes out only as the owner of a won claim, after its event was let on and its token used;
//!   it passes only without a claim, after its token was used;
//! - a won claim is finished at most once, released if the request never went out, and (at the
//!   end of every path) finished or handed to its exchange; a callback route keeps only a 2xx;
//! - the resource claim the sequencer gave is settled once, as applied only by a 2xx answer
//!   that came to its end, or handed to the exchange; when the outcome is in doubt (sent with
//!   nothing to hear its answer, or an answer that never came whole) it is never given back but
//!   left to its lease with the key's claim.

use idemgate_core::policy::{FailureMode, RouteKind};
use inputs::{Input, Shape, INPUTS};
use run::Run;

mod inputs;
mod promises;
mod run;

/// Depth-first over every awaited input at every step; returns the paths explored to their end.
fn explore(shape: Shape, path: &mut Vec<Input>, ends: &mut usize) {
    let mut run = Run::start(shape);
    for (i, input) in path.iter().enumerate() {
        assert!(
            run.step(*input, &path[..i]),
            "a replayed path is deterministic"
        );
    }
    let mut any = false;
    for input in INPUTS {
        let mut probe = Run::start(shape);
        for input in path.iter() {
            probe.step(*input, &[]);
        }
        if matches!(input, Input::Chunk(_)) && probe.seen.chunks >= 2 {
            continue;
        }
        if probe.step(*input, path) {
            any = true;
            path.push(*input);
            explore(shape, path, ends);
            path.pop();
        }
    }
    if !any {
        run.check_end(path);
        *ends += 1;
    }
}

#[test]
fn every_order_of_inputs_keeps_the_requests_promises() {
    let mut shapes = Vec::new();
    for token in [false, true] {
        shapes.push(Shape {
            keyed: false,
            kind: RouteKind::Api,
            ordered: false,
            token,
            detached: false,
            failure: FailureMode::Reject,
        });
        for kind in [RouteKind::Api, RouteKind::Callback] {
            for ordered in [false, true] {
                for detached in [false, true] {
                    for failure in [FailureMode::Reject, FailureMode::PassThrough] {
                        shapes.push(Shape {
                            keyed: true,
                            kind,
                            ordered,
                            token,
                            detached,
                            failure,
                        });
                    }
                }
            }
        }
    }
    let mut ends = 0;
    for shape in &shapes {
        explore(*shape, &mut Vec::new(), &mut ends);
    }
    // Every shape has many ends: a path per store outcome at least.
    assert!(ends > shapes.len() * 8, "{ends} paths explored");
    eprintln!(
        "{} shapes, {ends} paths explored to their end",
        shapes.len()
    );
}
