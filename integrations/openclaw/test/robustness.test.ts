/**
 * Hooks never throw into the gateway and never block it: odd inputs, a
 * broken logger, a hanging or absent server, and a process that exits with
 * deliveries still in flight.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PACKAGE_ROOT, readQueueFile, setupPlugin } from "./helpers/harness.js";
import { StandinServer } from "./helpers/standin-server.js";

function weirdInputs(): Array<[unknown, unknown]> {
  const circular: Record<string, unknown> = { sessionId: "c" };
  circular.self = circular;
  const throwing = Object.defineProperty({ sessionId: "t" }, "boom", {
    enumerable: true,
    get() {
      throw new Error("getter exploded");
    },
  });
  return [
    [undefined, undefined],
    [null, null],
    ["a string", 42],
    [[1, 2, 3], []],
    [circular, circular],
    [throwing, throwing],
    [{ messages: "not an array", big: 10n, when: new Date(0), fn: () => 1, sym: Symbol("x") }, { sessionId: 5 }],
    [{ messages: [null, undefined, { role: "assistant" }], nested: { deeper: { map: new Map([["k", 1]]) } } }, { sessionId: "m" }],
  ];
}

test("every registered handler survives odd inputs without throwing or rejecting", async () => {
  const server = new StandinServer("r-token");
  await server.start();
  const h = setupPlugin(server.url, server.token);
  try {
    for (const reg of h.api.registrations) {
      if (reg.hook === "gateway_stop") continue; // stops the runtime; tested separately
      for (const [event, ctx] of weirdInputs()) {
        let result: unknown;
        assert.doesNotThrow(() => {
          result = reg.handler(event, ctx);
        }, `${reg.hook} threw`);
        if (result && typeof (result as Promise<unknown>).then === "function") {
          await assert.doesNotReject(result as Promise<unknown>, `${reg.hook} rejected`);
        }
      }
    }
    for (const [event] of weirdInputs()) assert.doesNotThrow(() => h.api.internal[0].handler(event));
    await h.runtime.idle();
    // The circular and throwing-getter events were still forwarded as JSON.
    const circular = server.accepted.find((a) => (a.record.event as Record<string, unknown>)?.self === "[Circular]");
    assert.ok(circular, "circular reference replaced");
    assert.equal(h.api.logs.error.length, 0, h.api.logs.error.join("\n"));
  } finally {
    h.cleanup();
    await server.stop();
  }
});

test("observation hooks return at once even when the server hangs", async () => {
  const server = new StandinServer("r-token");
  await server.start();
  server.failHooks({ kind: "hang" });
  const h = setupPlugin(server.url, server.token, { timeoutMs: 2000 });
  try {
    const started = process.hrtime.bigint();
    for (let i = 0; i < 50; i++) {
      const r = h.api.handler("after_tool_call")({ toolName: "exec", params: { i }, result: "x" }, { sessionId: "s" });
      assert.equal(r, undefined);
    }
    const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
    assert.ok(elapsedMs < 500, `50 hook calls took ${elapsedMs.toFixed(1)} ms`);
  } finally {
    server.recover();
    h.cleanup();
    await server.stop();
  }
});

test("a logger that throws does not break hooks", async () => {
  const server = new StandinServer("r-token");
  await server.start();
  await server.down();
  const h = setupPlugin(server.url, server.token);
  try {
    const explode = () => {
      throw new Error("logger down");
    };
    h.api.logger.warn = explode;
    h.api.logger.info = explode;
    h.api.logger.error = explode;
    h.api.logger.debug = explode;
    assert.doesNotThrow(() => h.api.handler("session_start")({ sessionId: "x" }, { sessionId: "x" }));
    const r = await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, { sessionId: "x" });
    assert.equal(r, undefined);
    await h.runtime.idle();
    // The start and the prompt (before_prompt_build forwards the user's words).
    assert.equal(readQueueFile(h.queueDir).length, 2, "still queued");
  } finally {
    h.cleanup();
  }
});

test("a queue directory that cannot be written loses events with an error log, but never throws", async () => {
  const server = new StandinServer("r-token");
  await server.start();
  await server.down();
  // A path below a regular file can never become a directory.
  const blocker = join(mkdtempSync(join(tmpdir(), "sessionhub-blocked-")), "file");
  writeFileSync(blocker, "not a directory");
  const h = setupPlugin(server.url, server.token, { queueDir: join(blocker, "queue") });
  try {
    assert.doesNotThrow(() => h.api.handler("session_start")({ sessionId: "x" }, { sessionId: "x" }));
    await h.runtime.idle();
    assert.ok(h.api.logs.error.some((m) => m.includes("retry queue")), JSON.stringify(h.api.logs));
  } finally {
    h.cleanup();
  }
});

test("a process that exits with deliveries in flight keeps them in the disk queue", async () => {
  const server = new StandinServer("r-token");
  await server.start();
  server.failHooks({ kind: "hang" });
  const dir = mkdtempSync(join(tmpdir(), "sessionhub-exit-"));
  try {
    const child = join(PACKAGE_ROOT, "dist", "test", "helpers", "exit-child.js");
    const run = spawnSync(process.execPath, [child, server.url, server.token, dir], { encoding: "utf8", timeout: 20000 });
    assert.equal(run.status, 0, run.stderr);
    const ids = JSON.parse(run.stdout.trim().split("\n").at(-1) ?? "[]") as string[];
    assert.equal(ids.length, 3);
    const queued = readQueueFile(dir).map((r) => r.eventId);
    assert.deepEqual([...new Set(queued)].sort(), [...ids].sort());
  } finally {
    server.recover();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
