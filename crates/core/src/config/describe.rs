//! The configuration document described once, as data: every section and field with its shape,
//! its default (as the reader and `compile` apply it) and its meaning. The reference page and the
//! JSON Schema in `docs/reference/` are rendered from it, and the reader's own field and choice
//! lists are held equal to it (`read/tests.rs`), so neither can drift from what the filter reads.
//!
//! Only tests use it: the filter and the browser module never describe their configuration, so
//! none of this text ships in a `.wasm`.

mod markdown;
mod route;
mod schema;
mod sections;
#[cfg(test)]
mod tests;

/// The shape a field's value must have.
#[derive(Clone, Copy)]
pub(crate) enum Type {
    /// Any string.
    Text,
    /// An HTTP header name (a token: letters, digits and ``!#$%&'*+-.^_`|~``).
    Header,
    /// A path: starts with `/`.
    Path,
    Bool,
    /// Only `true`.
    True,
    /// Only `false`.
    False,
    /// One of these strings.
    Choice(&'static [&'static str]),
    /// `"250ms"`, `"30s"`, `"1h30m"`: digits and a unit (ms, s, m, h, d), repeated.
    Duration,
    /// A byte count, or a size such as `"64KiB"`.
    Size,
    /// A number of records, a percentage of `capacity` (`"1%"`…`"100%"`) or `"off"`.
    Share,
    /// A size, a percentage of `max_memory` (`"1%"`…`"100%"`) or `"off"`.
    ByteShare,
    /// A percentage from `"0%"` to `"100%"`.
    Pressure,
    /// An integer from .0 to .1.
    Integer(u64, u64),
    Array(&'static Type),
    /// An array of exactly these items, in order.
    Tuple(&'static [Type]),
    /// An object: the section of this path.
    Section(&'static str),
    /// An object of exactly one member, of this name and shape.
    Member(&'static str, &'static Type),
    /// Any one of these shapes.
    OneOf(&'static [Type]),
    /// No longer read: any value but `null` is refused (with the way forward).
    Retired,
}

/// One member of a section.
pub(crate) struct Field {
    pub(crate) name: &'static str,
    pub(crate) ty: Type,
    /// As the reference shows it (Markdown). When it is one code span holding JSON, the schema
    /// gives that JSON as the field's `default`.
    pub(crate) default: &'static str,
    /// What the field does (Markdown).
    pub(crate) meaning: &'static str,
    /// The section is refused without it.
    pub(crate) required: bool,
}

/// An object of the document. `path` names it as error messages do (`routes[].order`), and is
/// its anchor and its schema definition.
pub(crate) struct Section {
    pub(crate) path: &'static str,
    /// What the section is, a sentence (Markdown).
    pub(crate) about: &'static str,
    pub(crate) fields: &'static [Field],
    /// `null` reads as "not given" for each field (every section the reader maps; not the
    /// ordering table, which has a reader of its own).
    pub(crate) nullable: bool,
}

/// A field, optional, `null` as "not given".
const fn field(
    name: &'static str,
    ty: Type,
    default: &'static str,
    meaning: &'static str,
) -> Field {
    Field {
        name,
        ty,
        default,
        meaning,
        required: false,
    }
}

/// A field the section is refused without.
const fn required(name: &'static str, ty: Type, meaning: &'static str) -> Field {
    Field {
        name,
        ty,
        default: "— (required)",
        meaning,
        required: true,
    }
}

/// Every section, the document's own first, in the order the reference lists them.
pub(crate) const SECTIONS: &[&Section] = &[
    &sections::ROOT,
    &route::ROUTE,
    &route::SIGNATURE,
    &route::PASS_THROUGH,
    &route::ORDER,
    &route::TABLE,
    &route::EARLY,
    &route::ROUTE_IN_FLIGHT,
    &sections::IN_FLIGHT,
    &sections::VERIFIED_HEADER,
    &sections::UPSTREAM,
    &sections::FINGERPRINT,
    &sections::PROBLEMS,
    &sections::SHARES,
    &sections::STORE,
    &sections::TOKEN,
];

/// The section at `path`.
pub(crate) fn section(path: &str) -> Option<&'static Section> {
    SECTIONS.iter().copied().find(|s| s.path == path)
}
