//! The one place that knows wasm-bindgen 0.2.130's internal calling convention (the version is
//! pinned exactly in `crates/web/Cargo.toml` and the Makefile, which is the only reason this is
//! stable). It runs the browser module's `.wasm` without JavaScript:
//!
//! - imports: `__wbg_idemgate_error_*(code, message) -> externref` records the error (the JS glue
//!   builds an `Error` with that `code`), `__wbg_idemgate_object_*(json) -> externref` records a
//!   result object's JSON text (the JS glue parses it into the object an export returns),
//!   `__wbg_getRandomValues_*` fills from the test's entropy,
//!   `__wbg___wbindgen_throw_*` traps with its message, `__wbindgen_init_externref_table` does
//!   nothing (null entries serve); any other import traps when called, naming itself;
//! - arguments: strings and byte arrays are copied in through `__wbindgen_malloc(len, align)` and
//!   passed as `(ptr, len)` (`(0, 0)` for `None`); numbers as `i32`/`f64`;
//! - results: `Result<T, JsValue>` comes back flattened with `(err, is_err)` appended; a string is
//!   `(ptr, len)` freed with `__wbindgen_free(ptr, len, 1)`, `Option<String>` the same with ptr 0
//!   for `None`, an exported struct a handle `ptr`, a `Vec<f64>` `(ptr, len)` freed with align 8,
//!   a `JsValue` one `externref` (here always null: the object is the recorded JSON text).

use crate::envoy::entropy::Entropy;
use crate::error::{HarnessError, Result};
use crate::runtime::{engine, FUEL_PER_CALL};
use std::path::Path;
use wasmtime::{
    Caller, Extern, ExternRef, ExternType, Func, Instance, Linker, Module, Rooted, Store, Val,
    ValType,
};

/// The error a call threw: the JS `Error`'s `code` and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsError {
    pub code: String,
    pub message: String,
}

/// What the host keeps for one instance of the module.
pub struct WebState {
    last_error: Option<JsError>,
    last_object: Option<String>,
    entropy: Entropy,
}

/// An argument of an export.
#[derive(Debug, Clone)]
pub enum Arg {
    /// `&str`, `&[u8]`, `String`: copied in, passed as `(ptr, len)`.
    Bytes(Vec<u8>),
    /// `Option<String>`: `(0, 0)` for `None`.
    OptBytes(Option<Vec<u8>>),
    /// `&[u32]`: copied in (align 4), passed as `(ptr, count)`.
    U32s(Vec<u32>),
    /// `u32`, `u16`, `u8`, `i32`, `bool`, or an exported struct's handle.
    I32(i32),
    /// `Option<u16>`: wasm-bindgen passes `None` as `0xFFFFFF`.
    OptU16(Option<u16>),
    /// `Option<bool>`: `0`/`1`, `None` as `0xFFFFFF`.
    OptBool(Option<bool>),
    /// `Option<u32>`: passed as an `f64`, `None` as 2^53-1.
    OptU32(Option<u32>),
    /// `f64` (every JS number that is not an integer type in Rust).
    F64(f64),
}

/// The browser module, instantiated in its own store.
pub struct WebModule {
    store: Store<WebState>,
    instance: Instance,
}

fn interface(what: impl Into<String>) -> HarnessError {
    HarnessError::Interface(what.into())
}

fn int(value: &Val) -> Result<i32> {
    value
        .i32()
        .ok_or_else(|| interface("an export returned a non-i32 where wasm-bindgen puts one"))
}

fn trap(export: &str, e: wasmtime::Error) -> HarnessError {
    HarnessError::Trap {
        worker: 0,
        callback: export.to_string(),
        message: format!("{e:?}"),
    }
}

