use super::*;
use crate::policy::Policy;
use alloc::string::String;
use alloc::vec::Vec;
use std::{env, fs};

/// The generated files, from the crate's directory.
const PAGE: &str = "../../docs/reference/configuration.md";
const SCHEMA: &str = "../../docs/reference/idemgate-config.schema.json";

/// The committed reference page and schema are what the description renders now. With
/// `IDEMGATE_WRITE_REFERENCE=1` (`make reference`) the test writes them instead.
#[test]
fn the_reference_and_the_schema_are_current() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let write = env::var_os("IDEMGATE_WRITE_REFERENCE").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (file, now) in [(PAGE, markdown::render()), (SCHEMA, schema::render())] {
        let path = [dir, "/", file].concat();
        if write {
            fs::write(&path, &now).unwrap();
        } else if fs::read_to_string(&path).ok().as_deref() != Some(now.as_str()) {
            stale.push(file.trim_start_matches("../../"));
        }
    }
    assert!(
        stale.is_empty(),
        "{} differ from the configuration's description (crates/core/src/config/describe): run `make reference` and commit them",
        stale.join(" and ")
    );
}

/// Every section an object field names is described, and every section is reached from the
/// document's.
#[test]
fn every_section_is_described_and_reached() {
    fn walk(ty: &Type, found: &mut Vec<&'static str>) {
        match ty {
            Type::Section(path) => {
                let s = section(path).unwrap_or_else(|| panic!("no section {path}"));
                if !found.contains(path) {
                    found.push(path);
                    for f in s.fields {
                        walk(&f.ty, found);
                    }
                }
            }
            Type::Array(item) | Type::Member(_, item) => walk(item, found),
            Type::Tuple(items) | Type::OneOf(items) => items.iter().for_each(|t| walk(t, found)),
            _ => {}
        }
    }
    let mut found = Vec::from([""]);
    for f in sections::ROOT.fields {
        walk(&f.ty, &mut found);
    }
    for s in SECTIONS {
        assert!(found.contains(&s.path), "section {} is not reached", s.path);
        let mut names: Vec<&str> = s.fields.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), s.fields.len(), "a field of {} twice", s.path);
    }
}

/// A field set to its documented default (where the default is one JSON value) compiles to the
/// policy of the field left out: the page and the schema say what the reader does.
#[test]
fn documented_defaults_are_the_defaults() {
    // A minimal document holding `member` (none: `""`), field `name`'s, in the field's section;
    // `None` where the section needs more fields to compile (a signature, an ordering rule).
    fn document(section: &str, name: &str, member: &str) -> Option<String> {
        let sep = if member.is_empty() { "" } else { ", " };
        let route = |inner: &str| ["{\"routes\": [{\"prefix\": \"/\"", inner, "}]}"].concat();
        Some(match section {
            "" => ["{", member, "}"].concat(),
            "routes[]" => route(&[sep, member].concat()),
            "routes[].in_flight" => route(&[", \"in_flight\": {", member, "}"].concat()),
            // The remote store's fields apply only to it.
            "store" if name != "kind" => [
                "{\"store\": {\"kind\": \"remote\", \"cluster\": \"s\"",
                sep,
                member,
                "}}",
            ]
            .concat(),
            // A timeout bounds only a detached exchange.
            "upstream" if name == "timeout" => {
                ["{\"upstream\": {\"reentry\": \"r\"", sep, member, "}}"].concat()
            }
            "scope[]" => ["{\"scope\": [{\"header\": \"x\"", sep, member, "}]}"].concat(),
            "routes[].signature" | "routes[].order" | "routes[].order.early" => return None,
            top => ["{\"", top, "\": {", member, "}}"].concat(),
        })
    }
    let env = |_: &str| Some(String::from("0123456789abcdef0123456789abcdef"));
    // Kept as given and defaulted where used: the same problems, another `Debug`.
    let applied_later = ["problems.type_base"];
    let mut checked = 0;
    for s in SECTIONS {
        for f in s.fields {
            let Some(value) = schema::default(f.default) else {
                continue;
            };
            if applied_later.contains(&[s.path, ".", f.name].concat().as_str()) {
                continue;
            }
            let member = ["\"", f.name, "\": ", &written(&value)].concat();
            let (Some(given), Some(left_out)) = (
                document(s.path, f.name, &member),
                document(s.path, f.name, ""),
            ) else {
                continue;
            };
            let a = Policy::from_json(&given, &env).map(|p| format!("{p:?}"));
            let b = Policy::from_json(&left_out, &env).map(|p| format!("{p:?}"));
            match (a, b) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{given} is not {left_out}"),
                (a, b) => panic!("{given}: {a:?}\n{left_out}: {b:?}"),
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} defaults checked");
}

fn written(value: &crate::request::json::Value) -> String {
    let mut out = String::new();
    schema::write_value(&mut out, value);
    out
}

/// The configurations `cases.json` lists are accepted, or refused, by the reader as it says; the
/// same file feeds the schema to a real validator (`make test-examples`), which must agree.
#[test]
fn the_schema_cases_are_what_the_reader_says() {
    let cases = crate::request::json::Value::parse(include_str!("cases.json")).unwrap();
    let env = |_: &str| Some(String::from("0123456789abcdef0123456789abcdef"));
    let mut counted = 0;
    for (list, accepted) in [("accept", true), ("refuse", false)] {
        for case in cases.get(list).and_then(|l| l.as_array()).unwrap() {
            let name = case.get("name").and_then(|n| n.as_str()).unwrap();
            let config = written(case.get("config").unwrap());
            let got = Policy::from_json(&config, &env);
            assert_eq!(got.is_ok(), accepted, "{name}: {config}: {got:?}");
            counted += 1;
        }
    }
    assert!(counted > 10);
}

/// Every link within the page leads to an anchor of the page: a field's or a section's, or a
/// heading's as GitHub spells it.
#[test]
fn the_pages_links_lead_somewhere() {
    let page = markdown::render();
    let mut anchors: Vec<String> = Vec::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("<a id=\"") {
            anchors.push(rest.trim_end_matches("\"></a>").into());
        } else if line.starts_with('#') {
            let title = line.trim_start_matches('#').trim().to_lowercase();
            let slug: String = title
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            anchors.push(slug);
        }
    }
    let mut links = 0;
    for (at, _) in page.match_indices("](#") {
        let target = &page[at + 3..];
        let target = &target[..target.find(')').unwrap()];
        assert!(
            anchors.iter().any(|a| a == target),
            "a link to #{target}, which the page lacks"
        );
        links += 1;
    }
    assert!(links > 50, "only {links} links");
}
