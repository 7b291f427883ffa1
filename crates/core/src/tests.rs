//! The core's rules tried through their inner types, as a host would drive them and beyond: the
//! remote and local stores' protocols, shares under pressure, late deliveries, state tables,
//! retries, tokens, defaults and properties. Tests of what hosts see from outside are in
//! `crates/core/tests` (every vector, the floors); these need what only the core can name, so
//! they live inside it (as quinn-proto's `src/tests`), and the API stays what hosts use.

mod defaults;
mod edge;
mod forward;
mod hardening;
mod key_policy;
mod late_delivery;
mod memory;
mod properties;
mod remote;
mod retry;
mod route_shares;
mod shares;
mod store_config;
mod token;
mod transition;
mod waiting;
