//! The host itself: what it refuses, and that the shipped filter links against it.

use crate::support::filter;
use idemgate_host_tests::runtime::filter_module;
use idemgate_host_tests::HarnessError;

/// A module importing one host call no proxy-wasm host has (hand-assembled: no WAT parser here).
fn module_importing_an_unknown_call() -> Vec<u8> {
    let mut wasm = b"\0asm\x01\0\0\0".to_vec();
    wasm.extend([0x01, 0x04, 0x01, 0x60, 0x00, 0x00]); // type section: () -> ()
    let (module, name) = (b"env", b"proxy_teleport");
    let mut import = vec![0x01, module.len() as u8];
    import.extend(module);
    import.push(name.len() as u8);
    import.extend(name);
    import.extend([0x00, 0x00]); // a function of type 0
    wasm.push(0x02);
    wasm.push(import.len() as u8);
    wasm.extend(import);
    wasm
}

#[test]
fn an_unknown_import_is_refused_by_name() {
    let path = std::env::temp_dir().join(format!(
        "idemgate-unknown-import-{}.wasm",
        std::process::id()
    ));
    std::fs::write(&path, module_importing_an_unknown_call()).unwrap();
    let result = filter_module(&path);
    let _ = std::fs::remove_file(&path);
    match result {
        Err(HarnessError::UnknownImports { imports, .. }) => {
            assert_eq!(imports, ["env::proxy_teleport"])
        }
        Err(other) => panic!("expected an unknown-import error, got {other}"),
        Ok(_) => panic!("a module with an unknown import loaded"),
    }
}

#[test]
fn the_shipped_filter_links_against_the_host() {
    let module = filter();
    let imports: Vec<String> = module
        .module
        .imports()
        .map(|i| format!("{}::{}", i.module(), i.name()))
        .collect();
    println!("the filter imports: {imports:?}");
    assert!(imports.iter().any(|i| i == "env::proxy_set_shared_data"));
    // The conformance export is test scaffolding: only the test build has it (builds.rs).
    assert!(!module
        .module
        .exports()
        .any(|e| e.name() == "idemgate_conformance"));
}
