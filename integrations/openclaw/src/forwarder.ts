/**
 * Delivery of forwarded hook records to SessionHub.
 *
 * Hook handlers only call `submit()`, which returns at once; a single worker
 * loop sends in the background, so a hook never waits on the network.
 *
 * Order is kept: before anything new is sent, whatever waits in the on-disk
 * queue is flushed first (oldest first, in batches). A transient failure
 * (429, 5xx, network error, timeout) puts the records that failed, and
 * everything submitted after them, at the end of the disk queue, and starts a
 * backoff: until it expires new records go straight to the disk queue, and a
 * timer flushes the queue when it does. A refused token (401/403) is a
 * configuration problem, not a property of the events: they stay queued the
 * same way (the queue is bounded), and the plugin says so loudly, once, until
 * the token works. Other permanent failures (other 4xx) and per-event
 * "rejected" answers are logged and dropped. Records keep the
 * eventId they were created with, so a re-send of something that did arrive
 * is answered "duplicate" and stored once.
 */
import type { HttpResult, Outcome, SessionHubClient } from "./client.js";
import type { DiskQueue, ForwardRecord } from "./queue.js";

export interface SafeLogger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** One per-event entry of the server's answer. */
export interface EventResult {
  event_id?: string;
  status?: string;
  [key: string]: unknown;
}

/** What happened to one request, for observers (tests, diagnostics). */
export interface DeliveryReport {
  eventIds: string[];
  hooks: string[];
  fromQueue: boolean;
  httpStatus: number;
  outcome: Outcome;
  results: EventResult[] | null;
  error?: string;
}

export interface ForwarderOptions {
  client: SessionHubClient;
  queue: DiskQueue;
  logger: SafeLogger;
  batchSize: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** Random number source for backoff jitter (tests pass a fixed one). */
  random?: () => number;
}

const MAX_DELAY_MS = 60 * 60 * 1000;

export class Forwarder {
  private readonly client: SessionHubClient;
  private readonly queue: DiskQueue;
  private readonly log: SafeLogger;
  private readonly batchSize: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly random: () => number;

  /** Submitted records not yet handed to a request or to the disk queue. */
  private buffer: ForwardRecord[] = [];
  /** Records taken out of the buffer whose fate is not settled yet. */
  private inflight: ForwardRecord[] = [];
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private failures = 0;
  private retryAt = 0;
  /** Whether the disk queue may hold records (unknown at start, so true). */
  private diskDirty = true;
  private stopped = false;
  /** The server refuses the token: said once until it is accepted again. */
  private tokenRefused = false;
  private listeners: Array<(report: DeliveryReport) => void> = [];

  constructor(options: ForwarderOptions) {
    this.client = options.client;
    this.queue = options.queue;
    this.log = options.logger;
    this.batchSize = Math.max(1, options.batchSize);
    this.retryBaseMs = options.retryBaseMs;
    this.retryMaxMs = options.retryMaxMs;
    this.random = options.random ?? Math.random;
  }

  /** Register an observer of every request's outcome. */
  onDelivery(listener: (report: DeliveryReport) => void): void {
    this.listeners.push(listener);
  }

  /** Hand a record over for delivery; returns at once, never throws. */
  submit(record: ForwardRecord): void {
    if (this.stopped) {
      // Shutting down: nothing asynchronous is sure to finish any more, so
      // keep the record on disk for the next start.
      this.persistSync([record]);
      return;
    }
    this.buffer.push(record);
    this.kick();
  }

  /** Start the worker (to flush what an earlier run left on disk). */
  start(): void {
    this.kick();
  }

  /** Forget any backoff and flush now; resolves when the worker is idle. */
  async flush(): Promise<void> {
    await this.idle();
    if (this.stopped) return;
    this.retryAt = 0;
    this.diskDirty = true;
    this.clearTimer();
    this.kick();
    await this.idle();
  }

  /** Resolves when nothing is being sent (records may still wait on disk). */
  async idle(): Promise<void> {
    while (this.running) {
      await this.running;
    }
  }

