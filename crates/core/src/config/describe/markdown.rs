//! The description as the reference page, `docs/reference/configuration.md`: a header (what the
//! configuration is, its syntax, how to check it from an editor), then each section and field
//! with its path, type, default and meaning. Each field's anchor is its path (`routes[].key` →
//! `#routes-key`), so links to it hold while fields are added around it.

use super::{section, Field, Section, Type, SECTIONS};
use alloc::string::String;
use alloc::vec::Vec;

const HEADER: &str = include_str!("header.md");

/// The page, with a final newline.
pub(crate) fn render() -> String {
    let mut out = String::from(HEADER);
    out.push_str("\n## Sections\n\n");
    for s in SECTIONS {
        out.push_str(&["- [", &title(s), "](#", &section_anchor(s.path), ")\n"].concat());
    }
    for s in SECTIONS {
        out.push_str(
            &[
                "\n<a id=\"",
                &section_anchor(s.path),
                "\"></a>\n\n## ",
                &title(s),
                "\n\n",
            ]
            .concat(),
        );
        out.push_str(s.about);
        out.push('\n');
        for f in s.fields {
            render_field(&mut out, s, f);
        }
    }
    out
}

fn title(s: &Section) -> String {
    if s.path.is_empty() {
        String::from("The document")
    } else {
        ["`", s.path, "`"].concat()
    }
}

/// A field's anchor: `routes[].order.early` → `routes-order-early`.
fn anchor(path: &str) -> String {
    path.replace("[]", "").replace('.', "-")
}

/// A section's anchor: `section-` and its path's (`section-routes`, `section-document`), apart
/// from the field that holds the section (`routes`).
fn section_anchor(path: &str) -> String {
    if path.is_empty() {
        return String::from("section-document");
    }
    ["section-", &anchor(path)].concat()
}

/// A field's path: its section's, a dot, its name.
fn path(s: &Section, f: &Field) -> String {
    if s.path.is_empty() {
        String::from(f.name)
    } else {
        [s.path, ".", f.name].concat()
    }
}

fn render_field(out: &mut String, s: &Section, f: &Field) {
    let path = path(s, f);
    out.push_str(
        &[
            "\n<a id=\"",
            &anchor(&path),
            "\"></a>\n\n### `",
            &path,
            "`\n\n",
        ]
        .concat(),
    );
    out.push_str(&["- type: ", &type_name(&f.ty), "\n"].concat());
    out.push_str(&["- default: ", f.default, "\n\n"].concat());
    out.push_str(f.meaning);
    out.push('\n');
}

/// How the page names a shape.
fn type_name(ty: &Type) -> String {
    match ty {
        Type::Text => String::from("string"),
        Type::Header => String::from("header name"),
        Type::Path => String::from("path (starts with `/`)"),
        Type::Bool => String::from("boolean"),
        Type::True => String::from("`true`"),
        Type::False => String::from("`false`"),
        Type::Choice(names) => {
            let quoted: Vec<String> = names.iter().map(|n| ["`\"", n, "\"`"].concat()).collect();
            quoted.join(" | ")
        }
        Type::Duration => String::from("[duration](#durations-and-sizes)"),
        Type::Size => String::from("[size](#durations-and-sizes)"),
        Type::Share => {
            String::from("a number of records, a percentage of `capacity` (`\"1%\"`…`\"100%\"`) or `\"off\"`")
        }
        Type::ByteShare => String::from(
            "a [size](#durations-and-sizes), a percentage of `max_memory` (`\"1%\"`…`\"100%\"`) or `\"off\"`",
        ),
        Type::Pressure => String::from("a percentage, `\"0%\"`…`\"100%\"`"),
        Type::Integer(min, max) => alloc::format!("integer, {min}…{max}"),
        Type::Array(item @ Type::OneOf(_)) => ["array of (", &type_name(item), ")"].concat(),
        Type::Array(item) => ["array of ", &type_name(item)].concat(),
        Type::Tuple(items) => {
            let names: Vec<String> = items.iter().map(type_name).collect();
            ["[", &names.join(", "), "]"].concat()
        }
        Type::Section(path) => {
            let name = section(path).map_or(*path, |s| s.path);
            ["object ([`", name, "`](#", &section_anchor(name), "))"].concat()
        }
        Type::Member(name, value) => ["`{\"", name, "\": …}` (", &type_name(value), ")"].concat(),
        Type::OneOf(shapes) => {
            let names: Vec<String> = shapes.iter().map(type_name).collect();
            names.join(" | ")
        }
        Type::Retired => String::from("— (no longer read: refused)"),
    }
}
