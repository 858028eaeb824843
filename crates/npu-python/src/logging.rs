//! `tracing` events forwarded to Python's `logging` under the logger `triton_npu`.

use std::fmt::Write as _;
use std::sync::Once;
use std::sync::atomic::{AtomicU8, Ordering};

use pyo3::prelude::*;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// The most verbose level forwarded: 0 error … 4 trace. Checked before touching Python, so a
/// disabled event costs no GIL acquisition.
static MAX_LEVEL: AtomicU8 = AtomicU8::new(2);

fn rank(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 0,
        Level::WARN => 1,
        Level::INFO => 2,
        Level::DEBUG => 3,
        Level::TRACE => 4,
    }
}

fn python_level(level: &Level) -> i32 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

struct PythonLogging;

impl<S: Subscriber> Layer<S> for PythonLogging {
    fn register_callsite(
        &self,
        _metadata: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        // The level can change at run time (`npu_config.debug = True`): ask every time.
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        rank(metadata.level()) <= MAX_LEVEL.load(Ordering::Relaxed)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut message = Message::default();
        event.record(&mut message);
        let level = python_level(event.metadata().level());
        // Logging must never take the process down: a failure here (interpreter shutting
        // down, a broken handler) drops the message.
        let _ = std::panic::catch_unwind(|| {
            Python::attach(|py| -> PyResult<()> {
                let logger = py
                    .import("logging")?
                    .call_method1("getLogger", ("triton_npu",))?;
                if logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
                    logger.call_method1("log", (level, message.0.as_str()))?;
                }
                Ok(())
            })
        });
    }
}

static INIT: Once = Once::new();

/// Installs the bridge as the process's tracing subscriber (once).
#[pyfunction]
fn init_logging() {
    INIT.call_once(|| {
        let debug = npu_target::Config::current()
            .map(|c| c.debug)
            .unwrap_or(false);
        set_level(if debug { "debug" } else { "info" });
        let subscriber = tracing_subscriber::registry().with(PythonLogging);
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// Sets the most verbose level forwarded: `error`, `warn`, `info`, `debug` or `trace`.
#[pyfunction]
fn set_log_level(level: &str) -> PyResult<()> {
    if set_level(level) {
        Ok(())
    } else {
        Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown log level {level:?}; expected error, warn, info, debug or trace"
        )))
    }
}

fn set_level(level: &str) -> bool {
    let rank = match level {
        "error" => 0,
        "warn" => 1,
        "info" => 2,
        "debug" => 3,
        "trace" => 4,
        _ => return false,
    };
    MAX_LEVEL.store(rank, Ordering::Relaxed);
    true
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(init_logging, m)?)?;
    m.add_function(wrap_pyfunction!(set_log_level, m)?)?;
    Ok(())
}
