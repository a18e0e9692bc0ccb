//! The log lines a test's tasks write: a test on tokio's current-thread runtime runs every task
//! on its own thread, so a thread-local subscriber sees them all.

use std::sync::{Arc, Mutex, PoisonError};

/// Log lines written to a shared buffer.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Captures this thread's logs (DEBUG and up) until the guard is dropped.
    pub fn start(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// The lines captured so far that contain every one of `texts`.
    pub fn lines_with(&self, texts: &[&str]) -> Vec<String> {
        let logs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&logs)
            .lines()
            .filter(|line| texts.iter().all(|text| line.contains(text)))
            .map(str::to_owned)
            .collect()
    }
}
