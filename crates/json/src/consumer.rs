//! The tokenizer's two consumers as one type: the tokenizer's loop is generic over its [`Sink`],
//! and instantiating it for each consumer would ship the whole grammar twice in the filter's
//! `.wasm`. Dispatching on this enum instead costs one well-predicted branch per event (the
//! hasher's events stay inlined) and keeps one copy of the grammar. The document reader is behind
//! a trait object, so a module that only hashes (the browser's) links no tree-building code.

use super::hasher::{Canon, Frame};
use super::number::Decimal;
use super::tokenizer::{Kind, Literal, Sink};
use super::JsonError;

pub(super) enum Consumer<'a, 'p> {
    Canon(&'a mut Canon<'p>),
    /// The document reader (`document::Builder`).
    Tree(&'a mut dyn Sink<Mark = ()>),
}

impl Sink for Consumer<'_, '_> {
    type Mark = Frame;

    #[inline]
    fn element(&mut self, depth: usize, index: u64) {
        match self {
            Consumer::Canon(c) => c.element(depth, index),
            Consumer::Tree(t) => t.element(depth, index),
        }
    }

    #[inline]
    fn open(&mut self, kind: Kind) -> Frame {
        match self {
            Consumer::Canon(c) => c.open(kind),
            Consumer::Tree(t) => {
                t.open(kind);
                Frame::NONE
            }
        }
    }

    #[inline]
    fn close(&mut self, kind: Kind, mark: Frame, at: u64) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.close(kind, mark, at),
            Consumer::Tree(t) => t.close(kind, (), at),
        }
    }

    #[inline]
    fn string_begin(&mut self, key: bool, at: u64) {
        match self {
            Consumer::Canon(c) => c.string_begin(key, at),
            Consumer::Tree(t) => t.string_begin(key, at),
        }
    }

    #[inline]
    fn text(&mut self, bytes: &[u8]) {
        match self {
            Consumer::Canon(c) => c.text(bytes),
            Consumer::Tree(t) => t.text(bytes),
        }
    }

    #[inline]
    fn text_nul(&mut self) {
        match self {
            Consumer::Canon(c) => c.text_nul(),
            Consumer::Tree(t) => t.text_nul(),
        }
    }

    #[inline]
    fn string_end(&mut self, key: bool) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.string_end(key),
            Consumer::Tree(t) => t.string_end(key),
        }
    }

    #[inline]
    fn number(&mut self, value: Decimal<'_>, start: u64, end: u64) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.number(value, start, end),
            Consumer::Tree(t) => t.number(value, start, end),
        }
    }

    #[inline]
    fn literal(&mut self, literal: Literal) -> Result<(), JsonError> {
        match self {
            Consumer::Canon(c) => c.literal(literal),
            Consumer::Tree(t) => t.literal(literal),
        }
    }
}
