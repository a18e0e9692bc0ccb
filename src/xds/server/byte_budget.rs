//! A byte budget that many holders share: each holds a [`Charge`] of it, resized as what it
//! keeps grows or shrinks, and given back when dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Clone, Debug)]
pub(crate) struct ByteBudget {
    used: Arc<AtomicUsize>,
    limit: usize,
}

impl ByteBudget {
    pub fn new(limit: usize) -> Self {
        Self { used: Arc::new(AtomicUsize::new(0)), limit }
    }

    /// An empty charge, for a new holder.
    pub fn charge(&self) -> Charge {
        Charge { budget: self.clone(), bytes: 0 }
    }

    /// What the holders hold now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

/// What one holder takes of a [`ByteBudget`].
#[derive(Debug)]
pub(crate) struct Charge {
    budget: ByteBudget,
    bytes: usize,
}

impl Charge {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn limit(&self) -> usize {
        self.budget.limit
    }

    /// Resizes the charge to `bytes` if what the other holders hold leaves room; `false`, and
    /// the charge unchanged, if not. Shrinking always succeeds.
    pub fn resize(&mut self, bytes: usize) -> bool {
        if bytes <= self.bytes {
            self.budget.used.fetch_sub(self.bytes - bytes, Ordering::Relaxed);
            self.bytes = bytes;
            return true;
        }
        let (grow, limit) = (bytes - self.bytes, self.budget.limit);
        let taken = self
            .budget
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(grow).filter(|total| *total <= limit)
            })
            .is_ok();
        if taken {
            self.bytes = bytes;
        }
        taken
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_share_the_limit_and_give_back_what_they_drop_or_shrink() {
        let budget = ByteBudget::new(100);
        let (mut first, mut second) = (budget.charge(), budget.charge());
        assert!(first.resize(60));
        assert!(!second.resize(41), "over the limit with the first's 60");
        assert_eq!((second.bytes(), budget.used()), (0, 60), "a refused charge takes nothing");
        assert!(second.resize(40));
        assert!(first.resize(10));
        assert_eq!(budget.used(), 50);
        drop(second);
        assert_eq!(budget.used(), 10);
        drop(first);
        assert_eq!(budget.used(), 0);
    }
}
