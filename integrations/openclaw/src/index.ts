/**
 * SessionHub plugin for the OpenClaw gateway.
 *
 * Forwards the gateway's lifecycle hook events to
 * `POST {baseUrl}/api/v1/hooks/openclaw` as
 * `{"hook", "event", "ctx", "ts", "eventId"}` (fire-and-forget, with an
 * on-disk retry queue), and on the first prompt of each session prepends the
 * continuity preamble from `POST {baseUrl}/api/v1/continuity`.
 *
 * Nothing here throws into the gateway: every handler is wrapped, and only
 * the prompt hook (whose return value matters) is awaited by the gateway,
 * for at most `timeoutMs`.
 *
 * What the real gateway (OpenClaw 2026.9) does, and how the plugin meets it:
 * - the user's words on the agent/CLI path reach only `before_prompt_build`
 *   (`message_received` fires for channel messages): its prompt is forwarded
 *   as a prompt event, unless a channel message just brought the same words;
 * - `agent_end.messages` is the session's whole history: only the turn's own
 *   messages (from its last user message) are sent;
 * - `gateway_stop` runs before the shutdown/restart `session_end`s and
 *   `agent --local` exits right after its run: the forwarder keeps working
 *   after `gateway_stop`, and whatever is left when the process exits is
 *   delivered synchronously (bounded) or kept on disk;
 * - `/new` and `/reset` keep the session id: the session is asked for its
 *   continuity preamble again after such a reset;
 * - runs carry `ctx.trigger`: only the user's runs get a preamble;
 * - every install calls its default agent `main`: each record carries this
 *   gateway's instance id (config `gatewayId`, else one made once and kept
 *   next to the queue).
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SessionHubClient } from "./client.js";
import { resolveConfig, type SessionHubConfig } from "./config.js";
import { memoryTool, TOOL_PREFIX, toolDefinitions, type ToolContext } from "./memory-tools.js";
import { ContinuityInjector, MAX_PROMPT_CHARS, type ContinuityReport } from "./continuity.js";
import { deliverQueueSync } from "./exit-delivery.js";
import { Forwarder, type DeliveryReport, type SafeLogger } from "./forwarder.js";
import { sanitizeCtx, sanitizeEvent, toJsonSafe, type JsonValue } from "./json.js";
import {
  definePluginEntry,
  type PluginApiSubset,
  type PluginConfigSchema,
  type PluginEntry,
  type PluginLogger,
} from "./plugin-entry.js";
import { DiskQueue, type ForwardRecord } from "./queue.js";

export const PLUGIN_ID = "sessionhub";
export const PLUGIN_VERSION = "0.1.0";

/** Plugin hooks forwarded to SessionHub as they are (observation only). */
export const FORWARDED_HOOKS = [
  "session_start",
  "session_end",
  "before_compaction",
  "after_compaction",
  "before_reset",
  "message_received",
  "before_tool_call",
  "after_tool_call",
  "agent_end",
  "before_agent_finalize",
] as const;

/**
 * Hooks whose `event.messages` can hold a whole conversation: only the last
 * `recentMessages` entries are forwarded.
 */
export const MESSAGE_TRIMMED_HOOKS: ReadonlySet<string> = new Set([
  "agent_end",
  "before_agent_finalize",
  "before_reset",
  "before_compaction",
]);

/**
 * Prompt hook used for the continuity preamble (its return value matters).
 * `before_agent_start` is gone from OpenClaw 2026.9 (registering it only earns
 * an "unknown typed hook" warning on every load).
 */
export const PROMPT_HOOKS = ["before_prompt_build"] as const;

/** Internal (non-plugin) gateway events forwarded through `api.registerHook`. */
export const COMMAND_EVENTS = ["command:new", "command:reset", "command:stop"] as const;

/** Name of the internal-hook registration (OpenClaw requires a unique one). */
export const COMMAND_HOOK_NAME = "sessionhub-command-forwarder";

/** Hook names that must never be forwarded blindly through `extraHooks`. */
const NOT_FORWARDABLE: ReadonlySet<string> = new Set([
  ...PROMPT_HOOKS,
  "gateway_stop",
  "before_model_resolve",
  "agent_turn_prepare",
  "before_agent_reply",
  "before_agent_run",
  "before_dispatch",
  "reply_dispatch",
  "inbound_claim",
  "message_sending",
  "tool_result_persist",
  "before_message_write",
  "before_install",
  "subagent_delivery_target",
  "subagent_spawning",
]);

