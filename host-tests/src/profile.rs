//! Where a filter's wasm operators go, by function: a profiling copy of a module that counts, in
//! one exported `i64` global per defined function, the operators that function executes itself
//! (its calls' operators count for the callees), priced as wasmtime prices fuel.
//!
//! Structured wasm makes this exact: between two control operators (`block`, `loop`, `if`,
//! `else`, `end`, branches, `return`, `unreachable`) code runs straight through, calls included
//! (they return or trap), so one bump at the start of each such run adds the run's cost. The
//! cost of each operator is wasmtime's default fuel table (0 for `nop`, `drop`, `block`, `loop`,
//! `unreachable`, `return`, `else`, `end`; 1 for the rest), and `memory.copy`/`memory.fill` add
//! their length in bytes as wasmtime's fuel does. On the same code the counters therefore add up
//! to the fuel the uninstrumented module consumes (`make bench-work` prints both to show it).
//! A second counter per function counts its calls: counter `n + i` for function `i` of `n`.
//! Only the work example (`--profile`) uses it; the shipped `.wasm` is never changed.
//!
//! Where the allocations come from: the profiling copy also has a table of one function,
//! exported as [`ALLOC_HOOK`], that `__rust_alloc`, `__rust_alloc_zeroed` and `__rust_realloc`
//! call on entry; the harness puts a host function there that records the guest's call stack
//! (in the test's `World`, beside the operator counts), so the work example can name the call
//! sites that allocate per request.
//! A table rather than an import: an added import would shift every function's index.

use crate::error::{HarnessError, Result};
use std::collections::BTreeMap;
use wasm_encoder::reencode::{utils, Reencode};
use wasm_encoder::{ConstExpr, ExportKind, Function, GlobalType, Instruction, ValType};
use wasmparser::{Operator, Payload};

/// The exported counters are `<PREFIX><index of the defined function>`.
pub const COUNTER_PREFIX: &str = "idemgate_profile_";
/// The exported table whose entry 0 the allocation functions call (see the module's doc).
pub const ALLOC_HOOK: &str = "idemgate_alloc_hook";
/// The functions that call the hook: every allocation of the Rust code passes one of them.
const ALLOCATORS: [&str; 3] = ["__rust_alloc", "__rust_alloc_zeroed", "__rust_realloc"];

/// A module whose functions count their own operators, and the functions' names.
pub struct Instrumented {
    pub wasm: Vec<u8>,
    /// Demangled name of the defined function each counter belongs to (its index in the module
    /// when the name section has none).
    pub names: Vec<String>,
}

fn error(message: impl std::fmt::Display) -> HarnessError {
    HarnessError::Usage(format!("profile instrumentation: {message}"))
}

/// What the rewrite needs to know before it starts: counts, signatures and names.
#[derive(Default)]
struct Layout {
    imported_funcs: u32,
    imported_globals: u32,
    defined_globals: u32,
    imported_tables: u32,
    defined_tables: u32,
    /// Parameter count per type index.
    params: Vec<u32>,
    /// Type index per defined function.
    func_types: Vec<u32>,
    names: BTreeMap<u32, String>,
}

