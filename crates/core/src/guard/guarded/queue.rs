//! The machine's outbox: the actions and events one input gave, taken one at a time.

use super::{Action, Events};

/// The actions an input gave, taken in order by [`Guarded::poll`]. An action the request waits on
/// ([`Action::Ask`], [`Action::Sequence`], [`Action::Detach`]) is always the last of its input's:
/// its answer is the next input. No input gives more than four.
#[derive(Debug)]
pub(super) struct Queue<O, H> {
    pub(super) actions: [Option<Action<O, H>>; 4],
    /// The next to take, and how many were given since the queue was last empty.
    pub(super) next: u8,
    pub(super) given: u8,
    pub(super) events: Events,
    /// More actions or events were given than the queue holds (never, by the paths the machine
    /// has: host-tests' `guard` exploration checks [`Guarded::is_whole`] after every input).
    pub(super) overflow: bool,
}

impl<O, H> Queue<O, H> {
    pub(super) fn push(&mut self, action: Action<O, H>) {
        if self.next == self.given {
            // All taken (the host hands in an answer while it carries out the last action).
            (self.next, self.given) = (0, 0);
        }
        match self.actions.get_mut(usize::from(self.given)) {
            Some(slot) => {
                *slot = Some(action);
                self.given += 1;
            }
            None => self.overflow = true,
        }
    }

    pub(super) fn count(&mut self, events: Events) {
        for event in events.iter() {
            match self.events.with(event) {
                Some(more) => self.events = more,
                None => self.overflow = true,
            }
        }
    }

    /// The next action; when none is left the queue starts over empty.
    pub(super) fn pop(&mut self) -> Option<Action<O, H>> {
        if self.next >= self.given {
            (self.next, self.given) = (0, 0);
            return None;
        }
        let action = self.actions.get_mut(usize::from(self.next))?.take();
        self.next += 1;
        action
    }
}
