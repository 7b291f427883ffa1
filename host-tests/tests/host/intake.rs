//! The core's request machine from its headers to its claim: for each route
//! shape, the request is decided by `guard::head` and its machine made by `Keyed::take`, then
//! every sequence of body inputs a host can hand it — a chunk charged and read, a chunk charged
//! but unreadable, a chunk read without being charged, the body's end, a store answer too early —
//! depth first. After every input a model that knows only the policy's limit and what was read
//! checks:
//!
//! - a chunk is taken in only when charged first: one that was not is said
//!   (`Warning::OutOfOrder`) and changes nothing;
//! - a body over `max_request_body` is answered 413 before it is read; an unreadable chunk 503;
//!   nothing else is answered before the body's end, and nothing is asked of the store;
//! - the body's end gives one outcome: the claim (with the fingerprint of exactly the bytes read,
//!   however they were cut, recomputed here from the headers and those bytes), an answer, or on
//!   unguarded; every input after it that the request does not wait for changes nothing;
//! - the hashing budget holds each kept copy of every charged byte while the body is taken in,
//!   then only the detached exchange's copy, and nothing once the request's actions are gone.
//!
//! The machine from the claim on is explored in `guard.rs`.

use idemgate_core::client::identity::{ScopeHashes, Unreadable};
use idemgate_core::events::Event;
use idemgate_core::guard::{self, Action, Ask, Guarded, Headed, Host, Reply, Warning};
use idemgate_core::policy::Policy;
use idemgate_core::record::OwnerToken;
use idemgate_core::request::budget::Budget;
use idemgate_core::request::fingerprint::FingerprintBuilder;
use idemgate_core::time::UnixMillis;
use idemgate_core::ClaimOutcome;
use std::rc::Rc;

type Machine = Guarded<u32, &'static str>;
type Act = Action<u32, &'static str>;

const OWNER: OwnerToken = OwnerToken([2; 16]);
/// The body's bytes, read in order: every chunk is the next bytes of it.
/// A JSON object with a key for the routes that read one, whole from its 11th byte (then
/// spaces): no read within the limit gets to its end, so a chunk is never short.
const BODY: &[u8] = br#"{"id":"k1"}                             "#;
const LIMIT: u64 = 12;

/// A host with one client and its own hashing budget.
struct Edge {
    budget: Rc<Budget>,
    relay: Rc<Budget>,
    scopes: ScopeHashes,
}

impl Host for Edge {
    fn property(&self, _path: &[&str]) -> Result<Option<Vec<u8>>, Unreadable> {
        Ok(Some(b"192.0.2.7:40000".to_vec()))
    }
    fn now(&self) -> Option<UnixMillis> {
        Some(UnixMillis(1_700_000_000_000))
    }
    fn nonce(&self) -> [u8; 16] {
        [9; 16]
    }
    fn owner(&self) -> OwnerToken {
        OWNER
    }
    fn scopes(&self) -> &ScopeHashes {
        &self.scopes
    }
    fn budget(&self) -> Rc<Budget> {
        Rc::clone(&self.budget)
    }
    fn relay_budget(&self) -> Rc<Budget> {
        Rc::clone(&self.relay)
    }
}

/// One route shape: its policy and the request's headers.
struct Shape {
    name: &'static str,
    policy: &'static str,
    /// The key comes with the headers (else with the body).
    header_key: bool,
    detached: bool,
}

const SHAPES: &[Shape] = &[
    Shape {
        name: "router, key in a header",
        policy: r#"{"max_request_body": 12, "fingerprint": {"mode": "raw"},
            "routes": [{"prefix": "/orders", "forward": "router"}]}"#,
        header_key: true,
        detached: false,
    },
    Shape {
        name: "detached, key in a header",
        policy: r#"{"max_request_body": 12, "fingerprint": {"mode": "raw"},
            "upstream": {"reentry": "routes"},
            "routes": [{"prefix": "/orders", "forward": "detached"}]}"#,
        header_key: true,
        detached: true,
    },
    Shape {
        name: "router, key in the body",
        policy: r#"{"max_request_body": 12, "fingerprint": {"mode": "raw"},
            "routes": [{"prefix": "/orders", "forward": "router", "key": "required",
                        "key_from": [{"json": "/id"}]}]}"#,
        header_key: false,
        detached: false,
    },
    Shape {
        name: "router, optional key in the body",
        policy: r#"{"max_request_body": 12, "fingerprint": {"mode": "raw"},
            "routes": [{"prefix": "/orders", "forward": "router", "key": "optional",
                        "key_from": [{"json": "/id"}]}]}"#,
        header_key: false,
        detached: false,
    },
];

