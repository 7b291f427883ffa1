//! A duplicate parked until the first's answer ([`guard::Action::Park`]): held in the VM's
//! [`idemgate_core::guard::Waiters`] (bounded there; over a bound it is answered 409), woken by
//! [`crate::dispatch`] when its key is announced ([`crate::waking`]) and on every tick, and let
//! out of the table once it waits no more — answered, forwarded, or its client gone.

use super::*;

impl Filter {
    /// Carries out [`guard::Action::Park`] for `key`: the machine is told whether there was room.
    pub(super) fn park(&mut self, machine: &mut Machine, key: StorageKey, payer: Option<PayerTag>) {
        let now = host::now();
        let admitted = now.is_some()
            && self
                .shared
                .waiters
                .try_borrow_mut()
                .is_ok_and(|mut waiters| waiters.admit(key, payer, self.context_id));
        if admitted {
            self.parked = Some(key);
            self.debug(&key, "in flight: waits for its answer");
            // Its questions are paced by the tick: quickened while streams wait (the root
            // slows it again once none does).
            crate::root::quicken_tick(&self.shared);
        }
        // Without a clock it cannot have a deadline: 409 now, as without waiting.
        machine.parked(admitted, now.unwrap_or(UnixMillis(0)));
    }

    /// Leaves the waiters' table if the stream is in it and no longer waits.
    pub(super) fn unpark_unless(&mut self, waiting: bool) {
        if waiting {
            return;
        }
        if let Some(key) = self.parked.take() {
            if let Ok(mut waiters) = self.shared.waiters.try_borrow_mut() {
                waiters.leave(key, self.context_id);
            }
        }
    }

    /// Wakes a parked request at `now` (this stream made the effective context): its key's
    /// record was announced (`announced`), or the tick came. It asks the store again, or gives up
    /// at its deadline; a request that goes on is resumed.
    pub fn wake(&mut self, now: UnixMillis, announced: bool) {
        let parked =
            matches!(&self.stage, Stage::Guarded { machine, call: None } if machine.is_waiting());
        if !parked {
            return;
        }
        let Some(mut machine) = self.take_machine() else {
            return;
        };
        if announced {
            machine.wake(now);
        } else {
            machine.tick(now);
        }
        let action = self.run(machine);
        self.resume(action);
    }
}
