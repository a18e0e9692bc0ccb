//! Patched (PATCHED.md): one budget, for the whole process, of the DATA that streams hold
//! beyond the window their connection advertised.
//!
//! A receiver that advertises a stream window smaller than HTTP/2's default (65,535 bytes)
//! must still take what a client sends before it acknowledges the setting (RFC 9113, 6.9.3):
//! until then a stream may be sent the default. So what a stream holds unread is bounded by
//! the advertised window only once the client has acknowledged it, and the excess before is
//! charged here, all connections together; a stream whose excess finds the budget spent is
//! reset (`ENHANCE_YOUR_CALM`). A server's memory is then its connections' advertised windows
//! and this budget, rather than every connection's default window.
//!
//! Process-wide because the servers that set the window build their h2 `Builder` inside
//! hyper, where nothing of theirs reaches. Only a connection advertising less than the
//! default can hold an excess, so a server advertising the default or more never draws on
//! it. Unlimited until [`set_limit`] is called.

use std::sync::atomic::{AtomicUsize, Ordering};

static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
static ALLOWANCE: AtomicUsize = AtomicUsize::new(usize::MAX);
static HELD: AtomicUsize = AtomicUsize::new(0);
static REFUSED: AtomicUsize = AtomicUsize::new(0);

/// Sets the budget (the last call wins; unlimited before the first).
pub(crate) fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

/// The budget as set, `usize::MAX` where it was not.
pub(crate) fn limit() -> usize {
    LIMIT.load(Ordering::Relaxed)
}

/// Sets what a stream of a connection advertising less than the default window holds of DATA
/// not taken before it draws on the budget, where that is less than the window it advertised
/// (the last call wins; the advertised window before the first).
pub(crate) fn set_allowance(bytes: usize) {
    ALLOWANCE.store(bytes, Ordering::Relaxed);
}

/// The allowance as set, `usize::MAX` (the advertised window) where it was not.
pub(crate) fn allowance() -> usize {
    ALLOWANCE.load(Ordering::Relaxed)
}

/// What a stream holds of DATA not taken before it draws on the budget, where its connection
/// advertised `advertised` (less than the protocol's default: otherwise it never does).
pub(crate) fn free_up_to(advertised: usize) -> usize {
    advertised.min(ALLOWANCE.load(Ordering::Relaxed))
}

/// What streams hold of it now.
pub(crate) fn held() -> usize {
    HELD.load(Ordering::Acquire)
}

/// How many frames the budget could not cover (each reset its stream), since the process began.
pub(crate) fn refused() -> usize {
    REFUSED.load(Ordering::Relaxed)
}

/// Bytes charged to the budget, given back when dropped.
#[derive(Debug, Default)]
pub(super) struct Charge {
    bytes: usize,
}

impl Charge {
    /// `bytes` more from the budget, or `None` where it cannot cover them.
    pub(super) fn take(bytes: usize) -> Option<Self> {
        if bytes == 0 {
            return Some(Charge::default());
        }
        let limit = limit();
        HELD.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
            held.checked_add(bytes).filter(|&after| after <= limit)
        })
        .map(|_| Charge { bytes })
        .map_err(|_| REFUSED.fetch_add(1, Ordering::Relaxed))
        .ok()
    }

    /// Joins `other` into this charge, to be given back with it.
    pub(super) fn absorb(&mut self, mut other: Charge) {
        self.bytes += std::mem::take(&mut other.bytes);
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes > 0 {
            HELD.fetch_sub(self.bytes, Ordering::AcqRel);
        }
    }
}
