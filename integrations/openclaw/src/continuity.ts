/**
 * Continuity preamble injection.
 *
 * On the first prompt of a session (`before_prompt_build`) the plugin asks
 * SessionHub for the session's continuity preamble and, when it is not empty,
 * returns it as `{ prependContext }`. Each session is asked once (again after
 * a reset in place: `forget`); at each later prompt it asks only what waits
 * for the session (`pending`: a manual continue an admin made while it runs,
 * handed over once). A background run (`ctx.trigger` other than "user": a
 * heartbeat, cron) is never given one; the whole exchange is bounded by
 * `timeoutMs`, and any failure injects nothing.
 */
import { createHash } from "node:crypto";
import { mkdirSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HttpResult, SessionHubClient } from "./client.js";
import type { Forwarder, SafeLogger } from "./forwarder.js";

export interface PrependResult {
  prependContext: string;
}

/** What happened on one prompt hook call, for observers (tests, diagnostics). */
export interface ContinuityReport {
  hook: string;
  sessionId: string | null;
  sessionKey: string | null;
  agentId: string | null;
  /** Why nothing was asked: "disabled", "no-session", "already-asked", "resumed-session", "background-run". */
  skipped?: string;
  /** A later prompt: only what waits for the session (a manual continue) was asked. */
  waiting?: boolean;
  httpStatus?: number;
  outcome?: HttpResult["outcome"] | "timeout";
  /** The preamble the server sent (a string, possibly empty), else null. */
  preamble?: string | null;
  /** What the hook handler returned to the gateway. */
  returned?: PrependResult | undefined;
  error?: string;
}

export interface ContinuityOptions {
  client: SessionHubClient;
  forwarder: Forwarder;
  logger: SafeLogger;
  timeoutMs: number;
  enabled: boolean;
  /** How many session ids to remember (oldest forgotten first). */
  memory?: number;
  /** This gateway's instance id (sent along, as with every event). */
  gatewayId?: string;
  /**
   * The sessions already asked, shared by every injector of one gateway: the
   * gateway loads the plugin more than once (reloads, runtime registrations)
   * and may hand a session's start to one instance and its prompt to another.
   */
  asked?: Map<string, true>;
  /**
   * Where "this session was started here" marks are kept: one empty file per
   * session. A file, because the gateway runs a session's start (or reset) and
   * its runs' prompt hooks in different processes with their own plugin
   * instances. Unset: kept in memory.
   */
  freshDir?: string;
}

/** Longest prompt text sent along (the prompt can carry reconstructed history). */
export const MAX_PROMPT_CHARS = 8000;

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function str(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : null;
}

/** True when the session history already holds an assistant turn (a resumed session). */
export function hasEarlierAssistantTurn(messages: unknown): boolean {
  if (!Array.isArray(messages)) return false;
  return messages.some((m) => isRecord(m) && m.role === "assistant");
}

export class ContinuityInjector {
  private readonly client: SessionHubClient;
  private readonly forwarder: Forwarder;
  private readonly log: SafeLogger;
  private readonly timeoutMs: number;
  private readonly enabled: boolean;
  private readonly memory: number;
  private readonly gatewayId: string | undefined;
  private readonly asked: Map<string, true>;
  private readonly started = new Set<string>();
  private readonly freshDir: string | undefined;
  private listeners: Array<(report: ContinuityReport) => void> = [];

  constructor(options: ContinuityOptions) {
    this.client = options.client;
    this.forwarder = options.forwarder;
    this.log = options.logger;
    this.timeoutMs = options.timeoutMs;
    this.enabled = options.enabled;
    this.memory = Math.max(1, options.memory ?? 10_000);
    this.gatewayId = options.gatewayId;
    this.asked = options.asked ?? new Map<string, true>();
    this.freshDir = options.freshDir;
  }

  private freshFile(sessionId: string): string | undefined {
    if (!this.freshDir) return undefined;
    const name = /^[A-Za-z0-9._-]{1,100}$/.test(sessionId)
      ? sessionId
      : createHash("sha256").update(sessionId).digest("hex");
    return join(this.freshDir, name);
  }

  /** Take the session's "started here" mark; true when it had one (only one taker wins). */
  private takeFresh(sessionId: string): boolean {
    const inMemory = this.started.delete(sessionId);
    const file = this.freshFile(sessionId);
    if (!file) return inMemory;
    try {
      unlinkSync(file);
      return true;
    } catch {
      return inMemory;
    }
  }

  /**
   * The gateway started this session (fresh, or reset in place): its history
   * may already hold background turns (a heartbeat that ran first), yet the
   * user's first prompt is a new session's first.
   */
  sessionStarted(sessionId: string): void {
    this.asked.delete(sessionId);
    this.started.add(sessionId);
    const file = this.freshFile(sessionId);
    if (file) {
      try {
        mkdirSync(this.freshDir!, { recursive: true, mode: 0o700 });
        writeFileSync(file, "", { mode: 0o600 });
      } catch (err) {
        this.log.debug(`could not mark session ${sessionId} as started: ${String(err)}`);
      }
    }
    while (this.started.size > this.memory) {
      const oldest = this.started.values().next().value;
      if (oldest === undefined) break;
      this.started.delete(oldest);
    }
  }

  /** The session was reset in place: its next prompt is a new session's first. */
  forget(sessionId: string): void {
    this.sessionStarted(sessionId);
  }

