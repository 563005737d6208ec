/**
 * On-disk retry queue: one forwarded hook record per line (JSONL) in
 * `<queueDir>/queue.jsonl`, oldest first. Records that could not be delivered
 * because of a transient failure wait here until a later flush sends them, in
 * order, with the eventIds they were created with (so the server deduplicates
 * any that had in fact arrived).
 *
 * All operations of one queue object run one after another; removal rewrites
 * the file through a temporary file and a rename, so a crash leaves either the
 * old or the new content. The file is created owner-only (it holds
 * conversation data).
 */
import { appendFileSync, mkdirSync, promises as fsp, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { JsonValue } from "./json.js";

export interface ForwardRecord {
  eventId: string;
  hook: string;
  event: JsonValue;
  ctx: JsonValue;
  ts: number;
  /** The sending gateway's instance id (part of the agent's identity on the server). */
  gateway?: string;
}

export interface DiskQueueOptions {
  /** Capacity in records; past it the oldest records are dropped. */
  maxEvents: number;
  /** Called with a message when records are dropped or lines are unreadable. */
  warn?: (message: string) => void;
}

export const QUEUE_FILE_NAME = "queue.jsonl";

export function isForwardRecord(value: unknown): value is ForwardRecord {
  if (!value || typeof value !== "object" || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  return typeof v.eventId === "string" && v.eventId !== "" && typeof v.hook === "string" && typeof v.ts === "number";
}

export class DiskQueue {
  readonly dir: string;
  readonly file: string;
  private readonly maxEvents: number;
  private readonly warn: (message: string) => void;
  private tail: Promise<unknown> = Promise.resolve();
  /** Records in the file, when known. */
  private knownCount: number | null = null;
  /** The file ends in a partial line (a crash mid-write): start the next append on a new line. */
  private needsNewline = false;

  constructor(dir: string, options: DiskQueueOptions) {
    this.dir = dir;
    this.file = join(dir, QUEUE_FILE_NAME);
    this.maxEvents = Math.max(1, options.maxEvents);
    this.warn = options.warn ?? (() => {});
  }

  /** Run `task` after every earlier operation of this queue has finished. */
  private exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.tail.then(task, task);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async ensureDir(): Promise<void> {
    await fsp.mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  /** Read every valid record, oldest first; unreadable lines are skipped. */
  private async readAll(): Promise<ForwardRecord[]> {
    let text: string;
    try {
      text = await fsp.readFile(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw err;
    }
    this.needsNewline = text.length > 0 && !text.endsWith("\n");
    const records: ForwardRecord[] = [];
    let bad = 0;
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      try {
        const parsed: unknown = JSON.parse(line);
        if (isForwardRecord(parsed)) records.push(parsed);
        else bad += 1;
      } catch {
        bad += 1;
      }
    }
    if (bad > 0) this.warn(`queue file ${this.file}: skipped ${bad} unreadable line(s)`);
    this.knownCount = records.length;
    return records;
  }

  private async rewrite(records: ForwardRecord[]): Promise<void> {
    if (records.length === 0) {
      await fsp.rm(this.file, { force: true });
      this.knownCount = 0;
      this.needsNewline = false;
      return;
    }
    await this.ensureDir();
    const tmp = `${this.file}.${process.pid}.${Date.now()}.tmp`;
    await fsp.writeFile(tmp, records.map((r) => JSON.stringify(r)).join("\n") + "\n", { mode: 0o600 });
    await fsp.rename(tmp, this.file);
    this.knownCount = records.length;
    this.needsNewline = false;
  }

  /** Add records at the end of the queue (dropping the oldest past capacity). */
  append(records: ForwardRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    return this.exclusive(async () => {
      await this.ensureDir();
      if (this.knownCount === null) await this.readAll();
      const lead = this.needsNewline ? "\n" : "";
      await fsp.appendFile(this.file, lead + records.map((r) => JSON.stringify(r)).join("\n") + "\n", { mode: 0o600 });
      this.needsNewline = false;
      this.knownCount = (this.knownCount ?? 0) + records.length;
      if (this.knownCount > this.maxEvents) {
        const all = await this.readAll();
        const dropped = all.length - this.maxEvents;
        if (dropped > 0) {
          await this.rewrite(all.slice(dropped));
          this.warn(`retry queue over capacity (${this.maxEvents}): dropped the ${dropped} oldest event(s)`);
        }
      }
    });
  }

  /** The oldest `limit` records, without removing them. */
  peek(limit: number): Promise<ForwardRecord[]> {
    return this.exclusive(async () => (await this.readAll()).slice(0, Math.max(0, limit)));
  }

  /** Remove the records with these eventIds (wherever they are in the queue). */
  remove(eventIds: Iterable<string>): Promise<void> {
    const ids = new Set(eventIds);
    if (ids.size === 0) return Promise.resolve();
    return this.exclusive(async () => {
      const all = await this.readAll();
      const kept = all.filter((r) => !ids.has(r.eventId));
      if (kept.length !== all.length) await this.rewrite(kept);
    });
  }

  /** Every record in the queue, oldest first. */
  readAllRecords(): Promise<ForwardRecord[]> {
    return this.exclusive(() => this.readAll());
  }

  /** Number of records in the queue. */
  size(): Promise<number> {
    return this.exclusive(async () => (await this.readAll()).length);
  }

  /**
   * Synchronous append for the process 'exit' handler, where nothing
   * asynchronous can run any more. Capacity is enforced on the next append.
   */
  appendSync(records: ForwardRecord[]): void {
    if (records.length === 0) return;
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // A leading newline is harmless (blank lines are skipped) and guards against a partial last line.
    appendFileSync(this.file, "\n" + records.map((r) => JSON.stringify(r)).join("\n") + "\n", { mode: 0o600 });
    if (this.knownCount !== null) this.knownCount += records.length;
  }

  /** Every valid record, read synchronously (for the process 'exit' handler). */
  readAllSync(): ForwardRecord[] {
    let text: string;
    try {
      text = readFileSync(this.file, "utf8");
    } catch {
      return [];
    }
    const records: ForwardRecord[] = [];
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      try {
        const parsed: unknown = JSON.parse(line);
        if (isForwardRecord(parsed)) records.push(parsed);
      } catch {
        // a partial line from a crash: skipped, as readAll does
      }
    }
    return records;
  }

  /** Remove these eventIds synchronously (for the process 'exit' handler). */
  removeSync(eventIds: Iterable<string>): void {
    const ids = new Set(eventIds);
    if (ids.size === 0) return;
    const kept = this.readAllSync().filter((r) => !ids.has(r.eventId));
    if (kept.length === 0) {
      rmSync(this.file, { force: true });
    } else {
      const tmp = `${this.file}.${process.pid}.exit.tmp`;
      writeFileSync(tmp, kept.map((r) => JSON.stringify(r)).join("\n") + "\n", { mode: 0o600 });
      renameSync(tmp, this.file);
    }
    this.knownCount = kept.length;
    this.needsNewline = false;
  }
}
