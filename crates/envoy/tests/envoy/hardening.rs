//! Hardening: ways in found by reading the filter as an attacker would. Each test here reproduced
//! its finding against the code before the fix (the failing output is in the commit that added
//! it) and guards the fix now. SECURITY.md names each one next to its threat.

use std::net::Ipv4Addr;

const ALICE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const BOB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

mod budget;
mod paths;
mod scopes;
mod store;
mod tokens;
