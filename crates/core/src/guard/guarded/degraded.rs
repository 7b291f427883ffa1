//! Whether a request let on went unprotected because its store could not decide: the host
//! marks its answer (the core says with what) and counts it apart from a request without a key.

use super::Guarded;
use crate::answer::Degraded;

impl<O, H> Guarded<O, H> {
    /// Why the request the machine let on ([`super::Action::Pass`]) is degraded: `None` for one
    /// passed for lack of a key (or a route's `pass_through` rule), which nobody asked to guard.
    /// The upstream's answer gets [`Degraded::header`]; read it when `Pass` is taken.
    pub fn degraded(&self) -> Option<Degraded> {
        self.degraded
    }
}
