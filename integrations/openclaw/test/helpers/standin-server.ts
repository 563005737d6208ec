/**
 * A small stand-in for the SessionHub server, implementing the part of its
 * contract the plugin talks to:
 *
 *   POST /api/v1/hooks/openclaw  one record or an array (<= 1000); bearer
 *     token; answers 200 {"results":[{"event_id","status"}]} with
 *     accepted / duplicate (same eventId seen before) / rejected.
 *   POST /api/v1/continuity      answers 200 {"preamble": "..."}.
 *
 * It records every request and can fail on demand (a status code, a hang,
 * a dropped connection, or not listening at all).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export type Failure =
  | { kind: "status"; status: number; retryAfter?: string; body?: string; /** store the events anyway */ process?: boolean }
  | { kind: "hang" }
  | { kind: "destroy" };

export interface RecordedRequest {
  path: string;
  authorization: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  raw: string;
  status: number;
  at: number;
}

export interface AcceptedEvent {
  eventId: string;
  record: Record<string, unknown>;
}

export class StandinServer {
  readonly token: string;
  private server: Server | null = null;
  private sockets = new Set<Socket>();
  private pendingHangs = new Set<ServerResponse>();
  port = 0;

  readonly requests: RecordedRequest[] = [];
  readonly accepted: AcceptedEvent[] = [];
  private readonly seen = new Set<string>();

  /** Failure applied to hook requests while set (and `hooksFailTimes` > 0). */
  hooksFailure: Failure | null = null;
  hooksFailTimes = Infinity;
  continuityFailure: Failure | null = null;
  /** Hook names answered with status "rejected". */
  readonly rejectHooks = new Set<string>();
  /** Hook names that make the whole request a 400 (a "malformed" body). */
  readonly badRequestHooks = new Set<string>();
  /** Preamble per session id; `defaultPreamble` otherwise. */
  readonly preambles = new Map<string, string>();
  /** What waits for a session (a manual continue): handed over once, to a `pending` request. */
  readonly waiting = new Map<string, string>();
  defaultPreamble = "";
  /** Failure applied to MCP requests while set. */
  mcpFailure: Failure | null = null;
  /** The answer to an MCP request: by default a tool result echoing the tool's name. */
  mcpAnswer: (body: unknown) => { status: number; body: unknown } = (body) => {
    const request = body as { id?: unknown; params?: { name?: string } };
    const data = { tool: request.params?.name ?? "" };
    return {
      status: 200,
      body: {
        jsonrpc: "2.0",
        id: request.id ?? null,
        result: { content: [{ type: "text", text: JSON.stringify(data) }], isError: false, structuredContent: data },
      },
    };
  };

  mcpRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path === "/api/v1/mcp");
  }

  constructor(token = "test-token") {
    this.token = token;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  hookRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path === "/api/v1/hooks/openclaw");
  }

  /** The continuity requests that ask for a preamble (not the later prompts' `pending` ones). */
  continuityRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path === "/api/v1/continuity" && !isPending(r.body));
  }

  /** The later prompts' requests for what waits for their session (a manual continue). */
  pendingRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.path === "/api/v1/continuity" && isPending(r.body));
  }

  acceptedIds(): string[] {
    return this.accepted.map((a) => a.eventId);
  }

  failHooks(failure: Failure, times = Infinity): void {
    this.hooksFailure = failure;
    this.hooksFailTimes = times;
  }

  recover(): void {
    this.hooksFailure = null;
    this.continuityFailure = null;
    for (const res of this.pendingHangs) {
      try {
        res.destroy();
      } catch {
        // ignore
      }
    }
    this.pendingHangs.clear();
  }

  async start(port = 0): Promise<void> {
    const server = createServer((req, res) => this.handle(req, res));
    server.keepAliveTimeout = 1000;
    server.on("connection", (socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /** Stop listening (clients get "connection refused"); `up()` listens again on the same port. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const res of this.pendingHangs) res.destroy();
    this.pendingHangs.clear();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    await closed;
  }

  async up(): Promise<void> {
    await this.start(this.port);
  }

  async stop(): Promise<void> {
    await this.down();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      let body: unknown = undefined;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        body = undefined;
      }
      const path = (req.url ?? "").split("?")[0];
      const entry: RecordedRequest = {
        path,
        authorization: req.headers.authorization,
        headers: req.headers,
        body,
        raw,
        status: 0,
        at: Date.now(),
      };
      this.requests.push(entry);
      const send = (status: number, payload: unknown, headers: Record<string, string> = {}): void => {
        entry.status = status;
        const text = typeof payload === "string" ? payload : JSON.stringify(payload);
        res.writeHead(status, { "Content-Type": "application/json", ...headers });
        res.end(text);
      };

      if (req.method !== "POST") return send(405, { error: "method not allowed" });
      if (req.headers.authorization !== `Bearer ${this.token}`) return send(401, { error: "bad token" });

      if (path === "/api/v1/hooks/openclaw") return this.handleHooks(entry, body, res, send);
      if (path === "/api/v1/continuity") return this.handleContinuity(entry, body, res, send);
      if (path === "/api/v1/mcp") {
        if (this.mcpFailure && this.applyFailure(this.mcpFailure, res, send)) return;
        const answer = this.mcpAnswer(body);
        return send(answer.status, answer.body);
      }
      return send(404, { error: "not found" });
    });
  }

  private applyFailure(
    failure: Failure,
    res: ServerResponse,
    send: (status: number, payload: unknown, headers?: Record<string, string>) => void,
  ): boolean {
    if (failure.kind === "hang") {
      this.pendingHangs.add(res);
      return true;
    }
    if (failure.kind === "destroy") {
      res.socket?.destroy();
      return true;
    }
    if (failure.process) return false; // handled by the caller after storing
    send(failure.status, failure.body ?? { error: `injected ${failure.status}` }, failure.retryAfter ? { "Retry-After": failure.retryAfter } : {});
    return true;
  }

  private handleHooks(
    entry: RecordedRequest,
    body: unknown,
    res: ServerResponse,
    send: (status: number, payload: unknown, headers?: Record<string, string>) => void,
  ): void {
    let failure: Failure | null = null;
    if (this.hooksFailure && this.hooksFailTimes > 0) {
      failure = this.hooksFailure;
      this.hooksFailTimes -= 1;
      if (this.applyFailure(failure, res, send)) return;
    }
    if (body === undefined || body === null || typeof body !== "object") {
      return send(400, { error: "malformed", detail: "body must be a JSON object or array" });
    }
    const items = Array.isArray(body) ? body : [body];
    if (items.length > 1000) return send(413, { error: "too many events" });
    if (items.some((i) => i && typeof i === "object" && this.badRequestHooks.has((i as { hook?: string }).hook ?? ""))) {
      return send(400, { error: "malformed", detail: "bad event in request" });
    }
    const results = items.map((item) => {
      if (!item || typeof item !== "object" || Array.isArray(item)) {
        return { event_id: null, status: "rejected", field: "", reason: "not an object" };
      }
      const rec = item as Record<string, unknown>;
      const id = typeof rec.eventId === "string" ? rec.eventId : null;
      if (!id) return { event_id: null, status: "rejected", field: "eventId", reason: "missing" };
      if (typeof rec.hook !== "string") return { event_id: id, status: "rejected", field: "hook", reason: "missing" };
      if (this.rejectHooks.has(rec.hook)) {
        return { event_id: id, status: "rejected", field: "hook", reason: "rejected on purpose" };
      }
      if (this.seen.has(id)) return { event_id: id, status: "duplicate" };
      this.seen.add(id);
      this.accepted.push({ eventId: id, record: rec });
      return { event_id: id, status: "accepted" };
    });
    if (failure && failure.kind === "status" && failure.process) {
      // Stored, but the client is told it failed (e.g. the response was lost).
      entry.status = failure.status;
      res.writeHead(failure.status, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: `injected ${failure.status} after storing` }));
      return;
    }
    send(200, { results });
  }

  private handleContinuity(
    _entry: RecordedRequest,
    body: unknown,
    res: ServerResponse,
    send: (status: number, payload: unknown, headers?: Record<string, string>) => void,
  ): void {
    if (this.continuityFailure && this.applyFailure(this.continuityFailure, res, send)) return;
    if (!body || typeof body !== "object" || Array.isArray(body)) return send(400, { error: "malformed" });
    const sessionId = (body as { session_id?: unknown }).session_id;
    if (isPending(body)) {
      const waiting = typeof sessionId === "string" ? this.waiting.get(sessionId) ?? "" : "";
      if (typeof sessionId === "string") this.waiting.delete(sessionId);
      return send(200, { preamble: waiting, record_ids: waiting ? [1] : [] });
    }
    const preamble =
      typeof sessionId === "string" && this.preambles.has(sessionId) ? this.preambles.get(sessionId) : this.defaultPreamble;
    send(200, { preamble, used_sessions: [] });
  }
}

function isPending(body: unknown): boolean {
  return !!body && typeof body === "object" && (body as { pending?: unknown }).pending === true;
}