export interface SessionHubRuntimeOptions {
  /** Clock for the `ts` field (epoch ms). Default: Date.now. */
  now?: () => number;
  /** Id generator for `eventId`. Default: crypto.randomUUID. */
  newEventId?: () => string;
  /** fetch implementation. Default: the global fetch. */
  fetchImpl?: typeof fetch;
  /** Random source for backoff jitter. */
  random?: () => number;
}

export interface SessionHubRuntime {
  readonly config: SessionHubConfig;
  readonly queue: DiskQueue;
  readonly forwarder: Forwarder;
  readonly continuity: ContinuityInjector;
  /** Hook names registered through `api.on`, in registration order. */
  readonly registeredHooks: string[];
  /** SessionHub's memory tools registered through `api.registerTool`. */
  readonly registeredTools: string[];
  /** Build and submit the record for one plugin hook call. */
  forward(hook: string, event: unknown, ctx: unknown): ForwardRecord | undefined;
  /** Build and submit the record for one internal (command) hook call. */
  forwardInternal(event: unknown): ForwardRecord | undefined;
  /** Observe every HTTP delivery. */
  onDelivery(listener: (report: DeliveryReport) => void): void;
  /** Observe every continuity decision. */
  onContinuity(listener: (report: ContinuityReport) => void): void;
  /** Forget backoff and deliver the disk queue now. */
  flush(): Promise<void>;
  /** Wait until nothing is being sent. */
  idle(): Promise<void>;
  /** Bounded wait, stop, and write anything pending to the disk queue. */
  shutdown(budgetMs: number): Promise<void>;
  /** For the process exit: pending events to disk, then the disk queue to the server (bounded). */
  deliverAtExit(): number;
  /** This gateway's instance id, sent with every record. */
  readonly gatewayId: string;
  /** Stop timers and the worker (later events go straight to the disk queue). */
  stop(): void;
}

const runtimes = new WeakMap<object, SessionHubRuntime>();
/**
 * One queue object per queue file in this process: the gateway may register
 * the plugin more than once (reloads), and all access to one file must go
 * through one lock so a rewrite never drops a record another runtime added.
 */
const queuesByDir = new Map<string, DiskQueue>();

/**
 * Which sessions were asked for a preamble, per queue file (one gateway),
 * shared by its runtimes in this process (the gateway loads the plugin more
 * than once). What was started here is marked on disk (see ContinuityInjector).
 */
const askedByDir = new Map<string, Map<string, true>>();

function sharedAsked(config: SessionHubConfig): Map<string, true> {
  let asked = askedByDir.get(config.queueDir);
  if (!asked) {
    asked = new Map<string, true>();
    askedByDir.set(config.queueDir, asked);
  }
  return asked;
}

function sharedQueue(config: SessionHubConfig, log: SafeLogger): DiskQueue {
  let queue = queuesByDir.get(config.queueDir);
  if (!queue) {
    queue = new DiskQueue(config.queueDir, { maxEvents: config.maxQueueEvents, warn: (m) => log.warn(m) });
    queuesByDir.set(config.queueDir, queue);
  }
  return queue;
}
const liveRuntimes = new Set<SessionHubRuntime>();
let exitHookInstalled = false;

/** The runtime created for a given `api` object (tests and diagnostics). */
export function getSessionHubRuntime(api: object): SessionHubRuntime | undefined {
  return runtimes.get(api);
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // On exit only synchronous work runs: pending events go to disk, then the
  // disk queue is delivered by a child process the handler waits for (bounded).
  process.on("exit", () => {
    const delivered = new Set<DiskQueue>();
    for (const runtime of liveRuntimes) {
      try {
        if (delivered.has(runtime.queue)) runtime.forwarder.persistPendingSync();
        else runtime.deliverAtExit();
        delivered.add(runtime.queue);
      } catch {
        // nothing more can be done while exiting
      }
    }
  });
}

