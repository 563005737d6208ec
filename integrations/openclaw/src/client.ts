/**
 * Minimal SessionHub HTTP client: JSON POSTs with a bearer token, every
 * request (body read included) bounded by an AbortController timeout, and the
 * outcome sorted into ok / transient (retry later) / permanent (drop).
 */

export const HOOKS_PATH = "/api/v1/hooks/openclaw";
export const CONTINUITY_PATH = "/api/v1/continuity";

export type Outcome = "ok" | "transient" | "permanent";

export interface HttpResult {
  outcome: Outcome;
  /** HTTP status, or 0 when no response arrived (network error, timeout). */
  status: number;
  /** Parsed JSON body (null when absent or not JSON). */
  body: unknown;
  /** Delay asked for by a Retry-After header, in ms. */
  retryAfterMs?: number;
  /** Why the request failed, for logs. */
  error?: string;
}

export interface ClientOptions {
  baseUrl: string;
  token: string;
  timeoutMs: number;
  userAgent?: string;
  fetchImpl?: typeof fetch;
}

/** 429, 408 and 5xx are worth retrying; other 4xx (and 3xx) are not. */
export function classifyStatus(status: number): Outcome {
  if (status >= 200 && status < 300) return "ok";
  if (status === 429 || status === 408 || status >= 500) return "transient";
  return "permanent";
}

export function parseRetryAfter(header: string | null, now: number = Date.now()): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const when = Date.parse(trimmed);
  if (Number.isNaN(when)) return undefined;
  return Math.max(0, when - now);
}

export class SessionHubClient {
  private readonly baseUrl: string;
  private readonly token: string;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs;
    this.userAgent = options.userAgent ?? "sessionhub-openclaw-plugin";
    this.fetchImpl = options.fetchImpl ?? fetch;
  }

  /** POST one forwarded hook record or an array of them. */
  postHooks(body: unknown, timeoutMs?: number): Promise<HttpResult> {
    return this.postJson(HOOKS_PATH, body, timeoutMs);
  }

  /** Ask for the continuity preamble of a session. */
  postContinuity(body: unknown, timeoutMs?: number): Promise<HttpResult> {
    return this.postJson(CONTINUITY_PATH, body, timeoutMs);
  }

  /** POST JSON; never throws, never takes longer than the timeout. */
  async postJson(path: string, body: unknown, timeoutMs: number = this.timeoutMs): Promise<HttpResult> {
    const budget = Math.max(1, Math.floor(timeoutMs));
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), budget);
    try {
      let payload: string;
      try {
        payload = JSON.stringify(body);
      } catch (err) {
        return { outcome: "permanent", status: 0, body: null, error: `body not serialisable: ${describe(err)}` };
      }
      const response = await this.fetchImpl(this.baseUrl + path, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json",
          Authorization: `Bearer ${this.token}`,
          "User-Agent": this.userAgent,
        },
        body: payload,
        signal: controller.signal,
      });
      let text = "";
      try {
        text = await response.text();
      } catch (err) {
        if (response.ok) {
          // The server accepted the request but the answer was cut off; a
          // re-send is safe (eventIds deduplicate) but the caller cannot
          // know per-event results, so report it as transient.
          return { outcome: "transient", status: 0, body: null, error: `reading response: ${describe(err)}` };
        }
      }
      let parsed: unknown = null;
      if (text) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = null;
        }
      }
      const outcome = classifyStatus(response.status);
      const result: HttpResult = { outcome, status: response.status, body: parsed };
      const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
      if (retryAfterMs !== undefined) result.retryAfterMs = retryAfterMs;
      if (outcome !== "ok") result.error = `HTTP ${response.status}${text ? `: ${text.slice(0, 300)}` : ""}`;
      return result;
    } catch (err) {
      const timedOut = controller.signal.aborted;
      return {
        outcome: "transient",
        status: 0,
        body: null,
        error: timedOut ? `timed out after ${budget} ms` : `network error: ${describe(err)}`,
      };
    } finally {
      clearTimeout(timer);
    }
  }
}

export function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as Error & { cause?: unknown }).cause;
    const causeText = cause instanceof Error ? ` (${cause.message})` : "";
    return `${err.message}${causeText}`;
  }
  return String(err);
}