  onReport(listener: (report: ContinuityReport) => void): void {
    this.listeners.push(listener);
  }

  /** Handler body for before_prompt_build / before_agent_start. Never throws or rejects. */
  async handle(hook: string, event: unknown, ctx: unknown): Promise<PrependResult | undefined> {
    const e = isRecord(event) ? event : {};
    const c = isRecord(ctx) ? ctx : {};
    const report: ContinuityReport = {
      hook,
      sessionId: str(c.sessionId) ?? str(e.sessionId),
      sessionKey: str(c.sessionKey) ?? str(e.sessionKey),
      agentId: str(c.agentId),
    };
    try {
      if (!this.enabled) return this.finish(report, "disabled");
      const trigger = c.trigger;
      if (typeof trigger === "string" && trigger !== "" && trigger !== "user") return this.finish(report, "background-run");
      const key = report.sessionId ?? (report.sessionKey ? `key:${report.sessionKey}` : null);
      if (!key) return this.finish(report, "no-session");
      // Started (or reset in place) by this gateway and not asked since: the
      // user's first prompt, whatever ran before it (a heartbeat) and whatever
      // this process remembers from before a reset.
      const fresh = this.takeFresh(key);
      if (!fresh && this.asked.has(key)) return await this.waiting(report);
      // Remember before awaiting, so a second prompt hook firing meanwhile
      // does not ask again.
      this.remember(key);
      // An assistant turn in the history of a session not started here: one
      // that goes on after a gateway restart, not a first prompt.
      if (!fresh && hasEarlierAssistantTurn(e.messages)) return this.finish(report, "resumed-session");

      const returned = await this.withDeadline(this.ask(report, e), report);
      report.returned = returned;
      this.emit(report);
      return returned;
    } catch (err) {
      report.error = String(err);
      report.returned = undefined;
      this.emit(report);
      return undefined;
    }
  }

  private async ask(report: ContinuityReport, event: Record<string, unknown>): Promise<PrependResult | undefined> {
    const deadline = Date.now() + this.timeoutMs;
    // Let the session's earlier events (session_start...) reach the server
    // first, but spend at most half of the budget waiting for them.
    await this.forwarder.idleWithin(Math.floor(this.timeoutMs / 2));
    const remaining = deadline - Date.now();
    if (remaining < 20) {
      report.outcome = "timeout";
      return undefined;
    }
    const prompt = typeof event.prompt === "string" ? event.prompt.slice(0, MAX_PROMPT_CHARS) : null;
    const body = {
      source: "openclaw",
      agent_id: report.agentId,
      session_id: report.sessionId,
      session_key: report.sessionKey,
      prompt,
      ...(this.gatewayId ? { gateway: this.gatewayId } : {}),
    };
    return this.post(report, body, remaining);
  }

  /**
   * A later prompt of a session already asked: hand over what waits for it (a
   * manual continue made while it runs), if anything; never a new preamble.
   */
  private async waiting(report: ContinuityReport): Promise<PrependResult | undefined> {
    report.waiting = true;
    if (!report.sessionId) return this.finish(report, "already-asked");
    const body = {
      source: "openclaw",
      agent_id: report.agentId,
      session_id: report.sessionId,
      session_key: report.sessionKey,
      pending: true,
      ...(this.gatewayId ? { gateway: this.gatewayId } : {}),
    };
    const returned = await this.withDeadline(this.post(report, body, this.timeoutMs), report);
    report.returned = returned;
    this.emit(report);
    return returned;
  }

  private async post(
    report: ContinuityReport,
    body: Record<string, unknown>,
    remaining: number,
  ): Promise<PrependResult | undefined> {
    const result = await this.client.postContinuity(body, remaining);
    report.httpStatus = result.status;
    report.outcome = result.outcome;
    if (result.error) report.error = result.error;
    if (result.outcome !== "ok") {
      this.log.debug(`continuity for session ${report.sessionId ?? "?"} unavailable: ${result.error ?? result.status}`);
      return undefined;
    }
    const preamble = isRecord(result.body) ? result.body.preamble : undefined;
    report.preamble = typeof preamble === "string" ? preamble : null;
    if (typeof preamble === "string" && preamble.trim() !== "") {
      return { prependContext: preamble };
    }
    return undefined;
  }

  /** Resolve with `task`'s value, or undefined once `timeoutMs` has passed. */
  private async withDeadline(
    task: Promise<PrependResult | undefined>,
    report: ContinuityReport,
  ): Promise<PrependResult | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        report.outcome = report.outcome ?? "timeout";
        resolve(undefined);
      }, this.timeoutMs);
      timer.unref?.();
    });
    try {
      return await Promise.race([task.catch(() => undefined), timeout]);
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  private remember(key: string): void {
    this.asked.set(key, true);
    while (this.asked.size > this.memory) {
      const oldest = this.asked.keys().next().value;
      if (oldest === undefined) break;
      this.asked.delete(oldest);
    }
  }

  private finish(report: ContinuityReport, skipped: string): undefined {
    this.log.debug(`no continuity asked for session ${report.sessionId ?? "?"}: ${skipped}`);
    report.skipped = skipped;
    report.returned = undefined;
    this.emit(report);
    return undefined;
  }

  private emit(report: ContinuityReport): void {
    for (const listener of this.listeners) {
      try {
        listener(report);
      } catch {
        // observers must not disturb the hook
      }
    }
  }
}