/** The instance id of this gateway: from config, else made once and kept beside the queue. */
export function resolveGatewayId(config: SessionHubConfig): string {
  if (config.gatewayId) return config.gatewayId;
  const file = join(config.queueDir, "gateway-id");
  try {
    const kept = readFileSync(file, "utf8").trim();
    if (/^[A-Za-z0-9._-]{1,64}$/.test(kept)) return kept;
  } catch {
    // not made yet
  }
  const made = randomUUID();
  try {
    mkdirSync(config.queueDir, { recursive: true, mode: 0o700 });
    writeFileSync(file, made + "\n", { mode: 0o600 });
  } catch {
    // unwritable: this process still sends one id for all its records
  }
  return made;
}

/** The turn's own messages: from its last user message on (all of them when there is none). */
export function turnMessages(messages: unknown[]): unknown[] {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (isRecord(m) && m.role === "user") return messages.slice(i);
  }
  return messages;
}

const USAGE_KEYS = ["input", "output", "cacheRead", "cacheWrite"] as const;

/**
 * The tokens of a turn's assistant messages (pi-ai's `usage`), summed, with the model
 * of the last one: sent beside the turn's messages, which may be cut to the last few.
 */
export function turnUsage(messages: unknown[]): Record<string, number | string> | undefined {
  const total: Record<string, number | string> = {};
  let found = false;
  for (const m of messages) {
    if (!isRecord(m) || m.role !== "assistant" || !isRecord(m.usage)) continue;
    for (const key of USAGE_KEYS) {
      const count = m.usage[key];
      if (typeof count === "number" && Number.isSafeInteger(count) && count >= 0) {
        total[key] = ((total[key] as number | undefined) ?? 0) + count;
        found = true;
      }
    }
    if (typeof m.model === "string") total.model = m.model;
  }
  return found ? total : undefined;
}

/** A run the user did not start (heartbeat, cron...), by the gateway's `ctx.trigger`. */
export function isBackgroundRun(ctx: unknown): boolean {
  return isRecord(ctx) && typeof ctx.trigger === "string" && ctx.trigger !== "" && ctx.trigger !== "user";
}

/** How long a channel message's words stand for the prompt built from them. */
const CHANNEL_PROMPT_MS = 5 * 60 * 1000;