fn layout(wasm: &[u8]) -> Result<Layout> {
    let mut out = Layout::default();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload.map_err(error)? {
            Payload::TypeSection(reader) => {
                for ty in reader.into_iter_err_on_gc_types() {
                    out.params.push(ty.map_err(error)?.params().len() as u32);
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    match import.map_err(error)?.ty {
                        wasmparser::TypeRef::Func(_) => out.imported_funcs += 1,
                        wasmparser::TypeRef::Global(_) => out.imported_globals += 1,
                        wasmparser::TypeRef::Table(_) => out.imported_tables += 1,
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for ty in reader {
                    out.func_types.push(ty.map_err(error)?);
                }
            }
            Payload::GlobalSection(reader) => out.defined_globals = reader.count(),
            Payload::TableSection(reader) => out.defined_tables = reader.count(),
            Payload::CustomSection(section) => {
                if let wasmparser::KnownCustom::Name(reader) = section.as_known() {
                    for subsection in reader {
                        if let Ok(wasmparser::Name::Function(map)) = subsection {
                            for naming in map.into_iter().flatten() {
                                out.names.insert(naming.index, naming.name.to_string());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

struct Rewriter {
    layout: Layout,
    /// The next defined function whose body is rewritten.
    next: u32,
    saw_globals: bool,
    saw_exports: bool,
    saw_types: bool,
    saw_tables: bool,
}

impl Rewriter {
    fn first_counter(&self) -> u32 {
        self.layout.imported_globals + self.layout.defined_globals
    }

    /// The added `[] -> []` type, after the module's own.
    fn hook_type(&self) -> u32 {
        self.layout.params.len() as u32
    }

    /// The added table of the allocation hook, after the module's own.
    fn hook_table(&self) -> u32 {
        self.layout.imported_tables + self.layout.defined_tables
    }

    fn is_allocator(&self, defined: u32) -> bool {
        let index = self.layout.imported_funcs + defined;
        self.layout
            .names
            .get(&index)
            .map(|name| format!("{:#}", rustc_demangle::demangle(name)))
            .is_some_and(|name| {
                let name = name.rsplit("::").next().unwrap_or(&name);
                ALLOCATORS.contains(&name)
            })
    }
}

/// Ends a straight run of code: what follows may run a different number of times.
fn ends_run(op: &Operator) -> bool {
    matches!(
        op,
        Operator::Block { .. }
            | Operator::Loop { .. }
            | Operator::If { .. }
            | Operator::Else
            | Operator::End
            | Operator::Br { .. }
            | Operator::BrIf { .. }
            | Operator::BrTable { .. }
            | Operator::Return
            | Operator::Unreachable
            | Operator::ReturnCall { .. }
            | Operator::ReturnCallIndirect { .. }
    )
}

/// wasmtime's default fuel per operator (wasmtime-environ's `default_operator_cost`).
fn cost(op: &Operator) -> i64 {
    match op {
        Operator::Nop
        | Operator::Drop
        | Operator::Block { .. }
        | Operator::Loop { .. }
        | Operator::Unreachable
        | Operator::Return
        | Operator::Else
        | Operator::End => 0,
        _ => 1,
    }
}

fn bump(f: &mut Function, global: u32, by: i64) {
    f.instruction(&Instruction::GlobalGet(global));
    f.instruction(&Instruction::I64Const(by));
    f.instruction(&Instruction::I64Add);
    f.instruction(&Instruction::GlobalSet(global));
}

impl Reencode for Rewriter {
    type Error = HarnessError;

    fn parse_global_section(
        &mut self,
        globals: &mut wasm_encoder::GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> std::result::Result<(), wasm_encoder::reencode::Error<HarnessError>> {
        utils::parse_global_section(self, globals, section)?;
        for _ in 0..2 * self.layout.func_types.len() {
            let ty = GlobalType {
                val_type: ValType::I64,
                mutable: true,
                shared: false,
            };
            globals.global(ty, &ConstExpr::i64_const(0));
        }
        self.saw_globals = true;
        Ok(())
    }

    fn parse_type_section(
        &mut self,
        types: &mut wasm_encoder::TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> std::result::Result<(), wasm_encoder::reencode::Error<HarnessError>> {
        utils::parse_type_section(self, types, section)?;
        types.ty().function([], []);
        self.saw_types = true;
        Ok(())
    }

    fn parse_table_section(
        &mut self,
        tables: &mut wasm_encoder::TableSection,
        section: wasmparser::TableSectionReader<'_>,
    ) -> std::result::Result<(), wasm_encoder::reencode::Error<HarnessError>> {
        utils::parse_table_section(self, tables, section)?;
        tables.table(wasm_encoder::TableType {
            element_type: wasm_encoder::RefType::FUNCREF,
            table64: false,
            minimum: 1,
            maximum: Some(1),
            shared: false,
        });
        self.saw_tables = true;
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut wasm_encoder::ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> std::result::Result<(), wasm_encoder::reencode::Error<HarnessError>> {
        utils::parse_export_section(self, exports, section)?;
        for i in 0..2 * self.layout.func_types.len() as u32 {
            let name = format!("{COUNTER_PREFIX}{i}");
            exports.export(&name, ExportKind::Global, self.first_counter() + i);
        }
        exports.export(ALLOC_HOOK, ExportKind::Table, self.hook_table());
        self.saw_exports = true;
        Ok(())
    }

    fn parse_function_body(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        func: wasmparser::FunctionBody<'_>,
    ) -> std::result::Result<(), wasm_encoder::reencode::Error<HarnessError>> {
        let index = self.next;
        self.next += 1;
        let counter = self.first_counter() + index;
        let calls = counter + self.layout.func_types.len() as u32;
        let mut locals = Vec::new();
        let mut declared = 0;
        for pair in func.get_locals_reader()? {
            let (count, ty) = pair?;
            declared += count;
            locals.push((count, self.val_type(ty)?));
        }
        let params = self
            .layout
            .func_types
            .get(index as usize)
            .and_then(|ty| self.layout.params.get(*ty as usize))
            .copied()
            .unwrap_or(0);
        // One extra i32 local holds a bulk operation's length while it is added to the counter.
        let length = params + declared;
        locals.push((1, ValType::I32));
        let mut f = Function::new(locals);
        let mut ops = Vec::new();
        let mut reader = func.get_operators_reader()?;
        while !reader.eof() {
            ops.push(reader.read()?);
        }
        bump(&mut f, calls, 1);
        if self.is_allocator(index) {
            f.instruction(&Instruction::I32Const(0));
            f.instruction(&Instruction::CallIndirect {
                type_index: self.hook_type(),
                table_index: self.hook_table(),
            });
        }
        let mut start = 0;
        while start < ops.len() {
            let mut end = start;
            let mut run = 0;
            while end < ops.len() {
                run += cost(&ops[end]);
                end += 1;
                if ends_run(&ops[end - 1]) {
                    break;
                }
            }
            if run > 0 {
                bump(&mut f, counter, run);
            }
            for op in &ops[start..end] {
                if matches!(
                    op,
                    Operator::MemoryCopy { .. } | Operator::MemoryFill { .. }
                ) {
                    // The length is on top of the stack: count it as wasmtime's fuel does.
                    f.instruction(&Instruction::LocalTee(length));
                    f.instruction(&Instruction::I64ExtendI32U);
                    f.instruction(&Instruction::GlobalGet(counter));
                    f.instruction(&Instruction::I64Add);
                    f.instruction(&Instruction::GlobalSet(counter));
                    f.instruction(&Instruction::LocalGet(length));
                }
                f.instruction(&self.instruction(op.clone())?);
            }
            start = end;
        }
        code.function(&f);
        Ok(())
    }
}

/// The profiling copy of `wasm` (a module with a global and an export section, as every Rust
/// build has).
pub fn instrument(wasm: &[u8]) -> Result<Instrumented> {
    let layout = layout(wasm)?;
    let names = (0..layout.func_types.len() as u32)
        .map(|i| {
            let index = layout.imported_funcs + i;
            layout
                .names
                .get(&index)
                .map(|name| format!("{:#}", rustc_demangle::demangle(name)))
                .unwrap_or_else(|| format!("function[{index}]"))
        })
        .collect();
    let mut rewriter = Rewriter {
        layout,
        next: 0,
        saw_globals: false,
        saw_exports: false,
        saw_types: false,
        saw_tables: false,
    };
    let mut module = wasm_encoder::Module::new();
    rewriter
        .parse_core_module(&mut module, wasmparser::Parser::new(0), wasm)
        .map_err(error)?;
    if !rewriter.saw_globals || !rewriter.saw_exports || !rewriter.saw_types || !rewriter.saw_tables
    {
        return Err(error(
            "the module has no global, export, type or table section",
        ));
    }
    Ok(Instrumented {
        wasm: module.finish(),
        names,
    })
}