fn guest_bytes(caller: &mut Caller<'_, WebState>, ptr: i32, len: i32) -> Vec<u8> {
    let Some(memory) = caller.get_export("memory").and_then(Extern::into_memory) else {
        return Vec::new();
    };
    let (start, len) = (ptr as u32 as usize, len as u32 as usize);
    memory
        .data(&*caller)
        .get(start..start.saturating_add(len))
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

fn text(caller: &mut Caller<'_, WebState>, ptr: i32, len: i32) -> String {
    String::from_utf8_lossy(&guest_bytes(caller, ptr, len)).into_owned()
}

fn link(linker: &mut Linker<WebState>, module: &Module) -> wasmtime::Result<()> {
    for import in module.imports() {
        let (from, name) = (import.module().to_string(), import.name().to_string());
        let ExternType::Func(ty) = import.ty() else {
            return Err(wasmtime::Error::msg(format!(
                "unexpected non-function import {from}::{name}"
            )));
        };
        if name.starts_with("__wbg_idemgate_error_") {
            linker.func_wrap(
                &from,
                &name,
                |mut caller: Caller<'_, WebState>,
                 code_ptr: i32,
                 code_len: i32,
                 msg_ptr: i32,
                 msg_len: i32|
                 -> Option<Rooted<ExternRef>> {
                    let code = text(&mut caller, code_ptr, code_len);
                    let message = text(&mut caller, msg_ptr, msg_len);
                    caller.data_mut().last_error = Some(JsError { code, message });
                    None
                },
            )?;
        } else if name.starts_with("__wbg_idemgate_object_") {
            linker.func_wrap(
                &from,
                &name,
                |mut caller: Caller<'_, WebState>,
                 ptr: i32,
                 len: i32|
                 -> Option<Rooted<ExternRef>> {
                    let json = text(&mut caller, ptr, len);
                    caller.data_mut().last_object = Some(json);
                    None
                },
            )?;
        } else if name.starts_with("__wbg_getRandomValues_") {
            linker.func_wrap(
                &from,
                &name,
                |mut caller: Caller<'_, WebState>, ptr: i32, len: i32| {
                    let mut bytes = vec![0u8; len as u32 as usize];
                    caller.data_mut().entropy.fill(&mut bytes);
                    if let Some(memory) = caller.get_export("memory").and_then(Extern::into_memory)
                    {
                        let _ = memory.write(&mut caller, ptr as u32 as usize, &bytes);
                    }
                },
            )?;
        } else if name.starts_with("__wbg___wbindgen_throw_") {
            linker.func_wrap(
                &from,
                &name,
                |mut caller: Caller<'_, WebState>, ptr: i32, len: i32| -> wasmtime::Result<()> {
                    Err(wasmtime::Error::msg(format!(
                        "the module threw: {}",
                        text(&mut caller, ptr, len)
                    )))
                },
            )?;
        } else if name == "__wbindgen_init_externref_table" {
            linker.func_wrap(&from, &name, |_caller: Caller<'_, WebState>| {})?;
        } else {
            let label = format!("{from}::{name}");
            linker.func_new(
                &from,
                &name,
                ty.clone(),
                move |_caller, _params, _results| {
                    Err(wasmtime::Error::msg(format!(
                        "the harness does not emulate the JS import {label}"
                    )))
                },
            )?;
        }
    }
    Ok(())
}

impl WebModule {
    /// Instantiates the module at `path` and runs `__wbindgen_start`, as the JS glue's init does.
    pub fn load(path: &Path, seed: u64) -> Result<WebModule> {
        let engine = engine()?;
        let load_error = |e: wasmtime::Error| HarnessError::Load {
            module: path.display().to_string(),
            message: format!("{e:?}"),
        };
        let module = Module::from_file(&engine, path).map_err(load_error)?;
        let mut linker = Linker::new(&engine);
        link(&mut linker, &module).map_err(load_error)?;
        let mut store = Store::new(
            &engine,
            WebState {
                last_error: None,
                last_object: None,
                entropy: Entropy::seeded(seed),
            },
        );
        store.set_fuel(FUEL_PER_CALL).map_err(load_error)?;
        let instance = linker
            .instantiate(&mut store, &module)
            .map_err(load_error)?;
        let mut web = WebModule { store, instance };
        if web
            .instance
            .get_func(&mut web.store, "__wbindgen_start")
            .is_some()
        {
            web.call("__wbindgen_start", &[])?;
        }
        Ok(web)
    }

    fn func(&mut self, name: &str) -> Result<Func> {
        self.instance
            .get_func(&mut self.store, name)
            .ok_or_else(|| interface(format!("the browser module does not export {name}")))
    }

    /// Whether the module exports `name`.
    pub fn exports(&mut self, name: &str) -> bool {
        self.instance.get_func(&mut self.store, name).is_some()
    }