/** Wrap the gateway's logger so logging can never throw and always has debug. */
export function makeSafeLogger(logger: PluginLogger | undefined): SafeLogger {
  const call = (level: keyof PluginLogger, message: string): void => {
    try {
      const fn = logger?.[level];
      if (typeof fn === "function") fn.call(logger, `[sessionhub] ${message}`);
    } catch {
      // a broken logger must not break the hook
    }
  };
  return {
    debug: (m) => call("debug", m),
    info: (m) => call("info", m),
    warn: (m) => call("warn", m),
    error: (m) => call("error", m),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function pickStrings(source: Record<string, unknown>, keys: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of keys) {
    const value = source[key];
    if (typeof value === "string" && value !== "") out[key] = value;
  }
  return out;
}

/** Build the runtime (client, queue, forwarder, continuity) for a resolved config. */
export function createSessionHubRuntime(
  config: SessionHubConfig,
  log: SafeLogger,
  options: SessionHubRuntimeOptions = {},
): SessionHubRuntime {
  const now = options.now ?? Date.now;
  const newEventId = options.newEventId ?? randomUUID;
  const client = new SessionHubClient({
    baseUrl: config.baseUrl,
    token: config.token,
    timeoutMs: config.timeoutMs,
    userAgent: `sessionhub-openclaw-plugin/${PLUGIN_VERSION}`,
    fetchImpl: options.fetchImpl,
  });
  const queue = sharedQueue(config, log);
  const forwarder = new Forwarder({
    client,
    queue,
    logger: log,
    batchSize: config.batchSize,
    retryBaseMs: config.retryBaseMs,
    retryMaxMs: config.retryMaxMs,
    random: options.random,
  });


  const gatewayId = resolveGatewayId(config);
  const continuity = new ContinuityInjector({
    client,
    forwarder,
    logger: log,
    timeoutMs: config.timeoutMs,
    enabled: config.injectPreamble,
    gatewayId,
    asked: sharedAsked(config),
    // Across processes too: the gateway starts a session in one and runs its
    // prompt hooks in another.
    freshDir: join(config.queueDir, "started"),
  });
  const submit = (hook: string, event: JsonValue, ctx: JsonValue): ForwardRecord => {
    const record: ForwardRecord = { hook, event, ctx, ts: now(), eventId: newEventId(), gateway: gatewayId };
    forwarder.submit(record);
    return record;
  };
  /** Words of recent channel messages: the prompt built from them is not a second prompt. */
  const channelWords = new Map<string, number>();
  const noteChannelMessage = (event: unknown): void => {
    const content = isRecord(event) && typeof event.content === "string" ? event.content.trim() : "";
    if (!content) return;
    const at = now();
    channelWords.set(content, at);
    for (const [words, seen] of channelWords) {
      if (at - seen > CHANNEL_PROMPT_MS || channelWords.size > 200) channelWords.delete(words);
    }
  };
  const fromChannel = (prompt: string): boolean => {
    const at = now();
    for (const [words, seen] of channelWords) {
      if (at - seen <= CHANNEL_PROMPT_MS && prompt.includes(words)) return true;
    }
    return false;
  };
  /** A reset in place (/new, /reset keep the id): the session is a new one for continuity. */
  const noteReset = (hook: string, event: unknown, ctx: unknown): void => {
    if (!isRecord(event)) return;
    const c = isRecord(ctx) ? ctx : {};
    const id = typeof event.sessionId === "string" ? event.sessionId : typeof c.sessionId === "string" ? c.sessionId : "";
    if (!id) return;
    if (hook === "session_start") continuity.sessionStarted(id);
    else if (event.nextSessionId === id) continuity.forget(id);
  };

  const runtime: SessionHubRuntime = {
    config,
    queue,
    forwarder,
    continuity,
    registeredHooks: [],
    registeredTools: [],
    forward(hook, event, ctx) {
      try {
        if (hook === "message_received") noteChannelMessage(event);
        if (hook === "session_start" || hook === "session_end") noteReset(hook, event, ctx);
        if (hook === "before_prompt_build") {
          // Only the user's words (never the history or the system prompt).
          const prompt = isRecord(event) && typeof event.prompt === "string" ? event.prompt : "";
          if (!prompt.trim() || fromChannel(prompt)) return undefined;
          return submit(hook, { prompt: prompt.slice(0, MAX_PROMPT_CHARS) }, sanitizeCtx(ctx));
        }
        if (hook === "agent_end" && isRecord(event) && Array.isArray(event.messages)) {
          // The whole history comes along: send the turn, as much of it as allowed.
          const turn = turnMessages(event.messages);
          const sent = config.recentMessages > 0 ? turn.slice(-config.recentMessages) : [];
          const cut = sent.length !== event.messages.length;
          const usage = cut ? turnUsage(turn) : undefined;
          const kept = cut
            ? { ...event, messages: sent, turnMessageCount: turn.length, ...(usage ? { turnUsage: usage } : {}) }
            : event;
          return submit(hook, sanitizeEvent(kept), sanitizeCtx(ctx));
        }
        const keep = MESSAGE_TRIMMED_HOOKS.has(hook) ? config.recentMessages : undefined;
        return submit(hook, sanitizeEvent(event, keep), sanitizeCtx(ctx));
      } catch (err) {
        log.warn(`could not forward ${hook}: ${String(err)}`);
        return undefined;
      }
    },
    forwardInternal(raw) {
      try {
        const ev = isRecord(raw) ? raw : {};
        const type = typeof ev.type === "string" ? ev.type : "command";
        const action = typeof ev.action === "string" ? ev.action : "";
        const hook = action ? `${type}:${action}` : type;
        const context = isRecord(ev.context) ? ev.context : {};
        // Only small, known fields: the internal context can carry the whole
        // gateway config (secrets) and full session entries.
        const slim: Record<string, unknown> = pickStrings(context, [
          "sessionId",
          "commandSource",
          "senderId",
          "workspaceDir",
          "agentId",
          "reason",
        ]);
        const entry = isRecord(context.sessionEntry) ? context.sessionEntry : null;
        const previous = isRecord(context.previousSessionEntry) ? context.previousSessionEntry : null;
        if (entry && typeof entry.sessionId === "string") slim.sessionEntryId = entry.sessionId;
        if (previous && typeof previous.sessionId === "string") slim.previousSessionId = previous.sessionId;
        const sessionKey = typeof ev.sessionKey === "string" ? ev.sessionKey : null;
        const event = toJsonSafe({
          type,
          action,
          sessionKey,
          timestamp: ev.timestamp,
          context: slim,
        }) ?? null;
        const ctx: Record<string, unknown> = { sessionKey };
        const sessionId = slim.sessionId ?? slim.sessionEntryId ?? slim.previousSessionId;
        if (sessionId) ctx.sessionId = sessionId;
        if (slim.agentId) ctx.agentId = slim.agentId;
        return submit(hook, event, toJsonSafe(ctx) ?? null);
      } catch (err) {
        log.warn(`could not forward an internal hook event: ${String(err)}`);
        return undefined;
      }
    },
    onDelivery: (listener) => forwarder.onDelivery(listener),
    onContinuity: (listener) => continuity.onReport(listener),
    flush: () => forwarder.flush(),
    idle: () => forwarder.idle(),
    async shutdown(budgetMs) {
      try {
        await forwarder.shutdown(budgetMs);
      } finally {
        liveRuntimes.delete(runtime);
      }
    },
    deliverAtExit() {
      forwarder.persistPendingSync();
      return deliverQueueSync(queue, {
        baseUrl: config.baseUrl,
        token: config.token,
        userAgent: `sessionhub-openclaw-plugin/${PLUGIN_VERSION}`,
        batchSize: config.batchSize,
        budgetMs: config.timeoutMs,
      });
    },
    gatewayId,
    stop() {
      forwarder.stop();
      liveRuntimes.delete(runtime);
    },
  };
  liveRuntimes.add(runtime);
  installExitHook();
  return runtime;
}

/** Call `fn`; swallow sync throws and async rejections, never let them reach the gateway. */
function guard<T>(log: SafeLogger, hook: string, fn: () => T): T | undefined {
  try {
    const result = fn();
    if (result && typeof (result as { then?: unknown }).then === "function") {
      return (result as unknown as Promise<unknown>).catch((err) => {
        log.warn(`${hook} handler failed: ${String(err)}`);
        return undefined;
      }) as T;
    }
    return result;
  } catch (err) {
    log.warn(`${hook} handler failed: ${String(err)}`);
    return undefined;
  }
}

/** Register every hook on `api`. Returns the runtime, or undefined when disabled. */
export function registerSessionHub(
  api: PluginApiSubset,
  options: SessionHubRuntimeOptions = {},
): SessionHubRuntime | undefined {
  const log = makeSafeLogger(api?.logger);
  try {
    const resolved = resolveConfig(api?.pluginConfig);
    if (!resolved.ok) {
      log.warn(`disabled: invalid config (${resolved.errors.join("; ")})`);
      return undefined;
    }
    if (typeof api.on !== "function") {
      log.warn("disabled: this gateway has no api.on (typed plugin hooks)");
      return undefined;
    }
    const config = resolved.config;
    const runtime = createSessionHubRuntime(config, log, options);
    runtimes.set(api, runtime);

    const on = (hook: string, handler: (event: unknown, ctx: unknown) => unknown, timeoutMs?: number): void => {
      try {
        const wrapped = (event: unknown, ctx: unknown): unknown => guard(log, hook, () => handler(event, ctx));
        if (timeoutMs === undefined) api.on!(hook, wrapped);
        else api.on!(hook, wrapped, { timeoutMs });
        runtime.registeredHooks.push(hook);
      } catch (err) {
        log.warn(`could not register hook ${hook}: ${String(err)}`);
      }
    };

    const forwarded = new Set<string>(FORWARDED_HOOKS);
    for (const extra of config.extraHooks) {
      if (NOT_FORWARDABLE.has(extra)) log.warn(`extraHooks: ${extra} cannot be forwarded; ignored`);
      else forwarded.add(extra);
    }
    for (const hook of forwarded) {
      // Observation only: hand the record over and return at once.
      on(hook, (event, ctx) => {
        runtime.forward(hook, event, ctx);
        return undefined;
      });
    }

    // The prompt hook: the user's words as a prompt event (the agent/CLI path
    // has no message_received), and the continuity preamble.
    on(
      "before_prompt_build",
      (event, ctx) => {
        if (!isBackgroundRun(ctx)) runtime.forward("before_prompt_build", event, ctx);
        return config.injectPreamble ? runtime.continuity.handle("before_prompt_build", event, ctx) : undefined;
      },
      config.timeoutMs + 500,
    );

    // gateway_stop comes before the shutdown/restart session_ends: deliver
    // what is pending now, and keep the forwarder running for those ends
    // (the exit handler sends whatever is left when the process goes).
    on("gateway_stop", () => runtime.forwarder.idleWithin(config.timeoutMs));

    if (typeof api.registerHook === "function") {
      try {
        api.registerHook(
          [...COMMAND_EVENTS],
          (event: unknown) => {
            guard(log, "command", () => runtime.forwardInternal(event));
          },
          { name: COMMAND_HOOK_NAME, description: "Forward /new, /reset and /stop to SessionHub" },
        );
      } catch (err) {
        log.warn(`could not register command hooks: ${String(err)}`);
      }
    }

    // SessionHub's memory as agent tools: each call goes to the MCP endpoint, naming the
    // session that asks (the tool context carries it).
    if (config.memoryTools && typeof api.registerTool === "function") {
      for (const definition of toolDefinitions()) {
        const name = TOOL_PREFIX + definition.name;
        try {
          api.registerTool(
            (ctx: unknown) => memoryTool(definition, config, toolContextOf(ctx), options.fetchImpl),
            { name },
          );
          runtime.registeredTools.push(name);
        } catch (err) {
          log.warn(`could not register tool ${name}: ${String(err)}`);
        }
      }
    }

    // Only a live gateway load ("full") may start background work; discovery,
    // setup and CLI-metadata loads just see the registrations.
    const mode = api.registrationMode;
    if (mode !== undefined && mode !== "full") {
      // A CLI command's metadata load: it must not touch the gateway's queue
      // file when that process exits.
      liveRuntimes.delete(runtime);
    }
    if (mode === undefined || mode === "full") {
      runtime.forwarder.start();
      log.info(
        `forwarding ${runtime.registeredHooks.length} hooks to ${config.baseUrl} as gateway ${runtime.gatewayId} (queue: ${runtime.queue.file}); ${runtime.registeredTools.length} memory tools`,
      );
      if (!config.token) {
        log.error(
          "!!! no SessionHub token (plugins.entries.sessionhub.config.token is empty: an unset ${...} variable?): " +
            `events are kept in ${runtime.queue.file} until a token is set !!!`,
        );
      }
    }
    return runtime;
  } catch (err) {
    log.error(`failed to start: ${String(err)}`);
    return undefined;
  }
}

/** The session a tool is made for, from OpenClaw's tool context. */
function toolContextOf(ctx: unknown): ToolContext {
  if (!isRecord(ctx)) return {};
  const text = (value: unknown): string | undefined => (typeof value === "string" && value ? value : undefined);
  return { sessionId: text(ctx.sessionId), agentId: text(ctx.agentId), sessionKey: text(ctx.sessionKey) };
}

/** JSON Schema of the plugin config, read from openclaw.plugin.json (the authoritative copy). */
function loadConfigSchema(): PluginConfigSchema {
  try {
    const manifestUrl = new URL("../../openclaw.plugin.json", import.meta.url);
    const manifest = JSON.parse(readFileSync(manifestUrl, "utf8")) as Record<string, unknown>;
    const schema: PluginConfigSchema = {};
    if (isRecord(manifest.configSchema)) schema.jsonSchema = manifest.configSchema;
    if (isRecord(manifest.uiHints)) schema.uiHints = manifest.uiHints as PluginConfigSchema["uiHints"];
    if (schema.jsonSchema) return schema;
  } catch {
    // fall through to a permissive schema; the gateway validates against the manifest anyway
  }
  return { jsonSchema: { type: "object" } };
}

/** Build a plugin entry; tests pass options (clock, id generator...). */
export function createPluginEntry(options: SessionHubRuntimeOptions = {}): PluginEntry {
  return definePluginEntry({
    id: PLUGIN_ID,
    name: "SessionHub",
    description: "Forwards OpenClaw lifecycle hooks to SessionHub and injects its continuity preamble.",
    configSchema: loadConfigSchema(),
    register(api) {
      registerSessionHub(api, options);
    },
  });
}

export default createPluginEntry();
