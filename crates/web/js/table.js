// State tables (`docs/semantics.md` §8): a business object's one-way life, declared as data in the same
// format the edge's `routes[].order.table` reads, validated and answered by the core.

import * as wasm from './wasm.js';
import { IdemgateError } from './errors.js';
import { joinParts } from './bytes.js';

/** Only `fromJSON` and `submit` make tables: a table is always one the core validated. */
const MADE_HERE = Symbol('StateTable');

let submit = null;
const encoder = new TextEncoder();

/**
 * Writes a parsed JSON value as the outline the core rebuilds it from (crates/web/src/outline.rs):
 * `0` null, a number or a boolean; `1, len` a string; `2, n` an array; `3, n` an object, each
 * member its key's length then its value; strings' UTF-8 bytes in `text`, in order. It decides
 * nothing: the core validates the table (`DeclaredTable`, as the edge's `order.table`).
 */
function outline(value, text, shape) {
  const string = (s) => {
    const bytes = encoder.encode(s);
    shape.push(bytes.length);
    text.push(bytes);
  };
  if (typeof value === 'string') {
    shape.push(1);
    string(value);
  } else if (Array.isArray(value)) {
    shape.push(2, value.length);
    for (const item of value) outline(item, text, shape);
  } else if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    shape.push(3, keys.length);
    for (const key of keys) {
      string(key);
      outline(value[key], text, shape);
    }
  } else {
    shape.push(0);
  }
}

function declare(text, shape) {
  const { joined } = joinParts(text);
  return new StateTable(MADE_HERE, wasm.StateTable.declare(joined, Uint32Array.from(shape)));
}

/**
 * A state table the core validated: `{ initial?, states?, terminal?, transitions: [[from, event,
 * to], …] }`. `on` answers an event as an application applies it; `arrival` as an edge that
 * guards the order of events does (early and illegal told apart). Every answer is the core's.
 */
export class StateTable {
  #inner;
  #shape;

  /** Use `StateTable.fromJSON(…)` (or `StateTable.submit`). */
  constructor(token, inner) {
    if (token !== MADE_HERE) {
      throw new IdemgateError('invalid_argument', 'make a StateTable with StateTable.fromJSON(table)');
    }
    this.#inner = inner;
    const { initial, states, terminal } = inner.describe();
    this.#shape = { initial, states: Object.freeze(states), terminal: Object.freeze(terminal) };
  }

  /**
   * A table from its declaration: JSON text or the parsed object. Throws `IdemgateError` with the
   * core's `transition_table_*` code for a table it refuses (unknown member, no transitions, an
   * edge that is not `[from, event, to]`, an unknown state, two transitions for one event from
   * one state, a terminal state with a way out, not JSON).
   */
  static fromJSON(table) {
    let value;
    if (typeof table === 'string') {
      try {
        value = JSON.parse(table);
      } catch {
        // No value: the core answers a text it cannot read (`transition_table_malformed`).
        return declare([], []);
      }
    } else {
      try {
        // As JSON sees it (`toJSON`, no `undefined` members); `undefined` itself is `null`.
        value = JSON.parse(JSON.stringify(table) ?? 'null');
      } catch (cause) {
        throw new IdemgateError('invalid_argument', 'the table cannot be written as JSON', { cause });
      }
    }
    const text = [];
    const shape = [];
    try {
      outline(value, text, shape);
    } catch {
      // Nested deeper than this engine's stack: far past what the core reads (no value either).
      return declare([], []);
    }
    return declare(text, shape);
  }

  /** The core's submit-button lifecycle (what `Intent` and `guardSubmit` move through). */
  static get submit() {
    submit ??= new StateTable(MADE_HERE, wasm.StateTable.submit());
    return submit;
  }

  /** The state an object no event has moved yet starts in. */
  get initial() {
    return this.#shape.initial;
  }

  /** Every state, in the table's order. */
  get states() {
    return this.#shape.states;
  }

  /** The states with no way out, in the table's order. */
  get terminal() {
    return this.#shape.terminal;
  }

  /**
   * `event` at `state`: `{ outcome: 'apply', state: next }`, or `{ outcome: 'already_applied',
   * state }` (applied before: acknowledge, change nothing). Throws `transition_illegal`,
   * `transition_unknown_state` or `transition_unknown_event`.
   */
  on(state, event) {
    return this.#inner.answer(String(state), String(event), false);
  }

  /**
   * `event` arriving at `state`, as an order-guarded edge decides: `{ outcome, state }` with
   * outcome `apply` (state: next), `already_applied` (applied before, or stale), `early` (a state
   * the object has not reached yet accepts it: deliver it again later) or `illegal` (no later
   * state accepts it); the state stays but for `apply`. Throws `transition_unknown_state` or
   * `transition_unknown_event`.
   */
  arrival(state, event) {
    return this.#inner.answer(String(state), String(event), true);
  }
}
