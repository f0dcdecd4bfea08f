// Checks a value against the service's own JSON schemas (from /openapi.json) before the page posts it,
// so a link's query, or a shared plan's `jobs=`, is never sent as given: unknown fields are dropped
// and reported, invalid ones named. Only the JSON-schema keywords pydantic emits for these models are
// handled; anything else is left for the server, which validates again.
"use strict";

const GpucostSchema = (() => {
  let defs = {};
  const MAX_DEPTH = 16;

  function use(schemas) { defs = schemas || {}; }
  function resolve(s) {
    if (s && s.$ref) return defs[s.$ref.split("/").pop()] || {};
    return s || {};
  }
  function get(name) { return defs[name] ? resolve(defs[name]) : null; }

  function typeOf(v) {
    if (v === null) return "null";
    if (Array.isArray(v)) return "array";
    if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
    return typeof v;
  }
  function typeMatches(v, type) {
    const t = typeOf(v);
    if (type === "number") return (t === "number" || t === "integer") && Number.isFinite(v);
    return t === type;
  }
  const show = (v) => (typeof v === "string" ? `"${v}"` : String(v));

  // Error messages, each "path: reason"; none means the value is valid.
  function errors(v, schema, path, depth = 0) {
    const s = resolve(schema);
    if (depth > MAX_DEPTH) return [`${path}: nested too deeply`];
    const alts = s.anyOf || s.oneOf;
    if (alts) {
      const each = alts.map((a) => errors(v, a, path, depth + 1));
      if (each.some((e) => e.length === 0)) return [];
      // Name the reason of the alternative of the value's own type, if there is one.
      const same = alts.findIndex((a) => resolve(a).type && typeMatches(v, resolve(a).type));
      if (same >= 0) return each[same];
      const allowed = alts.map((a) => { const r = resolve(a); return r.const !== undefined ? show(r.const) : r.type || "object"; });
      return [`${path}: must be ${[...new Set(allowed)].join(" or ")}`];
    }
    if (s.type && !typeMatches(v, s.type)) {
      const what = s.type === "integer" ? "a whole number" : `${/^[aeiou]/.test(s.type) ? "an" : "a"} ${s.type}`;
      return [`${path}: must be ${what}`];
    }
    if (s.const !== undefined && v !== s.const) return [`${path}: must be ${show(s.const)}`];
    if (Array.isArray(s.enum) && !s.enum.includes(v)) return [`${path}: must be one of ${s.enum.join(", ")}`];
    if (typeof v === "number") {
      if (s.minimum !== undefined && v < s.minimum) return [`${path}: must be at least ${s.minimum}`];
      if (s.maximum !== undefined && v > s.maximum) return [`${path}: must be at most ${s.maximum}`];
      if (s.exclusiveMinimum !== undefined && v <= s.exclusiveMinimum) return [`${path}: must be more than ${s.exclusiveMinimum}`];
      if (s.exclusiveMaximum !== undefined && v >= s.exclusiveMaximum) return [`${path}: must be less than ${s.exclusiveMaximum}`];
    }
    if (typeof v === "string") {
      if (s.minLength !== undefined && v.length < s.minLength) return [`${path}: must not be empty`];
      if (s.maxLength !== undefined && v.length > s.maxLength) return [`${path}: at most ${s.maxLength} characters`];
    }
    if (Array.isArray(v)) {
      if (s.maxItems !== undefined && v.length > s.maxItems) return [`${path}: at most ${s.maxItems} items`];
      if (s.minItems !== undefined && v.length < s.minItems) return [`${path}: at least ${s.minItems} item(s)`];
      if (s.items) return v.flatMap((x, i) => errors(x, s.items, `${path}[${i}]`, depth + 1));
    }
    if (typeOf(v) === "object" && s.properties) {
      const out = [];
      for (const req of s.required || []) if (!(req in v)) out.push(`${path}.${req}: required`);
      for (const [k, x] of Object.entries(v)) {
        if (s.properties[k]) out.push(...errors(x, s.properties[k], `${path}.${k}`, depth + 1));
        else if (s.additionalProperties === false) out.push(`${path}.${k}: unknown field`);
      }
      return out;
    }
    return [];
  }

  // A copy of an object without the keys its schema does not know (recursing into known objects),
  // with a note per dropped key.
  function withoutUnknown(v, schema, path, notes, depth = 0) {
    const s = resolve(schema);
    if (depth > MAX_DEPTH || typeOf(v) !== "object" || !s.properties) return v;
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      if (!s.properties[k]) {
        if (s.additionalProperties === false) { notes.push(`${path}.${k}: unknown field, ignored`); continue; }
        out[k] = x;
      } else {
        out[k] = withoutUnknown(x, s.properties[k], `${path}.${k}`, notes, depth + 1);
      }
    }
    return out;
  }

  return { use, get, resolve, errors, withoutUnknown };
})();