    fn copy_in(&mut self, bytes: &[u8], align: i32) -> Result<i32> {
        let len =
            i32::try_from(bytes.len()).map_err(|_| interface("argument larger than 2 GiB"))?;
        let malloc = self.func("__wbindgen_malloc")?;
        let mut out = [Val::I32(0)];
        self.store
            .set_fuel(FUEL_PER_CALL)
            .map_err(|e| trap("__wbindgen_malloc", e))?;
        malloc
            .call(&mut self.store, &[Val::I32(len), Val::I32(align)], &mut out)
            .map_err(|e| trap("__wbindgen_malloc", e))?;
        let ptr = int(&out[0])?;
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| interface("the browser module exports no memory"))?;
        memory
            .write(&mut self.store, ptr as u32 as usize, bytes)
            .map_err(|e| interface(format!("cannot copy an argument in: {e}")))?;
        Ok(ptr)
    }

    fn params(&mut self, args: &[Arg]) -> Result<Vec<Val>> {
        let mut params = Vec::new();
        for arg in args {
            match arg {
                Arg::Bytes(bytes) => {
                    let ptr = self.copy_in(bytes, 1)?;
                    params.extend([Val::I32(ptr), Val::I32(bytes.len() as i32)]);
                }
                Arg::OptBytes(None) => params.extend([Val::I32(0), Val::I32(0)]),
                Arg::OptBytes(Some(bytes)) => {
                    let ptr = self.copy_in(bytes, 1)?;
                    params.extend([Val::I32(ptr), Val::I32(bytes.len() as i32)]);
                }
                Arg::U32s(values) => {
                    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                    let ptr = self.copy_in(&bytes, 4)?;
                    params.extend([Val::I32(ptr), Val::I32(values.len() as i32)]);
                }
                Arg::I32(v) => params.push(Val::I32(*v)),
                Arg::OptU16(v) => params.push(Val::I32(v.map_or(0xFF_FFFF, i32::from))),
                Arg::OptBool(v) => params.push(Val::I32(v.map_or(0xFF_FFFF, i32::from))),
                Arg::OptU32(v) => {
                    let n = v.map_or(9_007_199_254_740_991.0, f64::from);
                    params.push(Val::F64(n.to_bits()));
                }
                Arg::F64(v) => params.push(Val::F64(v.to_bits())),
            }
        }
        Ok(params)
    }

    /// Calls `export` with `args` and returns its raw results.
    pub fn call(&mut self, export: &str, args: &[Arg]) -> Result<Vec<Val>> {
        let func = self.func(export)?;
        let params = self.params(args)?;
        let ty = func.ty(&self.store);
        let mut results: Vec<Val> = ty
            .results()
            .map(|t| match t {
                ValType::F64 => Val::F64(0),
                ValType::I64 => Val::I64(0),
                ValType::F32 => Val::F32(0),
                _ => Val::I32(0),
            })
            .collect();
        self.store.data_mut().last_error = None;
        self.store.data_mut().last_object = None;
        self.store
            .set_fuel(FUEL_PER_CALL)
            .map_err(|e| trap(export, e))?;
        func.call(&mut self.store, &params, &mut results)
            .map_err(|e| trap(export, e))?;
        Ok(results)
    }

    /// Splits a `Result<T, JsValue>`'s flattened results into `T`'s values or the thrown error.
    fn thrown(
        &mut self,
        export: &str,
        results: &[Val],
    ) -> Result<std::result::Result<Vec<Val>, JsError>> {
        let n = results.len();
        if n < 2 {
            return Err(interface(format!("{export} does not return a Result")));
        }
        if int(&results[n - 1])? == 0 {
            return Ok(Ok(results[..n - 2].to_vec()));
        }
        self.store
            .data_mut()
            .last_error
            .take()
            .map(Err)
            .ok_or_else(|| {
                interface(format!(
                    "{export} threw something other than an idemgate error"
                ))
            })
    }

    fn take_string(&mut self, ptr: i32, len: i32) -> Result<String> {
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| interface("the browser module exports no memory"))?;
        let (start, size) = (ptr as u32 as usize, len as u32 as usize);
        let bytes = memory
            .data(&self.store)
            .get(start..start.saturating_add(size))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| interface("a returned string lies outside memory"))?;
        self.call(
            "__wbindgen_free",
            &[Arg::I32(ptr), Arg::I32(len), Arg::I32(1)],
        )?;
        String::from_utf8(bytes).map_err(|_| interface("a returned string is not UTF-8"))
    }

    /// An export returning `Result<String, JsValue>`.
    pub fn string(
        &mut self,
        export: &str,
        args: &[Arg],
    ) -> Result<std::result::Result<String, JsError>> {
        let results = self.call(export, args)?;
        match self.thrown(export, &results)? {
            Err(e) => Ok(Err(e)),
            Ok(values) => match values.as_slice() {
                [ptr, len] => self.take_string(int(ptr)?, int(len)?).map(Ok),
                _ => Err(interface(format!("{export} does not return a string"))),
            },
        }
    }

    /// An export returning `Result<Option<String>, JsValue>`.
    pub fn optional_string(
        &mut self,
        export: &str,
        args: &[Arg],
    ) -> Result<std::result::Result<Option<String>, JsError>> {
        let results = self.call(export, args)?;
        match self.thrown(export, &results)? {
            Err(e) => Ok(Err(e)),
            Ok(values) => match values.as_slice() {
                [ptr, _] if int(ptr)? == 0 => Ok(Ok(None)),
                [ptr, len] => self.take_string(int(ptr)?, int(len)?).map(|s| Ok(Some(s))),
                _ => Err(interface(format!(
                    "{export} does not return an optional string"
                ))),
            },
        }
    }

    /// An export returning `Result<bool, JsValue>`.
    pub fn boolean(
        &mut self,
        export: &str,
        args: &[Arg],
    ) -> Result<std::result::Result<bool, JsError>> {
        let results = self.call(export, args)?;
        match self.thrown(export, &results)? {
            Err(e) => Ok(Err(e)),
            Ok(values) => match values.as_slice() {
                [value] => Ok(Ok(int(value)? != 0)),
                _ => Err(interface(format!("{export} does not return a bool"))),
            },
        }
    }

    /// An export returning a plain `u8`/`u16`/`u32`/`bool` (no `Result`).
    pub fn int(&mut self, export: &str, args: &[Arg]) -> Result<i32> {
        let results = self.call(export, args)?;
        match results.as_slice() {
            [value] => int(value),
            _ => Err(interface(format!("{export} does not return one integer"))),
        }
    }

    /// An export returning a plain `String` (no `Result`): `(ptr, len)`.
    pub fn string_result(&mut self, export: &str, args: &[Arg]) -> Result<String> {
        let results = self.call(export, args)?;
        match results.as_slice() {
            [ptr, len] => self.take_string(int(ptr)?, int(len)?),
            _ => Err(interface(format!("{export} does not return a string"))),
        }
    }

    /// An export returning `Result<f64, JsValue>`.
    pub fn number(
        &mut self,
        export: &str,
        args: &[Arg],
    ) -> Result<std::result::Result<f64, JsError>> {
        let results = self.call(export, args)?;
        match self.thrown(export, &results)? {
            Err(e) => Ok(Err(e)),
            Ok(values) => match values.as_slice() {
                [value] => value
                    .f64()
                    .map(Ok)
                    .ok_or_else(|| interface(format!("{export} does not return an f64"))),
                _ => Err(interface(format!("{export} does not return a number"))),
            },
        }
    }

    /// An export returning `Result<(), JsValue>`.
    pub fn unit(&mut self, export: &str, args: &[Arg]) -> Result<std::result::Result<(), JsError>> {
        let results = self.call(export, args)?;
        Ok(self.thrown(export, &results)?.map(|_| ()))
    }

    /// An export returning a plain JS object (`JsValue`, or `Result<JsValue, JsValue>`): the
    /// object as the JSON text the module wrote for it.
    pub fn object(
        &mut self,
        export: &str,
        args: &[Arg],
    ) -> Result<std::result::Result<serde_json::Value, JsError>> {
        let results = self.call(export, args)?;
        if results.len() > 1 {
            if let Err(e) = self.thrown(export, &results)? {
                return Ok(Err(e));
            }
        }
        let text = self
            .store
            .data_mut()
            .last_object
            .take()
            .ok_or_else(|| interface(format!("{export} made no object")))?;
        serde_json::from_str(&text).map(Ok).map_err(|e| {
            interface(format!(
                "{export} made an object that is not JSON ({e}): {text}"
            ))
        })
    }

    /// A constructor returning `Result<Struct, JsValue>`: the struct's handle.
    pub fn handle(
        &mut self,
        export: &str,
        args: &[Arg],
    ) -> Result<std::result::Result<i32, JsError>> {
        let results = self.call(export, args)?;
        match self.thrown(export, &results)? {
            Err(e) => Ok(Err(e)),
            Ok(values) => match values.as_slice() {
                [ptr] => Ok(Ok(int(ptr)?)),
                _ => Err(interface(format!("{export} does not return a handle"))),
            },
        }
    }

    /// Frees an exported struct (`__wbg_<struct>_free(ptr, 0)`).
    pub fn free(&mut self, strukt: &str, handle: i32) -> Result<()> {
        self.call(
            &format!("__wbg_{strukt}_free"),
            &[Arg::I32(handle), Arg::I32(0)],
        )
        .map(|_| ())
    }

    /// An export returning `Vec<f64>`.
    pub fn f64s(&mut self, export: &str, args: &[Arg]) -> Result<Vec<f64>> {
        let results = self.call(export, args)?;
        let [ptr, len] = results.as_slice() else {
            return Err(interface(format!("{export} does not return a Vec<f64>")));
        };
        let (ptr, len) = (int(ptr)?, int(len)?);
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| interface("the browser module exports no memory"))?;
        let start = ptr as u32 as usize;
        let bytes = memory
            .data(&self.store)
            .get(start..start.saturating_add(len as u32 as usize * 8))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| interface("a returned array lies outside memory"))?;
        self.call(
            "__wbindgen_free",
            &[Arg::I32(ptr), Arg::I32(len * 8), Arg::I32(8)],
        )?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }
}