  /** `idle()`, but gives up after `ms`. */
  async idleWithin(ms: number): Promise<void> {
    if (!this.running) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.idle(),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.max(0, ms));
        timer.unref?.();
      }),
    ]);
    if (timer) clearTimeout(timer);
  }

  /** True while the server refuses the token (events wait in the queue). */
  get refusingToken(): boolean {
    return this.tokenRefused;
  }

  /** True while the worker holds a backoff (the server was found unavailable). */
  get backingOff(): boolean {
    return Date.now() < this.retryAt;
  }

  /** Stop the worker and timers; later submits go straight to disk. */
  stop(): void {
    this.stopped = true;
    this.clearTimer();
  }

  /**
   * For gateway shutdown: give running deliveries up to `budgetMs`, then stop
   * and write whatever is still pending to the disk queue.
   */
  async shutdown(budgetMs: number): Promise<void> {
    await this.idleWithin(budgetMs);
    this.stop();
    this.persistPendingSync();
  }

  /**
   * Write every record not known to be delivered or queued to the disk queue,
   * synchronously (used from the process 'exit' handler). A record that was in
   * fact delivered is answered "duplicate" when re-sent.
   */
  persistPendingSync(): void {
    const pending = [...this.inflight, ...this.buffer];
    this.buffer = [];
    this.inflight = [];
    this.persistSync(pending);
  }

  private persistSync(records: ForwardRecord[]): void {
    if (records.length === 0) return;
    try {
      this.queue.appendSync(records);
      this.diskDirty = true;
    } catch (err) {
      this.log.error(`could not write ${records.length} event(s) to the retry queue: ${String(err)}`);
    }
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    this.running = this.run()
      .catch((err) => this.log.error(`forwarder: unexpected error: ${String(err)}`))
      .finally(() => {
        this.running = null;
        // A record submitted while the loop was finishing would be stranded.
        if (!this.stopped && this.buffer.length > 0) this.kick();
      });
  }

  private clearTimer(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private scheduleRetry(): void {
    if (this.stopped) return;
    this.clearTimer();
    const delay = Math.max(0, this.retryAt - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.kick();
    }, delay);
    this.timer.unref?.();
  }

  private registerFailure(retryAfterMs?: number): number {
    this.failures += 1;
    const exp = Math.min(this.retryMaxMs, this.retryBaseMs * 2 ** Math.min(this.failures - 1, 30));
    const jittered = exp * (0.8 + 0.4 * this.random());
    const delay = Math.min(MAX_DELAY_MS, Math.max(jittered, retryAfterMs ?? 0));
    this.retryAt = Date.now() + delay;
    return delay;
  }

  private async toDisk(records: ForwardRecord[]): Promise<void> {
    if (records.length === 0) return;
    this.inflight = records;
    try {
      await this.queue.append(records);
      this.diskDirty = true;
    } catch (err) {
      this.log.error(`could not write ${records.length} event(s) to the retry queue, they are lost: ${String(err)}`);
    } finally {
      this.inflight = [];
    }
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (Date.now() < this.retryAt) {
        // Backing off: keep order by parking new records behind the queued ones.
        await this.toDisk(this.buffer.splice(0));
        this.scheduleRetry();
        return;
      }
      if (this.diskDirty) {
        const drained = await this.flushDisk();
        if (!drained) continue; // now backing off; the next pass parks the buffer
      }
      if (this.buffer.length === 0) return;

      const batch = this.buffer.splice(0, this.batchSize);
      this.inflight = batch;
      const transient = await this.deliver(batch, false);
      this.inflight = [];
      if (transient.length > 0) {
        await this.toDisk([...transient, ...this.buffer.splice(0)]);
        this.scheduleRetry();
        return;
      }
    }
  }

  /** Send the disk queue, oldest first. Returns false when a transient failure stopped it. */
  private async flushDisk(): Promise<boolean> {
    let sent = 0;
    while (!this.stopped) {
      let records: ForwardRecord[];
      try {
        records = await this.queue.peek(this.batchSize);
      } catch (err) {
        this.log.error(`could not read the retry queue ${this.queue.file}: ${String(err)}`);
        this.diskDirty = false;
        return true;
      }
      if (records.length === 0) {
        this.diskDirty = false;
        if (sent > 0) this.log.info(`delivered ${sent} queued event(s)`);
        return true;
      }
      const transient = await this.deliver(records, true);
      const retry = new Set(transient.map((r) => r.eventId));
      const settled = records.filter((r) => !retry.has(r.eventId)).map((r) => r.eventId);
      try {
        await this.queue.remove(settled);
      } catch (err) {
        this.log.error(`could not update the retry queue ${this.queue.file}: ${String(err)}`);
        this.registerFailure();
        return false;
      }
      sent += settled.length;
      if (transient.length > 0) return false;
    }
    return false;
  }

  /**
   * Send records (one object, or an array for several). Returns the records
   * that failed transiently and must be retried; everything else is settled.
   */
  private async deliver(records: ForwardRecord[], fromQueue: boolean): Promise<ForwardRecord[]> {
    const body = records.length === 1 ? records[0] : records;
    const result = await this.client.postHooks(body);
    this.report(records, fromQueue, result);

    if (result.outcome === "ok") {
      if (this.tokenRefused) this.log.info("SessionHub accepts the token again: delivering the queued events");
      else if (this.failures > 0) this.log.info("SessionHub is reachable again");
      this.tokenRefused = false;
      this.failures = 0;
      this.retryAt = 0;
      this.checkResults(records, result.body);
      return [];
    }

    if (result.outcome === "transient") {
      const delay = this.registerFailure(result.retryAfterMs);
      const message =
        `SessionHub unavailable (${result.error ?? `HTTP ${result.status}`}); ` +
        `${records.length} event(s) kept in ${this.queue.file}, retry in ${Math.round(delay)} ms`;
      if (this.failures === 1) this.log.warn(message);
      else this.log.debug(message);
      return records;
    }

    if (result.status === 401 || result.status === 403) {
      // The token, not the events: keep them (bounded queue) and retry with backoff.
      const delay = this.registerFailure(result.retryAfterMs);
      if (!this.tokenRefused) {
        this.tokenRefused = true;
        this.log.error(
          `!!! SessionHub refused the API token (HTTP ${result.status}): events are NOT being delivered. ` +
            `They are kept in ${this.queue.file} (at most the queue capacity) and sent once the token works. ` +
            `Check plugins.entries.sessionhub.config.token (an unset \${...} variable resolves to nothing) !!!`,
        );
      } else {
        this.log.debug(`token still refused (HTTP ${result.status}); retry in ${Math.round(delay)} ms`);
      }
      return records;
    }

    // Permanent: the server will never take this request as it is.
    if (records.length > 1) {
      // Isolate the bad record(s): send the batch one by one.
      for (let i = 0; i < records.length; i++) {
        const transient = await this.deliver([records[i]], fromQueue);
        if (transient.length > 0) return [...transient, ...records.slice(i + 1)];
      }
      return [];
    }
    const hooks = [...new Set(records.map((r) => r.hook))].join(", ");
    this.log.warn(
      `SessionHub refused ${records.length} event(s) (${hooks}): ${result.error ?? `HTTP ${result.status}`}; dropped`,
    );
    return [];
  }

  private checkResults(records: ForwardRecord[], body: unknown): void {
    const results = extractResults(body);
    if (!results) return;
    records.forEach((record, index) => {
      const item = resultFor(record.eventId, index, records.length, results);
      if (item?.status === "rejected") {
        const detail = JSON.stringify({ ...item, event_id: undefined, eventId: undefined, status: undefined });
        this.log.warn(`SessionHub rejected event ${record.eventId} (${record.hook}): ${detail}; dropped`);
      }
    });
  }

  private report(records: ForwardRecord[], fromQueue: boolean, result: HttpResult): void {
    if (this.listeners.length === 0) return;
    const report: DeliveryReport = {
      eventIds: records.map((r) => r.eventId),
      hooks: records.map((r) => r.hook),
      fromQueue,
      httpStatus: result.status,
      outcome: result.outcome,
      results: extractResults(result.body),
    };
    if (result.error) report.error = result.error;
    for (const listener of this.listeners) {
      try {
        listener(report);
      } catch {
        // observers must not disturb delivery
      }
    }
  }
}

export function extractResults(body: unknown): EventResult[] | null {
  if (!body || typeof body !== "object") return null;
  const results = (body as { results?: unknown }).results;
  if (!Array.isArray(results)) return null;
  return results.filter((r): r is EventResult => !!r && typeof r === "object" && !Array.isArray(r));
}

/**
 * The server's answer for one record: the entry naming its eventId (as
 * `event_id`, or `eventId`), else the entry at the same position when the
 * answer has one entry per record.
 */
export function resultFor(
  eventId: string,
  index: number,
  count: number,
  results: EventResult[] | null,
): EventResult | undefined {
  if (!results) return undefined;
  const byId = results.find((r) => r.event_id === eventId || r.eventId === eventId);
  if (byId) return byId;
  return results.length === count ? results[index] : undefined;
}
