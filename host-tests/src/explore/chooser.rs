//! Who decides the next step: a depth-first enumerator (every schedule, one run each) or a seeded
//! random sampler (for spaces too large to enumerate; the seed reproduces a run).

use crate::envoy::entropy::Entropy;

pub trait Chooser {
    /// Picks one of `options` (never empty), which are in a stable order.
    fn choose(&mut self, options: &[String]) -> usize;
}

/// Replays a prefix of choices, then takes the first option; remembers every (choice, options)
/// so the next schedule in depth-first order can be derived.
#[derive(Debug, Default)]
pub struct DepthFirst {
    prefix: Vec<usize>,
    pub taken: Vec<(usize, usize)>,
}

impl DepthFirst {
    pub fn new(prefix: Vec<usize>) -> Self {
        DepthFirst {
            prefix,
            taken: Vec::new(),
        }
    }

    /// The prefix of the next schedule after this run's, or `None` when every schedule was run.
    pub fn next_prefix(&self) -> Option<Vec<usize>> {
        let mut taken = self.taken.clone();
        while let Some((choice, options)) = taken.pop() {
            if choice + 1 < options {
                let mut prefix: Vec<usize> = taken.iter().map(|(c, _)| *c).collect();
                prefix.push(choice + 1);
                return Some(prefix);
            }
        }
        None
    }
}

impl Chooser for DepthFirst {
    fn choose(&mut self, options: &[String]) -> usize {
        let step = self.taken.len();
        let choice = self
            .prefix
            .get(step)
            .copied()
            .unwrap_or(0)
            .min(options.len().saturating_sub(1));
        self.taken.push((choice, options.len()));
        choice
    }
}

/// Uniformly random among the options, from a seed.
#[derive(Debug)]
pub struct Seeded {
    entropy: Entropy,
}

impl Seeded {
    pub fn new(seed: u64) -> Self {
        Seeded {
            entropy: Entropy::seeded(seed),
        }
    }
}

impl Chooser for Seeded {
    fn choose(&mut self, options: &[String]) -> usize {
        self.entropy.below(options.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two actors of two steps each, as the explorer sees them: options are the actors with steps
    /// left. Depth-first must visit each of the C(4,2) = 6 interleavings exactly once.
    #[test]
    fn depth_first_visits_every_interleaving_once() {
        let mut seen = std::collections::BTreeSet::new();
        let mut prefix = Vec::new();
        loop {
            let mut chooser = DepthFirst::new(prefix);
            let mut left = [2, 2];
            let mut order = String::new();
            while left.iter().any(|n| *n > 0) {
                let options: Vec<usize> = (0..2).filter(|a| left[*a] > 0).collect();
                let labels: Vec<String> = options.iter().map(|a| a.to_string()).collect();
                let actor = options[chooser.choose(&labels)];
                left[actor] -= 1;
                order.push_str(&actor.to_string());
            }
            assert!(seen.insert(order));
            match chooser.next_prefix() {
                Some(next) => prefix = next,
                None => break,
            }
        }
        assert_eq!(seen.len(), 6);
    }

    #[test]
    fn seeded_choices_repeat() {
        let options: Vec<String> = (0..5).map(|i| i.to_string()).collect();
        let draw = |seed| {
            let mut chooser = Seeded::new(seed);
            (0..20)
                .map(|_| chooser.choose(&options))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }
}
