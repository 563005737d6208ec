import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";

/** The plugin's resolved configuration (defaults applied, values clamped). */
export interface SessionHubConfig {
  baseUrl: string;
  token: string;
  timeoutMs: number;
  queueDir: string;
  recentMessages: number;
  injectPreamble: boolean;
  batchSize: number;
  maxQueueEvents: number;
  retryBaseMs: number;
  retryMaxMs: number;
  extraHooks: string[];
  /** This gateway's name in SessionHub (default: an id made once, kept in queueDir). */
  gatewayId: string;
  /** Offer SessionHub's memory tools (search, a session's memory, pins) to the agents. */
  memoryTools: boolean;
}

export const DEFAULTS = {
  timeoutMs: 2000,
  recentMessages: 40,
  injectPreamble: true,
  memoryTools: true,
  batchSize: 100,
  maxQueueEvents: 10000,
  retryBaseMs: 1000,
  retryMaxMs: 60000,
} as const;

/** Largest batch the server takes in one request. */
export const SERVER_MAX_BATCH = 1000;

export function defaultQueueDir(): string {
  return join(homedir(), ".openclaw", "sessionhub-queue");
}

export type ConfigResult = { ok: true; config: SessionHubConfig } | { ok: false; errors: string[] };

function intIn(value: unknown, fallback: number, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isFinite(value)) return fallback;
  return Math.min(max, Math.max(min, Math.round(value)));
}

function expandHome(path: string): string {
  if (path === "~") return homedir();
  if (path.startsWith("~/")) return join(homedir(), path.slice(2));
  return path;
}

/**
 * Turn `api.pluginConfig` into a usable config. OpenClaw validates the config
 * against the manifest's JSON Schema before the plugin loads, but it does not
 * necessarily fill in defaults, so they are applied here; bad values for the
 * optional settings fall back to their defaults instead of failing.
 */
export function resolveConfig(raw: unknown): ConfigResult {
  const errors: string[] = [];
  const cfg = raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};

  let baseUrl = typeof cfg.baseUrl === "string" ? cfg.baseUrl.trim() : "";
  if (!baseUrl) {
    errors.push("baseUrl is required");
  } else {
    try {
      const url = new URL(baseUrl);
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        errors.push(`baseUrl must be an http(s) URL, got ${url.protocol}`);
      }
    } catch {
      errors.push(`baseUrl is not a valid URL: ${baseUrl}`);
    }
    baseUrl = baseUrl.replace(/\/+$/, "");
  }

  // A missing token (an unset ${VAR} resolves to nothing) is no reason to lose
  // events: they are kept in the queue, loudly, until a token is set.
  const token = typeof cfg.token === "string" ? cfg.token.trim() : "";
  const gatewayId =
    typeof cfg.gatewayId === "string" && /^[A-Za-z0-9._-]{1,64}$/.test(cfg.gatewayId.trim()) ? cfg.gatewayId.trim() : "";

  if (errors.length > 0) return { ok: false, errors };

  const queueDirRaw = typeof cfg.queueDir === "string" && cfg.queueDir.trim() ? cfg.queueDir.trim() : "";
  const queueDirExpanded = queueDirRaw ? expandHome(queueDirRaw) : defaultQueueDir();
  const queueDir = isAbsolute(queueDirExpanded) ? queueDirExpanded : resolve(queueDirExpanded);

  const retryBaseMs = intIn(cfg.retryBaseMs, DEFAULTS.retryBaseMs, 10, 600_000);
  const retryMaxMs = Math.max(retryBaseMs, intIn(cfg.retryMaxMs, DEFAULTS.retryMaxMs, 10, 3_600_000));

  const extraHooks = Array.isArray(cfg.extraHooks)
    ? cfg.extraHooks.filter((h): h is string => typeof h === "string" && h.trim() !== "").map((h) => h.trim())
    : [];

  return {
    ok: true,
    config: {
      baseUrl,
      token,
      timeoutMs: intIn(cfg.timeoutMs, DEFAULTS.timeoutMs, 100, 60_000),
      queueDir,
      recentMessages: intIn(cfg.recentMessages, DEFAULTS.recentMessages, 0, 1000),
      injectPreamble: typeof cfg.injectPreamble === "boolean" ? cfg.injectPreamble : DEFAULTS.injectPreamble,
      batchSize: intIn(cfg.batchSize, DEFAULTS.batchSize, 1, SERVER_MAX_BATCH),
      maxQueueEvents: intIn(cfg.maxQueueEvents, DEFAULTS.maxQueueEvents, 1, 1_000_000),
      retryBaseMs,
      retryMaxMs,
      extraHooks,
      gatewayId,
      memoryTools: typeof cfg.memoryTools === "boolean" ? cfg.memoryTools : DEFAULTS.memoryTools,
    },
  };
}
