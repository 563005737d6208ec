/**
 * Helpers that turn whatever the gateway hands a hook into plain JSON that can
 * be posted and written to the queue file, without ever throwing.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

const MAX_DEPTH = 40;

/**
 * Deep-copy `value` into JSON-safe data: functions and symbols are dropped,
 * cycles become "[Circular]", Dates become ISO strings, bigints strings, Errors
 * `{name, message}`, Maps/Sets arrays, binary data a short marker, and
 * non-finite numbers null. Never throws (a getter that throws is skipped).
 */
export function toJsonSafe(value: unknown, standsFor: object[] = []): JsonValue | undefined {
  // `standsFor`: originals that `value` is a copy of, so a reference back to
  // them is reported as circular too.
  return convert(value, new Set<object>(standsFor), 0);
}

function convert(value: unknown, path: Set<object>, depth: number): JsonValue | undefined {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "bigint":
      return value.toString();
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
    default:
      break;
  }
  if (value === null) return null;
  const obj = value as object;
  if (depth >= MAX_DEPTH) return "[MaxDepth]";
  if (path.has(obj)) return "[Circular]";

  if (obj instanceof Date) {
    return Number.isNaN(obj.getTime()) ? null : obj.toISOString();
  }
  if (obj instanceof Error) {
    return { name: obj.name, message: obj.message };
  }
  if (ArrayBuffer.isView(obj) || obj instanceof ArrayBuffer) {
    return `[binary ${(obj as ArrayBuffer).byteLength} bytes]`;
  }

  path.add(obj);
  try {
    if (Array.isArray(obj) || obj instanceof Set) {
      const out: JsonValue[] = [];
      for (const item of obj as Iterable<unknown>) {
        const converted = convert(item, path, depth + 1);
        out.push(converted === undefined ? null : converted);
      }
      return out;
    }
    if (obj instanceof Map) {
      const out: JsonValue[] = [];
      for (const [k, v] of obj) {
        const key = convert(k, path, depth + 1);
        const val = convert(v, path, depth + 1);
        out.push([key === undefined ? null : key, val === undefined ? null : val]);
      }
      return out;
    }
    // Objects with their own toJSON (URL, Buffer-likes, custom classes).
    const maybeToJson = (obj as { toJSON?: unknown }).toJSON;
    if (typeof maybeToJson === "function") {
      try {
        return convert(maybeToJson.call(obj), path, depth + 1);
      } catch {
        return undefined;
      }
    }
    const out: { [key: string]: JsonValue } = {};
    for (const key of Object.keys(obj)) {
      let item: unknown;
      try {
        item = (obj as Record<string, unknown>)[key];
      } catch {
        continue;
      }
      const converted = convert(item, path, depth + 1);
      if (converted !== undefined) out[key] = converted;
    }
    return out;
  } finally {
    path.delete(obj);
  }
}

/** Keys never forwarded from a hook's ctx: gateway config (secrets), capabilities, callbacks. */
const CTX_DROP_KEYS = new Set([
  "config",
  "cfg",
  "runtimeConfig",
  "pluginConfig",
  "toolAuthority",
  "hookInvocation",
  "getCron",
  "getSessionExtension",
  "abortSignal",
]);

/** Keys never forwarded from `event.context` (OpenClaw injects this plugin's own config there). */
const EVENT_CONTEXT_DROP_KEYS = new Set(["pluginConfig", "config", "cfg"]);

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function withoutKeys(obj: Record<string, unknown>, drop: Set<string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(obj)) {
    if (drop.has(key)) continue;
    try {
      out[key] = obj[key];
    } catch {
      // a throwing getter: skip it
    }
  }
  return out;
}

/** JSON-safe copy of a hook ctx, without config objects (they hold secrets) or capabilities. */
export function sanitizeCtx(ctx: unknown): JsonValue {
  if (!isPlainRecord(ctx)) {
    const converted = toJsonSafe(ctx);
    return converted === undefined ? null : converted;
  }
  return toJsonSafe(withoutKeys(ctx, CTX_DROP_KEYS), [ctx]) ?? null;
}

/**
 * JSON-safe copy of a hook event. Drops `event.context.pluginConfig` (OpenClaw
 * passes the plugin's own config, token included, to each handler there) and
 * top-level config objects, and keeps only the last `keepMessages` entries of
 * `event.messages` when `keepMessages` is given.
 */
export function sanitizeEvent(event: unknown, keepMessages?: number): JsonValue {
  if (!isPlainRecord(event)) {
    const converted = toJsonSafe(event);
    return converted === undefined ? null : converted;
  }
  const originals: object[] = [event];
  const copy = withoutKeys(event, new Set(["cfg", "config", "pluginConfig"]));
  if (isPlainRecord(copy.context)) {
    originals.push(copy.context);
    copy.context = withoutKeys(copy.context, EVENT_CONTEXT_DROP_KEYS);
  }
  if (keepMessages !== undefined && Array.isArray(copy.messages)) {
    copy.messages = keepMessages > 0 ? copy.messages.slice(-keepMessages) : [];
  }
  return toJsonSafe(copy, originals) ?? null;
}
