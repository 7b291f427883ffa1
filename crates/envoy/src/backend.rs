//! Where this filter's records are, decided in one place: the VM's shared data, asked
//! at once with the host's clock, or the store service, asked by callout
//! ([`crate::remote_store`], its answer coming to [`crate::dispatch`]). Every store operation —
//! a claim, a token's use, a finish, the sequencer's begin and settle — starts here.

use crate::host;
use crate::shared::Shared;
use crate::shared_store::{HostSharedData, SharedStore};
use idemgate_core::policy::StoreKind;
use idemgate_core::time::UnixMillis;

/// The store an operation goes to.
pub enum Backend {
    /// The VM's shared data, decided now, at `now`.
    Local {
        store: SharedStore<HostSharedData>,
        now: UnixMillis,
    },
    /// The store service: the operation is a callout.
    Remote,
}

/// The local store cannot be asked without knowing when: nothing is written (the caller says
/// what that means for its operation — never the epoch instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoClock;

/// The store the policy names; the host's clock is read for the local one only.
pub fn of(shared: &Shared) -> Result<Backend, NoClock> {
    if is_remote(shared) {
        return Ok(Backend::Remote);
    }
    let now = host::now().ok_or(NoClock)?;
    Ok(Backend::Local {
        store: shared.store(),
        now,
    })
}

/// Whether the policy keeps records in the remote store.
fn is_remote(shared: &Shared) -> bool {
    matches!(shared.policy.store, StoreKind::Remote { .. })
}