/// What a host can hand the machine before its claim.
#[derive(Debug, Clone, Copy)]
enum Input {
    /// `body_wants(n)`, then the next `n` bytes if it may.
    Read(usize),
    /// `body_wants(3)`, then a chunk the host could not read.
    Unread,
    /// The next 3 bytes, read without `body_wants`.
    Bare,
    End,
    /// The store's answer to a claim.
    Claimed,
}

const INPUTS: &[Input] = &[
    Input::Read(3),
    Input::Read(5),
    Input::Unread,
    Input::Bare,
    Input::End,
    Input::Claimed,
];
const DEPTH: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Taking,
    /// The claim was asked.
    Claiming,
    /// Answered, passed, or the claim answered: over for this exploration.
    Over,
}

struct Run<'s> {
    shape: &'s Shape,
    policy: Policy,
    edge: Edge,
    machine: Machine,
    phase: Phase,
    /// Bytes charged (each charge, read or not) and bytes read.
    charged: u64,
    read: usize,
    copies: u64,
    /// Actions the exploration keeps, as a host would (a detached exchange's kept body).
    kept: Vec<Act>,
}

fn headers(shape: &Shape) -> Vec<(&'static str, &'static [u8])> {
    let mut headers = vec![
        (":method", &b"POST"[..]),
        (":path", b"/orders"),
        ("authorization", b"Bearer a"),
        ("content-type", b"application/json"),
    ];
    if shape.header_key {
        headers.push(("idempotency-key", b"\"k-1\""));
    }
    headers
}

