//! The wasmtime engine and compiled modules. Compiling is the slow part, so each `.wasm` is
//! compiled once per test process and shared (a compiled module is immutable); everything mutable
//! lives in each test's `Store`.

use crate::abi;
use crate::envoy::world::lock;
use crate::envoy::VmState;
use crate::error::{HarnessError, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use wasmtime::{Config, Engine, InstancePre, Module};

/// Fuel for one callback: far more than any real request needs, so a runaway loop traps instead
/// of hanging the test.
pub const FUEL_PER_CALL: u64 = 5_000_000_000;

fn load_error(module: &Path, e: impl std::fmt::Display) -> HarnessError {
    HarnessError::Load {
        module: module.display().to_string(),
        message: e.to_string(),
    }
}

/// The engine every module of this process is compiled for.
pub fn engine() -> Result<Engine> {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    if let Some(engine) = ENGINE.get() {
        return Ok(engine.clone());
    }
    let mut config = Config::new();
    config.consume_fuel(true);
    // The harness runs a debug build of Cranelift: skipping its optimisation passes makes compiling
    // a filter several times faster, and the filter's own code is already optimised by rustc.
    config.cranelift_opt_level(wasmtime::OptLevel::None);
    let engine = Engine::new(&config).map_err(|e| load_error(Path::new("<engine>"), e))?;
    Ok(ENGINE.get_or_init(|| engine).clone())
}

/// A compiled proxy-wasm module, linked against the harness's host calls.
pub struct FilterModule {
    pub path: PathBuf,
    pub module: Module,
    /// Instantiates through [`abi::counting_linker`]'s wrappers.
    pub pre: InstancePre<VmState>,
    /// The host functions themselves, which the wrappers call (resolved per store).
    pub host: wasmtime::Linker<VmState>,
    /// `module::name` of each import, indexed like `module.imports()`.
    pub import_names: Arc<Vec<String>>,
}

/// Compiles (once per process) and links the proxy-wasm module at `path`.
pub fn filter_module(path: &Path) -> Result<Arc<FilterModule>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<FilterModule>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = lock(cache);
    if let Some(found) = cache.get(path) {
        return Ok(found.clone());
    }
    let engine = engine()?;
    let module = Module::from_file(&engine, path).map_err(|e| load_error(path, e))?;
    let mut linker = abi::linker(&engine).map_err(|e| load_error(path, e))?;
    let missing = abi::missing_imports(&mut linker, &module);
    if !missing.is_empty() {
        return Err(HarnessError::UnknownImports {
            module: path.display().to_string(),
            imports: missing,
        });
    }
    let pre = abi::counting_linker(&engine, &module)
        .and_then(|outer| outer.instantiate_pre(&module))
        .map_err(|e| load_error(path, e))?;
    let import_names = module
        .imports()
        .map(|import| import.name().to_string())
        .collect();
    let loaded = Arc::new(FilterModule {
        path: path.to_path_buf(),
        module,
        pre,
        host: linker,
        import_names: Arc::new(import_names),
    });
    cache.insert(path.to_path_buf(), loaded.clone());
    Ok(loaded)
}
