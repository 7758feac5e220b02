//! Memory for request bodies: one budget shared by every connection, charged by the
//! capacity of each body buffer while it lives, so that parallel uploads cannot add up to
//! more than [`BenchServerConfig::body_budget`](super::BenchServerConfig::body_budget).

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The shared budget, with its high-water mark for tests.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
}

impl Budget {
    pub(crate) fn new(limit: usize) -> Budget {
        Budget {
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Takes `n` bytes if they fit.
    fn take(&self, n: usize) -> bool {
        let taken = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(n).filter(|&total| total <= self.limit)
            });
        match taken {
            Ok(before) => {
                self.peak.fetch_max(before + n, Ordering::SeqCst);
                true
            }
            Err(_) => false,
        }
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::SeqCst);
    }

    /// Bytes charged now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// The most bytes ever charged at once.
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// Why a body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Over the per-request limit: 413.
    TooLarge,
    /// Over the shared budget: 503.
    OverBudget,
}

/// A request body whose buffer is charged to the budget until it is dropped.
#[derive(Debug)]
pub(crate) struct Body {
    bytes: Vec<u8>,
    charged: usize,
    expected: Option<usize>,
    budget: Arc<Budget>,
}

impl Body {
    /// An empty body (charges nothing).
    pub(crate) fn new(budget: &Arc<Budget>) -> Body {
        Body {
            bytes: Vec::new(),
            charged: 0,
            expected: None,
            budget: Arc::clone(budget),
        }
    }

    /// Announces the size of the whole body (a Content-Length): it must be within `max`,
    /// and the buffer never grows past it. Nothing is charged yet: the buffer grows as
    /// bytes arrive, so a client that announces a big body and trickles it holds little.
    pub(crate) fn expect_total(&mut self, total: usize, max: usize) -> Result<(), Refusal> {
        if total > max {
            return Err(Refusal::TooLarge);
        }
        self.expected = Some(total);
        Ok(())
    }

    /// Appends `data`, growing the buffer (doubling, up to `max` or the announced size)
    /// within the budget.
    pub(crate) fn extend(&mut self, data: &[u8], max: usize) -> Result<(), Refusal> {
        let needed = self
            .bytes
            .len()
            .checked_add(data.len())
            .filter(|&n| n <= max)
            .ok_or(Refusal::TooLarge)?;
        if needed > self.charged {
            let ceiling = self.expected.unwrap_or(max).max(needed);
            let doubled = self.charged.saturating_mul(2).max(4096).min(ceiling);
            self.grow_to(needed.max(doubled))?;
        }
        self.bytes.extend_from_slice(data);
        Ok(())
    }

    fn grow_to(&mut self, capacity: usize) -> Result<(), Refusal> {
        let more = capacity.saturating_sub(self.charged);
        if more == 0 {
            return Ok(());
        }
        if !self.budget.take(more) {
            return Err(Refusal::OverBudget);
        }
        self.charged = capacity;
        self.bytes
            .reserve_exact(capacity.saturating_sub(self.bytes.len()));
        Ok(())
    }
}

impl Deref for Body {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        self.budget.give(self.charged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_share_the_budget_and_give_it_back() {
        let budget = Arc::new(Budget::new(10_000));
        let mut a = Body::new(&budget);
        a.expect_total(6000, 8000).unwrap();
        assert_eq!(budget.used(), 0);
        a.extend(&[1; 6000], 8000).unwrap();
        assert_eq!(budget.used(), 6000);
        assert_eq!(a.expect_total(9000, 8000), Err(Refusal::TooLarge));
        let mut b = Body::new(&budget);
        assert_eq!(b.extend(&[2; 5000], 8000), Err(Refusal::OverBudget));
        assert_eq!(a.extend(&[1; 3000], 8000), Err(Refusal::TooLarge));
        assert_eq!(budget.peak(), 6000);
        drop(a);
        assert_eq!(budget.used(), 0);
        b.extend(&[2; 5000], 8000).unwrap();
        assert_eq!(&b[..2], &[2, 2]);
        assert_eq!(budget.used(), 5000);
    }
}