impl<'s> Run<'s> {
    fn start(shape: &'s Shape) -> Run<'s> {
        let policy = Policy::from_json(shape.policy, &|_| None).unwrap();
        let edge = Edge {
            budget: Rc::new(Budget::default()),
            relay: Rc::new(Budget::default()),
            scopes: ScopeHashes::default(),
        };
        let headers = headers(shape);
        let (headed, events) = guard::head(&policy, headers.iter().copied(), true, &edge);
        assert_eq!(events.iter().count(), 0, "{}: {events:?}", shape.name);
        let Headed::Keyed(keyed) = headed else {
            panic!("{}: not keyed: {headed:?}", shape.name)
        };
        let mut asked = 0;
        let machine: Machine = keyed.take(&policy, |_| {
            asked += 1;
            "kept"
        });
        assert_eq!(asked, u32::from(shape.detached), "{}", shape.name);
        Run {
            shape,
            machine,
            edge,
            phase: Phase::Taking,
            charged: 0,
            read: 0,
            // The fingerprint's, a detached exchange's and a body key search's.
            copies: 1 + u64::from(shape.detached) + u64::from(!shape.header_key),
            kept: Vec::new(),
            policy,
        }
    }

    fn take(&mut self) -> (Vec<Act>, Vec<Event>) {
        let events = self.machine.events().iter().collect();
        (std::iter::from_fn(|| self.machine.poll()).collect(), events)
    }

    /// The fingerprint of exactly the bytes read, as a native host makes it.
    fn expected_fingerprint(&self) -> idemgate_core::request::fingerprint::Fingerprint {
        let headers = headers(self.shape);
        let spec = &self.policy.fingerprint;
        let mut builder = FingerprintBuilder::new(spec, "POST", "/orders", headers);
        builder.update(&BODY[..self.read]).unwrap();
        builder.finish().unwrap()
    }

    fn step(&mut self, input: Input, path: &[Input]) {
        let at = format!("{}: {path:?} then {input:?}", self.shape.name);
        let before = format!("{:?}", self.machine);
        let waits = match input {
            Input::Read(_) | Input::Unread | Input::Bare | Input::End => {
                self.phase == Phase::Taking
            }
            Input::Claimed => self.phase == Phase::Claiming,
        };
        let mut allowed = None;
        match input {
            Input::Read(n) => {
                let wants = self.machine.body_wants(n as u64);
                allowed = Some(wants);
                if wants {
                    let end = (self.read + n).min(BODY.len());
                    self.machine.body_chunk(Some(&BODY[self.read..end]));
                }
            }
            Input::Unread => {
                let wants = self.machine.body_wants(3);
                allowed = Some(wants);
                if wants {
                    self.machine.body_chunk(None);
                }
            }
            Input::Bare => {
                let end = (self.read + 3).min(BODY.len());
                self.machine.body_chunk(Some(&BODY[self.read..end]));
            }
            Input::End => self.machine.body_end(),
            Input::Claimed => {
                let forward = ClaimOutcome::Forward {
                    owner: OWNER,
                    takeover: false,
                };
                self.machine
                    .answered(Reply::Claim(Ok(forward)), &self.policy);
            }
        }
        let (actions, events) = self.take();
        let unchanged = |run: &Run| assert_eq!(before, format!("{:?}", run.machine), "{at}");
        if !waits || matches!(input, Input::Bare) {
            // Not awaited (or a chunk nothing was charged for): said, or (a body the request no
            // longer takes) simply not let in; nothing changes.
            assert_ne!(
                allowed,
                Some(true),
                "{at}: may read a body it does not take"
            );
            let said = matches!(actions[..], [Action::Warn(Warning::OutOfOrder(_))]);
            assert!(
                said || (actions.is_empty() && allowed == Some(false)),
                "{at}: {actions:?}"
            );
            assert!(events.is_empty(), "{at}: {events:?}");
            return unchanged(self);
        }
        let charge = match input {
            Input::Read(n) => n as u64,
            Input::Unread => 3,
            _ => 0,
        };
        match input {
            Input::Read(_) | Input::Unread if self.charged + charge > LIMIT => {
                assert_eq!(allowed, Some(false), "{at}: over the limit, yet read");
                assert!(
                    matches!(&actions[..], [Action::Answer(http)] if http.status == 413),
                    "{at}: {actions:?}"
                );
                assert_eq!(events, [Event::BodyTooLarge], "{at}");
                self.phase = Phase::Over;
            }
            Input::Read(n) => {
                assert_eq!(allowed, Some(true), "{at}");
                assert!(actions.is_empty() && events.is_empty(), "{at}: {actions:?}");
                self.charged += n as u64;
                self.read = (self.read + n).min(BODY.len());
            }
            Input::Unread => {
                assert_eq!(allowed, Some(true), "{at}");
                assert!(
                    matches!(&actions[..], [Action::Answer(http)] if http.status == 503),
                    "{at}: {actions:?}"
                );
                self.phase = Phase::Over;
            }
            Input::End => self.ended(actions, &at),
            Input::Claimed => {
                assert_eq!(events, [Event::Claimed], "{at}");
                match &actions[..] {
                    [Action::Forward] => assert!(!self.shape.detached, "{at}"),
                    [Action::Detach { held, .. }] => {
                        assert!(self.shape.detached, "{at}");
                        assert_eq!(held.body, &BODY[..self.read], "{at}: the exchange's body");
                    }
                    other => panic!("{at}: {other:?}"),
                }
                if self.shape.detached {
                    self.kept.extend(actions);
                }
                self.phase = Phase::Over;
            }
            Input::Bare => unreachable!(),
        }
        self.check_budget(&at);
    }

    /// The body's end: one outcome.
    fn ended(&mut self, actions: Vec<Act>, at: &str) {
        match &actions[..] {
            [Action::Ask(Ask::Claim(claim))] => {
                assert_eq!(claim.owner, OWNER, "{at}");
                assert_eq!(
                    claim.fingerprint,
                    self.expected_fingerprint(),
                    "{at}: the fingerprint of exactly the bytes read"
                );
                self.phase = Phase::Claiming;
            }
            // A key the body does not hold, or does not hold whole (a JSON cut short).
            [Action::Answer(http)] => {
                assert!(!self.shape.header_key, "{at}: {http:?}");
                assert_eq!(http.status, 400, "{at}");
                self.phase = Phase::Over;
            }
            [Action::Pass] => {
                assert!(!self.shape.header_key, "{at}");
                self.phase = Phase::Over;
            }
            other => panic!("{at}: {other:?}"),
        }
    }

    fn check_budget(&self, at: &str) {
        let used = self.edge.budget.used();
        match self.phase {
            Phase::Taking => assert_eq!(used, self.charged * self.copies, "{at}"),
            Phase::Claiming if self.shape.detached => {
                assert_eq!(used, self.read as u64, "{at}: the exchange's copy only")
            }
            Phase::Claiming => assert_eq!(used, 0, "{at}"),
            // A detached exchange's copy rides in the kept action until it is sent.
            Phase::Over if !self.kept.is_empty() => assert_eq!(used, self.read as u64, "{at}"),
            Phase::Over => assert_eq!(used, 0, "{at}"),
        }
    }
}

/// Explores every path of `DEPTH` inputs for one shape; gives how many it walked.
fn explore(shape: &Shape) -> usize {
    let mut paths = 0;
    let mut stack: Vec<Vec<Input>> = vec![Vec::new()];
    while let Some(path) = stack.pop() {
        if path.len() == DEPTH {
            paths += 1;
            let mut run = Run::start(shape);
            for (i, input) in path.iter().enumerate() {
                run.step(*input, &path[..i]);
            }
            let budget = Rc::clone(&run.edge.budget);
            drop(run);
            assert_eq!(
                budget.used(),
                0,
                "{}: {path:?}: a byte still reserved",
                shape.name
            );
            continue;
        }
        for input in INPUTS {
            let mut next = path.clone();
            next.push(*input);
            stack.push(next);
        }
    }
    paths
}

#[test]
fn every_body_input_order_keeps_the_intakes_promises() {
    let mut total = 0;
    for shape in SHAPES {
        total += explore(shape);
    }
    assert_eq!(total, SHAPES.len() * INPUTS.len().pow(DEPTH as u32));
}
