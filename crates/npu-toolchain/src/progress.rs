//! What a person sees while a compile runs.
//!
//! A compile that takes longer than a second shows one live status line on stderr when stderr
//! is a terminal (`[triton-npu] compiling add_kernel: aircc 12.3 s`), and plain
//! `tracing::info!` lines otherwise (a log file or CI output should not fill with `\r`).

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use npu_process::Observer;

/// Quiet period before anything is shown.
const GRACE: Duration = Duration::from_secs(1);
/// How often the terminal line is redrawn.
const REDRAW: Duration = Duration::from_millis(100);
/// How often a still-running step is logged when stderr is not a terminal.
const STILL_RUNNING: Duration = Duration::from_secs(30);

/// Serialises drawing: concurrent compiles share one terminal line (the latest wins).
static LINE: Mutex<()> = Mutex::new(());

pub(crate) struct Progress {
    kernel: String,
    started: Instant,
    step: String,
    step_logged: bool,
    terminal: bool,
    drawn: bool,
    last_draw: Instant,
    last_log: Instant,
}

impl Progress {
    pub fn new(kernel: &str) -> Progress {
        let now = Instant::now();
        Progress {
            kernel: kernel.to_owned(),
            started: now,
            step: String::new(),
            step_logged: false,
            terminal: std::io::stderr().is_terminal(),
            drawn: false,
            last_draw: now,
            last_log: now,
        }
    }

    /// A new step begins.
    pub fn step(&mut self, step: &str) {
        self.step = step.to_owned();
        self.step_logged = false;
        tracing::debug!(kernel = %self.kernel, step, "compile step");
        self.tick();
    }

    /// Called while a step runs.
    pub fn tick(&mut self) {
        let elapsed = self.started.elapsed();
        if elapsed < GRACE {
            return;
        }
        if self.terminal {
            if !self.drawn || self.last_draw.elapsed() >= REDRAW {
                self.draw(elapsed);
            }
        } else if !self.step_logged || self.last_log.elapsed() >= STILL_RUNNING {
            tracing::info!(
                kernel = %self.kernel,
                step = %self.step,
                elapsed_s = elapsed.as_secs_f64(),
                "compiling {}: {} ({:.1} s so far)",
                self.kernel,
                self.step,
                elapsed.as_secs_f64()
            );
            self.step_logged = true;
            self.last_log = Instant::now();
        }
    }

    fn draw(&mut self, elapsed: Duration) {
        let _guard = LINE.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K[triton-npu] compiling {}: {} {:.1} s",
            self.kernel,
            self.step,
            elapsed.as_secs_f64()
        );
        let _ = err.flush();
        self.drawn = true;
        self.last_draw = Instant::now();
    }

    /// Removes the status line so other output starts on a clean line.
    fn clear(&mut self) {
        if self.drawn {
            let _guard = LINE.lock().unwrap_or_else(|e| e.into_inner());
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.drawn = false;
        }
    }

    /// The compile ended (either way).
    pub fn finish(&mut self, ok: bool) {
        self.clear();
        let elapsed = self.started.elapsed();
        if elapsed >= GRACE {
            tracing::info!(
                kernel = %self.kernel,
                elapsed_s = elapsed.as_secs_f64(),
                "compiling {} {} after {:.1} s",
                self.kernel,
                if ok { "finished" } else { "failed" },
                elapsed.as_secs_f64()
            );
        }
    }
}

impl Observer for Progress {
    fn output(&mut self, _bytes: &[u8]) {
        // Streamed tool output (debug mode) must not be glued to the status line.
        self.clear();
    }
    fn tick(&mut self) {
        Progress::tick(self);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}
