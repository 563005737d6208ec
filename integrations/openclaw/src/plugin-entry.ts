/**
 * Local stand-in for `definePluginEntry` from `openclaw/plugin-sdk/plugin-entry`.
 *
 * In OpenClaw the SDK helper does no work of its own: it takes
 * `{ id, name, description, configSchema?, register }` and hands back the
 * same fields as a plain object (filling in an empty config schema when none
 * is given). The gateway's loader accepts any default export of that shape,
 * and it validates the plugin's config against the `configSchema` of
 * `openclaw.plugin.json`, not against the one on the entry object.
 *
 * Importing the real helper would make the `openclaw` package (the whole
 * gateway) a runtime dependency of this small plugin, and the import fails
 * outright wherever that package is absent (our tests, CI). This module gives
 * the same object shape with no dependency at all, so the compiled plugin
 * loads the same way inside and outside a gateway.
 *
 * Only the small subset of the plugin API this plugin touches is typed here.
 */

/** Logger handed to plugins (`api.logger`); `debug` is optional in OpenClaw. */
export interface PluginLogger {
  debug?: (message: string) => void;
  info: (message: string) => void;
  warn: (message: string) => void;
  error: (message: string) => void;
}

/** Options accepted by `api.on(hookName, handler, opts)`. */
export interface HookRegistrationOptions {
  priority?: number;
  timeoutMs?: number;
}

/** A typed plugin hook handler: `(event, ctx) => result | Promise<result>`. */
export type TypedHookHandler = (event: unknown, ctx: unknown) => unknown;

/** An internal (command/session/gateway) hook handler: `(event) => void`. */
export type InternalHookHandler = (event: unknown) => unknown;

/** The part of OpenClaw's plugin API (`OpenClawPluginApi`) used by this plugin. */
export interface PluginApiSubset {
  id?: string;
  /** "full" for a live gateway load; other modes are discovery/setup/CLI loads. */
  registrationMode?: string;
  pluginConfig?: Record<string, unknown>;
  logger?: PluginLogger;
  on?: (hookName: string, handler: TypedHookHandler, opts?: HookRegistrationOptions) => unknown;
  registerHook?: (
    events: string | string[],
    handler: InternalHookHandler,
    opts?: { name: string; description?: string },
  ) => unknown;
  /** Register an agent tool, or a factory that makes it for each run's context. */
  registerTool?: (tool: unknown, opts?: { name?: string; optional?: boolean }) => unknown;
}

/** Config schema object as OpenClaw's plugin definitions carry it. */
export interface PluginConfigSchema {
  jsonSchema?: Record<string, unknown>;
  uiHints?: Record<string, Record<string, unknown>>;
}

export interface PluginEntryOptions {
  id: string;
  name: string;
  description: string;
  configSchema?: PluginConfigSchema;
  register: (api: PluginApiSubset) => void;
}

export interface PluginEntry {
  id: string;
  name: string;
  description: string;
  configSchema: PluginConfigSchema;
  register: (api: PluginApiSubset) => void;
}

const EMPTY_CONFIG_SCHEMA: PluginConfigSchema = {
  jsonSchema: { type: "object", additionalProperties: false, properties: {} },
};

/** Same contract as OpenClaw's `definePluginEntry`: returns the plugin definition object. */
export function definePluginEntry(options: PluginEntryOptions): PluginEntry {
  return {
    id: options.id,
    name: options.name,
    description: options.description,
    configSchema: options.configSchema ?? EMPTY_CONFIG_SCHEMA,
    register: options.register,
  };
}
