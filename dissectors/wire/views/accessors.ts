// The wire views' accessors generated from the field tables at build time: tools/views.mjs
// replaces dist/dissectors/wire/views/accessors.js with a module whose prebuiltAccessors()
// returns each accessor as a function of its own, keyed by its source text (field.ts
// compiled()). This stand-in, what runs from source (tsx) or after tsc alone, has none: the
// views compile them at run time.

/** The helpers the generated accessors call (field.ts). */
type Helper = (...args: never[]) => unknown;

/** Generated accessors by source text; undefined: none generated (compile at run time). */
export function prebuiltAccessors(_readUint: Helper, _writeUint: Helper, _setBits: Helper, _read64: Helper): ReadonlyMap<string, (...args: never[]) => unknown> | undefined {
  return undefined;
}
