/**
 * Delivery against the stand-in server: the record format, message trimming,
 * secrets, command hooks, and the retry queue (transient failures queued and
 * flushed in order with the same eventIds, permanent ones dropped).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clone, loadFixtures, readQueueFile, setupPlugin, waitFor, type FixtureLine, type Harness } from "./helpers/harness.js";
import { StandinServer, type Failure } from "./helpers/standin-server.js";

const basic = (): FixtureLine[] => loadFixtures().find((f) => f.name === "basic.jsonl")!.lines;

function fire(h: Harness, lines: FixtureLine[]): void {
  for (const line of lines) {
    h.clock.now = line.ts;
    h.api.handler(line.hook)(clone(line.event), clone(line.ctx));
  }
  h.clock.now = null;
}

async function withServer(fn: (server: StandinServer) => Promise<void>): Promise<void> {
  const server = new StandinServer("delivery-token");
  await server.start();
  try {
    await fn(server);
  } finally {
    await server.stop();
  }
}

test("each forwarded record is {hook, event, ctx, ts, eventId, gateway} with a bearer token", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      const line = basic()[0];
      h.clock.now = 1234567;
      h.api.handler(line.hook)(clone(line.event), clone(line.ctx));
      await h.runtime.idle();
      assert.equal(server.hookRequests().length, 1);
      const req = server.hookRequests()[0];
      assert.equal(req.authorization, "Bearer delivery-token");
      assert.ok(!Array.isArray(req.body), "a single event is sent as one object");
      assert.deepEqual(req.body, {
        hook: "session_start",
        event: line.event,
        ctx: line.ctx,
        ts: 1234567,
        eventId: h.eventIds[0],
        gateway: h.runtime.gatewayId,
      });
    } finally {
      h.cleanup();
    }
  });
});

test("agent_end keeps only the last recentMessages messages", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token, { recentMessages: 2 });
    try {
      const agentEnd = basic().find((l) => l.hook === "agent_end")!;
      const original = agentEnd.event.messages as unknown[];
      assert.equal(original.length, 4);
      fire(h, [agentEnd]);
      await h.runtime.idle();
      const sent = server.accepted[0].record.event as Record<string, unknown>;
      assert.deepEqual(sent.messages, original.slice(-2));
      // Cut: the turn's real size and its whole usage (both assistant messages) go along.
      assert.deepEqual(
        { ...sent, messages: undefined },
        {
          ...agentEnd.event,
          messages: undefined,
          turnMessageCount: 4,
          turnUsage: { input: 9912, output: 405, model: "deepseek-r1:14b" },
        },
      );
      // The gateway's own event object is not modified.
      assert.equal(original.length, 4);
    } finally {
      h.cleanup();
    }
  });
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token, { recentMessages: 0 });
    try {
      fire(h, [basic().find((l) => l.hook === "agent_end")!]);
      await h.runtime.idle();
      assert.deepEqual((server.accepted[0].record.event as Record<string, unknown>).messages, []);
    } finally {
      h.cleanup();
    }
  });
});

test("agent_end carries the session's whole history: only the turn (from its last user message) is sent", async () => {
  // OpenClaw 2026.9 hands agent_end every message of the session; the old
  // "last 6" mixed turn 1's text into turn 2 (issue 14).
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      const history = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `m${i}` }));
      const turn = [
        { role: "user", content: "now" },
        { role: "assistant", content: [{ type: "toolCall", id: "t", name: "read", arguments: {} }] },
        { role: "toolResult", content: "file" },
        { role: "assistant", content: "done" },
      ];
      h.api.handler("agent_end")({ messages: [...history, ...turn], success: true, durationMs: 5 }, { sessionId: "s1", agentId: "a" });
      await h.runtime.idle();
      const sent = server.accepted[0].record.event as { messages: Array<{ content: unknown }>; turnMessageCount: number };
      assert.deepEqual(sent.messages, turn);
      assert.equal(sent.turnMessageCount, 4);
    } finally {
      h.cleanup();
    }
  });
});

test("the plugin's own config and gateway config never leave the process", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      const secret = "sk-live-SECRET-0123456789";
      h.api.handler("after_tool_call")(
        { toolName: "exec", params: {}, result: "ok", context: { pluginConfig: { token: secret }, note: "kept" } },
        { sessionId: "s1", config: { gateway: { token: secret } }, getSessionExtension: () => secret },
      );
      await h.runtime.idle();
      const raw = server.hookRequests().map((r) => r.raw).join("\n");
      assert.ok(!raw.includes(secret), "secret not sent");
      assert.ok(!raw.includes("pluginConfig"), "event.context.pluginConfig removed");
      const rec = server.accepted[0].record as { event: { context: Record<string, unknown> }; ctx: Record<string, unknown> };
      assert.deepEqual(rec.event.context, { note: "kept" });
      assert.deepEqual(rec.ctx, { sessionId: "s1" });
    } finally {
      h.cleanup();
    }
  });
});

test("command:new / command:reset / command:stop are forwarded with a slim context", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      const handler = h.api.internal[0].handler;
      handler({
        type: "command",
        action: "new",
        sessionKey: "main:discord:channel:1",
        context: {
          cfg: { secret: "do-not-send" },
          sessionEntry: { sessionId: "old-session", transcript: "x".repeat(1000) },
          commandSource: "discord",
          senderId: "user-1",
        },
        timestamp: new Date("2026-11-20T10:00:00Z"),
        messages: [],
      });
      await h.runtime.idle();
      const rec = server.accepted[0].record as Record<string, any>;
      assert.equal(rec.hook, "command:new");
      assert.deepEqual(rec.event, {
        type: "command",
        action: "new",
        sessionKey: "main:discord:channel:1",
        timestamp: "2026-11-20T10:00:00.000Z",
        context: { commandSource: "discord", senderId: "user-1", sessionEntryId: "old-session" },
      });
      assert.deepEqual(rec.ctx, { sessionKey: "main:discord:channel:1", sessionId: "old-session" });
      assert.ok(!server.hookRequests()[0].raw.includes("do-not-send"));
    } finally {
      h.cleanup();
    }
  });
});

const transientCases: Array<{ name: string; failure: Failure }> = [
  { name: "HTTP 500", failure: { kind: "status", status: 500 } },
  { name: "HTTP 503 with Retry-After", failure: { kind: "status", status: 503, retryAfter: "0" } },
  { name: "HTTP 429", failure: { kind: "status", status: 429, retryAfter: "0" } },
  { name: "a dropped connection", failure: { kind: "destroy" } },
  { name: "a timeout", failure: { kind: "hang" } },
];

for (const { name, failure } of transientCases) {
  test(`${name}: events are queued on disk, then flushed in order with the same eventIds`, async () => {
    await withServer(async (server) => {
      const h = setupPlugin(server.url, server.token, { timeoutMs: 300, batchSize: 4 });
      try {
        server.failHooks(failure);
        const lines = basic();
        fire(h, lines);
        await h.runtime.idle();
        assert.equal(server.accepted.length, 0, "nothing accepted while failing");
        assert.ok(server.hookRequests().length >= 1, "a delivery was attempted");
        // Backing off: the later events went to disk without further requests.
        assert.ok(server.hookRequests().length <= 2, `few attempts while failing (${server.hookRequests().length})`);
        const queued = readQueueFile(h.queueDir);
        assert.deepEqual(queued.map((r) => r.eventId), h.eventIds, "queued in order, with their eventIds");
        assert.deepEqual(queued.map((r) => r.hook), lines.map((l) => l.hook));
        assert.ok(h.api.logs.warn.some((m) => m.includes("SessionHub unavailable")), "the failure is logged");

        server.recover();
        await h.runtime.flush();
        assert.deepEqual(server.acceptedIds(), h.eventIds, "each event accepted once, in order");
        assert.equal(new Set(server.acceptedIds()).size, lines.length, "no duplicates");
        assert.deepEqual(readQueueFile(h.queueDir), [], "queue emptied");
        // The flush sent batches (arrays of at most batchSize).
        const flushBodies = server.hookRequests().filter((r) => r.status === 200).map((r) => r.body);
        assert.ok(flushBodies.some((b) => Array.isArray(b) && b.length === 4), "a full batch of 4");
        for (const b of flushBodies) if (Array.isArray(b)) assert.ok(b.length <= 4);
        // Records are unchanged by the round trip through the disk.
        server.accepted.forEach((a, i) => {
          assert.deepEqual(a.record.event, lines[i].event);
          assert.equal(a.record.ts, lines[i].ts);
        });
      } finally {
        h.cleanup();
      }
    });
  });
}

test("connection refused: queued, then delivered by the backoff timer once the server is back", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token, { retryBaseMs: 30, retryMaxMs: 60 });
    try {
      await server.down();
      const lines = basic();
      fire(h, lines);
      await h.runtime.idle();
      assert.deepEqual(readQueueFile(h.queueDir).map((r) => r.eventId), h.eventIds);

      // A later event while the server is still away goes behind the queued ones.
      h.api.handler("session_start")({ sessionId: "later" }, { sessionId: "later", agentId: "main" });
      await h.runtime.idle();
      assert.equal(readQueueFile(h.queueDir).length, lines.length + 1);

      await server.up();
      // No explicit flush: the retry timer must do it.
      const delivered = await waitFor(() => server.accepted.length === lines.length + 1, 5000);
      assert.ok(delivered, `timer flushed the queue (accepted ${server.accepted.length})`);
      assert.deepEqual(server.acceptedIds(), h.eventIds);
      await h.runtime.idle();
      assert.deepEqual(readQueueFile(h.queueDir), []);
    } finally {
      h.cleanup();
    }
  });
});

test("a re-send after a lost answer is deduplicated by eventId: stored once", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      // The server stores the events but answers 500 (the answer got lost).
      server.failHooks({ kind: "status", status: 500, process: true }, 1);
      const lines = basic().slice(0, 3);
      fire(h, lines);
      await h.runtime.idle();
      await h.runtime.flush();
      assert.deepEqual(server.acceptedIds(), h.eventIds, "stored once each");
      const lastAnswers = server.hookRequests().at(-1);
      assert.equal(lastAnswers?.status, 200);
      assert.deepEqual(readQueueFile(h.queueDir), []);
    } finally {
      h.cleanup();
    }
  });
});

test("HTTP 400 is permanent: dropped with a warning, never queued or re-sent", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      server.failHooks({ kind: "status", status: 400, body: '{"error":"malformed"}' }, 1);
      const [first, second] = basic();
      fire(h, [first]);
      await h.runtime.idle();
      assert.equal(server.hookRequests().length, 1);
      assert.deepEqual(readQueueFile(h.queueDir), []);
      assert.ok(h.api.logs.warn.some((m) => m.includes("refused") && m.includes("400")), h.api.logs.warn.join("\n"));

      fire(h, [second]);
      await h.runtime.idle();
      await h.runtime.flush();
      assert.deepEqual(server.acceptedIds(), [h.eventIds[1]], "only the second event, the first is not re-sent");
    } finally {
      h.cleanup();
    }
  });
});

test("HTTP 401 keeps the events queued and says so loudly once; a working token delivers them", async () => {
  // A refused token is configuration, not the events' fault: the old "drop as
  // permanent" lost everything a mis-set token saw (issue 14).
  await withServer(async (server) => {
    const h = setupPlugin(server.url, "wrong-token", { retryBaseMs: 10, retryMaxMs: 20 });
    try {
      fire(h, basic().slice(0, 2));
      await h.runtime.idle();
      await h.runtime.flush();
      fire(h, basic().slice(2, 3));
      await h.runtime.flush();
      assert.equal(server.accepted.length, 0);
      assert.deepEqual(readQueueFile(h.queueDir).map((r) => r.eventId), h.eventIds);
      const loud = h.api.logs.error.filter((m) => m.includes("refused the API token (HTTP 401)"));
      assert.equal(loud.length, 1, "said once");
      assert.ok(h.runtime.forwarder.refusingToken);
      // The token is fixed (a restart with the right config reads the same queue).
      h.runtime.stop();
      const fixed = setupPlugin(server.url, server.token, {}, {}, h.queueDir);
      try {
        await fixed.runtime.flush();
        assert.deepEqual(server.acceptedIds(), h.eventIds);
        assert.deepEqual(readQueueFile(h.queueDir), []);
      } finally {
        fixed.cleanup();
      }
    } finally {
      h.cleanup();
    }
  });
});

test("a 400 on a batch isolates the bad event: the others are delivered", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token, { extraHooks: ["poison_hook"] });
    try {
      await server.down();
      h.api.handler("session_start")({ sessionId: "a" }, { sessionId: "a" });
      h.api.handler("poison_hook")({ x: 1 }, { sessionId: "a" });
      h.api.handler("session_end")({ sessionId: "a", messageCount: 1 }, { sessionId: "a" });
      await h.runtime.idle();
      assert.equal(readQueueFile(h.queueDir).length, 3);
      server.badRequestHooks.add("poison_hook");
      await server.up();
      await h.runtime.flush();
      assert.deepEqual(server.acceptedIds(), [h.eventIds[0], h.eventIds[2]]);
      assert.deepEqual(readQueueFile(h.queueDir), []);
      assert.ok(h.api.logs.warn.some((m) => m.includes("poison_hook")));
    } finally {
      h.cleanup();
    }
  });
});

test("an event answered 'rejected' is dropped with a warning, not queued", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token, { extraHooks: ["odd_hook"] });
    try {
      server.rejectHooks.add("odd_hook");
      h.api.handler("odd_hook")({ a: 1 }, {});
      await h.runtime.idle();
      assert.equal(server.hookRequests().length, 1);
      assert.deepEqual(readQueueFile(h.queueDir), []);
      assert.ok(h.api.logs.warn.some((m) => m.includes("rejected") && m.includes(h.eventIds[0])));
      await h.runtime.flush();
      assert.equal(server.hookRequests().length, 1, "not re-sent");
    } finally {
      h.cleanup();
    }
  });
});

test("queued events survive a restart: the next runtime on the same queueDir delivers them", async () => {
  await withServer(async (server) => {
    const dir = mkdtempSync(join(tmpdir(), "sessionhub-restart-"));
    try {
      await server.down();
      const a = setupPlugin(server.url, server.token, {}, {}, dir);
      fire(a, basic());
      await a.runtime.idle();
      a.cleanup();
      assert.equal(readQueueFile(dir).length, basic().length);

      await server.up();
      const b = setupPlugin(server.url, server.token, {}, {}, dir);
      try {
        const delivered = await waitFor(() => server.accepted.length === basic().length, 5000);
        assert.ok(delivered, "the new runtime flushed the old queue on start");
        assert.deepEqual(server.acceptedIds(), a.eventIds);
        assert.equal(b.eventIds.length, 0);
      } finally {
        b.cleanup();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test("the queue keeps at most maxQueueEvents, dropping the oldest", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token, { maxQueueEvents: 5 });
    try {
      await server.down();
      for (let i = 0; i < 8; i++) h.api.handler("session_start")({ sessionId: `s${i}` }, { sessionId: `s${i}` });
      await h.runtime.idle();
      const queued = readQueueFile(h.queueDir);
      assert.deepEqual(queued.map((r) => r.eventId), h.eventIds.slice(3));
      assert.ok(h.api.logs.warn.some((m) => m.includes("over capacity")));
    } finally {
      h.cleanup();
    }
  });
});

test("an unreadable line in the queue file is skipped, the rest is delivered", async () => {
  await withServer(async (server) => {
    const dir = mkdtempSync(join(tmpdir(), "sessionhub-corrupt-"));
    try {
      const { writeFileSync } = await import("node:fs");
      const good = { hook: "session_start", event: { sessionId: "x" }, ctx: {}, ts: 1, eventId: "11111111-1111-4111-8111-111111111111" };
      writeFileSync(join(dir, "queue.jsonl"), `${JSON.stringify(good)}\n{not json\n{"half": `);
      const h = setupPlugin(server.url, server.token, {}, {}, dir);
      try {
        await waitFor(() => server.accepted.length === 1, 3000);
        h.api.handler("session_end")({ sessionId: "x" }, { sessionId: "x" });
        await h.runtime.idle();
        assert.deepEqual(server.acceptedIds(), [good.eventId, h.eventIds[0]]);
        assert.ok(h.api.logs.warn.some((m) => m.includes("unreadable")));
      } finally {
        h.cleanup();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test("gateway_stop: bounded wait, and the forwarder keeps delivering the session_ends that follow it", async () => {
  // OpenClaw runs gateway_stop before the shutdown/restart session_ends; the old
  // plugin stopped there and those ends waited for the next start (issue 14).
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token, { timeoutMs: 300 });
    try {
      server.failHooks({ kind: "hang" });
      fire(h, basic().slice(0, 3));
      const started = Date.now();
      await h.api.handler("gateway_stop")({ reason: "shutdown" }, {});
      assert.ok(Date.now() - started < 1500, "bounded by timeoutMs");
      server.recover();
      h.api.handler("session_end")({ sessionId: "late", reason: "shutdown" }, { sessionId: "late" });
      await h.runtime.flush();
      for (const id of h.eventIds) assert.ok(server.acceptedIds().includes(id), `${id} delivered`);
    } finally {
      h.cleanup();
    }
  });
});

test("a non-live load (registrationMode discovery) registers hooks but starts no background flush", async () => {
  await withServer(async (server) => {
    const dir = mkdtempSync(join(tmpdir(), "sessionhub-discovery-"));
    try {
      const { writeFileSync } = await import("node:fs");
      const rec = { hook: "session_start", event: {}, ctx: {}, ts: 1, eventId: "22222222-2222-4222-8222-222222222222" };
      writeFileSync(join(dir, "queue.jsonl"), JSON.stringify(rec) + "\n");
      const { makeFakeApi } = await import("./helpers/harness.js");
      const { default: entry, getSessionHubRuntime } = await import("../src/index.js");
      const api = Object.assign(makeFakeApi({ baseUrl: server.url, token: server.token, queueDir: dir }), {
        registrationMode: "discovery",
      });
      entry.register(api);
      const runtime = getSessionHubRuntime(api);
      try {
        assert.ok(api.hooks().includes("agent_end"));
        await new Promise((r) => setTimeout(r, 200));
        assert.equal(server.requests.length, 0, "no request from a discovery load");
        assert.equal(readQueueFile(dir).length, 1);
      } finally {
        runtime?.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
