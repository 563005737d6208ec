/**
 * Delivery while the process exits.
 *
 * OpenClaw runs `gateway_stop` before the shutdown and restart `session_end`s,
 * and `openclaw agent --local` exits right after its run: the last events of a
 * process are handed over when nothing asynchronous will run any more. In the
 * process 'exit' handler only synchronous work is possible, so the queue is
 * sent by a short child process (the same Node binary) that the handler waits
 * for, bounded by a time budget; what it could not deliver stays on disk for
 * the next start. Re-sending what had in fact arrived is harmless: the server
 * answers "duplicate" for a known eventId.
 */
import { spawnSync } from "node:child_process";
import { HOOKS_PATH } from "./client.js";
import type { DiskQueue, ForwardRecord } from "./queue.js";

/** The child: reads {url, token, userAgent, batches} on stdin, prints the eventIds the server settled. */
const CHILD = `
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (c) => { input += c; });
process.stdin.on("end", async () => {
  const job = JSON.parse(input);
  const settled = [];
  for (const batch of job.batches) {
    try {
      const response = await fetch(job.url, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Authorization: "Bearer " + job.token,
          "User-Agent": job.userAgent,
        },
        body: JSON.stringify(batch.length === 1 ? batch[0] : batch),
      });
      await response.text();
      if (!response.ok) break;
      for (const record of batch) settled.push(record.eventId);
    } catch {
      break;
    }
  }
  process.stdout.write(JSON.stringify(settled));
});
`;

export interface ExitDeliveryOptions {
  baseUrl: string;
  token: string;
  userAgent: string;
  batchSize: number;
  budgetMs: number;
}

/**
 * Send what the queue holds, synchronously, within the budget. Returns how many
 * events the server took (0 when there was nothing or it could not be reached).
 */
export function deliverQueueSync(queue: DiskQueue, options: ExitDeliveryOptions): number {
  const records: ForwardRecord[] = queue.readAllSync();
  if (records.length === 0 || !options.token) return 0;
  const batches: ForwardRecord[][] = [];
  for (let i = 0; i < records.length; i += options.batchSize) {
    batches.push(records.slice(i, i + options.batchSize));
  }
  const job = {
    url: options.baseUrl.replace(/\/+$/, "") + HOOKS_PATH,
    token: options.token,
    userAgent: options.userAgent,
    batches,
  };
  const done = spawnSync(process.execPath, ["-e", CHILD], {
    input: JSON.stringify(job),
    encoding: "utf8",
    timeout: Math.max(100, options.budgetMs),
    env: { PATH: process.env.PATH ?? "" },
  });
  let settled: string[] = [];
  try {
    settled = JSON.parse(done.stdout || "[]") as string[];
  } catch {
    settled = [];
  }
  if (settled.length > 0) queue.removeSync(settled);
  return settled.length;
}
