//! What can go wrong in the harness, with enough said to act on it.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
#[non_exhaustive]
pub enum HarnessError {
    /// A `.wasm` artifact is missing: build it with the named make target.
    Artifact {
        what: &'static str,
        path: PathBuf,
        make_target: &'static str,
    },
    /// The module imports host functions this harness does not implement.
    UnknownImports {
        module: String,
        imports: Vec<String>,
    },
    /// wasmtime refused to compile or instantiate the module.
    Load { module: String, message: String },
    /// The guest trapped (a panic in the filter, `proc_exit`, an out-of-fuel loop …).
    Trap {
        worker: usize,
        callback: String,
        message: String,
    },
    /// The filter refused its configuration (`proxy_on_configure` returned false).
    ConfigRejected { worker: usize, logs: Vec<String> },
    /// The module does not follow the interface it claims (missing export, bad answer).
    Interface(String),
    /// The test asked for something the stream's state does not allow.
    Usage(String),
}

pub type Result<T> = std::result::Result<T, HarnessError>;

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessError::Artifact { what, path, make_target } => write!(
                f,
                "{what} not found at {}: run `make {make_target}` first (or point the environment variable at it)",
                path.display()
            ),
            HarnessError::UnknownImports { module, imports } => write!(
                f,
                "{module} imports host functions the harness does not implement: {} (add them in host-tests/src/abi/)",
                imports.join(", ")
            ),
            HarnessError::Load { module, message } => write!(f, "cannot load {module}: {message}"),
            HarnessError::Trap { worker, callback, message } => {
                write!(f, "the filter trapped on worker {worker} in {callback}: {message}")
            }
            HarnessError::ConfigRejected { worker, logs } => write!(
                f,
                "the filter rejected its configuration on worker {worker}; its log: {}",
                logs.join(" | ")
            ),
            HarnessError::Interface(what) => write!(f, "interface violation: {what}"),
            HarnessError::Usage(what) => write!(f, "harness misuse: {what}"),
        }
    }
}

impl std::error::Error for HarnessError {}
