/**
 * Continuity preamble: asked once per session on the first prompt hook,
 * returned as { prependContext } when non-empty, nothing otherwise, and never
 * slower than timeoutMs.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { setupPlugin } from "./helpers/harness.js";
import { StandinServer } from "./helpers/standin-server.js";

const PREAMBLE = "## Continuity\nYou were fixing webhooks/retry.py (exponential backoff with jitter).";

function ctxFor(sessionId: string, agentId = "research"): Record<string, unknown> {
  return { agentId, sessionId, sessionKey: `${agentId}:discord:channel:42`, workspaceDir: "/w", trigger: "user" };
}

async function withServer(fn: (server: StandinServer) => Promise<void>): Promise<void> {
  const server = new StandinServer("cont-token");
  await server.start();
  try {
    await fn(server);
  } finally {
    await server.stop();
  }
}

test("before_prompt_build returns the preamble as prependContext, once per session", async () => {
  await withServer(async (server) => {
    server.preambles.set("s-1", PREAMBLE);
    server.preambles.set("s-2", "Other preamble");
    const h = setupPlugin(server.url, server.token);
    try {
      const build = h.api.handler("before_prompt_build");
      const first = await build({ prompt: "Fix the flaky retry logic", messages: [] }, ctxFor("s-1"));
      assert.deepEqual(first, { prependContext: PREAMBLE });
      const req = server.continuityRequests();
      assert.equal(req.length, 1);
      assert.equal(req[0].authorization, "Bearer cont-token");
      assert.deepEqual(req[0].body, {
        source: "openclaw",
        agent_id: "research",
        session_id: "s-1",
        session_key: "research:discord:channel:42",
        prompt: "Fix the flaky retry logic",
        gateway: h.runtime.gatewayId,
      });

      const second = await build({ prompt: "and the tests", messages: [] }, ctxFor("s-1"));
      assert.equal(second, undefined, "second prompt of the session: nothing");
      assert.equal(server.continuityRequests().length, 1, "asked once");

      const other = await build({ prompt: "new topic", messages: [] }, ctxFor("s-2"));
      assert.deepEqual(other, { prependContext: "Other preamble" });
      assert.equal(server.continuityRequests().length, 2);
    } finally {
      h.cleanup();
    }
  });
});

test("a reset in place (/new keeps the session id): the next prompt asks again", async () => {
  await withServer(async (server) => {
    server.defaultPreamble = PREAMBLE;
    const h = setupPlugin(server.url, server.token);
    try {
      const build = h.api.handler("before_prompt_build");
      assert.deepEqual(await build({ prompt: "one", messages: [] }, ctxFor("same")), { prependContext: PREAMBLE });
      assert.equal(await build({ prompt: "two", messages: [] }, ctxFor("same")), undefined);
      // OpenClaw 2026.9: session_end names the same id as the next, session_start resumes from it.
      h.api.handler("session_end")({ sessionId: "same", reason: "new", nextSessionId: "same" }, ctxFor("same"));
      h.api.handler("session_start")({ sessionId: "same", resumedFrom: "same" }, ctxFor("same"));
      assert.deepEqual(await build({ prompt: "three", messages: [] }, ctxFor("same")), { prependContext: PREAMBLE });
      assert.equal(server.continuityRequests().length, 2);
    } finally {
      h.cleanup();
    }
  });
});

test("a background run (ctx.trigger heartbeat): no preamble asked, no prompt event", async () => {
  await withServer(async (server) => {
    server.defaultPreamble = PREAMBLE;
    const h = setupPlugin(server.url, server.token);
    try {
      const ctx = { ...ctxFor("hb"), trigger: "heartbeat" };
      assert.equal(await h.api.handler("before_prompt_build")({ prompt: "Read HEARTBEAT.md", messages: [] }, ctx), undefined);
      await h.runtime.idle();
      assert.equal(server.continuityRequests().length, 0);
      assert.deepEqual(server.accepted.map((a) => a.record.hook), []);
    } finally {
      h.cleanup();
    }
  });
});

test("before_prompt_build forwards the user's words as a prompt event, once (not again after a channel message)", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      const build = h.api.handler("before_prompt_build");
      await build({ prompt: "typed on the CLI", messages: [{ role: "user", content: "old" }], systemPrompt: "x" }, ctxFor("cli"));
      h.api.handler("message_received")({ from: "u", content: "from discord" }, { channelId: "discord" });
      await build({ prompt: "[context]\nfrom discord", messages: [] }, ctxFor("cli"));
      await h.runtime.idle();
      const prompts = server.accepted.filter((a) => a.record.hook === "before_prompt_build");
      assert.equal(prompts.length, 1);
      assert.deepEqual(prompts[0].record.event, { prompt: "typed on the CLI" });
    } finally {
      h.cleanup();
    }
  });
});

test("a later prompt gets what waits for its session (a manual continue), once", async () => {
  await withServer(async (server) => {
    server.preambles.set("s-w", PREAMBLE);
    const h = setupPlugin(server.url, server.token);
    try {
      const build = h.api.handler("before_prompt_build");
      assert.deepEqual(await build({ prompt: "start", messages: [] }, ctxFor("s-w")), { prependContext: PREAMBLE });
      assert.equal(await build({ prompt: "go on", messages: [] }, ctxFor("s-w")), undefined, "nothing waits");
      server.waiting.set("s-w", "Continued by hand from billing-api");
      const handed = await build({ prompt: "and now", messages: [] }, ctxFor("s-w"));
      assert.deepEqual(handed, { prependContext: "Continued by hand from billing-api" });
      assert.equal(await build({ prompt: "again", messages: [] }, ctxFor("s-w")), undefined, "once");
      const pending = server.pendingRequests();
      assert.equal(pending.length, 3);
      assert.deepEqual(pending[0].body, {
        source: "openclaw",
        agent_id: "research",
        session_id: "s-w",
        session_key: "research:discord:channel:42",
        pending: true,
        gateway: h.runtime.gatewayId,
      });
      assert.equal(server.continuityRequests().length, 1, "the preamble itself: asked once");
    } finally {
      h.cleanup();
    }
  });
});

test("an empty (or blank) preamble injects nothing", async () => {
  await withServer(async (server) => {
    server.preambles.set("cold", "");
    server.preambles.set("blank", "  \n ");
    const h = setupPlugin(server.url, server.token);
    try {
      assert.equal(await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("cold")), undefined);
      assert.equal(await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("blank")), undefined);
      assert.equal(server.continuityRequests().length, 2);
    } finally {
      h.cleanup();
    }
  });
});

test("server down (connection refused): nothing injected, quickly", async () => {
  await withServer(async (server) => {
    server.defaultPreamble = PREAMBLE;
    const h = setupPlugin(server.url, server.token, { timeoutMs: 400 });
    try {
      await server.down();
      const started = Date.now();
      const result = await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("down"));
      assert.equal(result, undefined);
      assert.ok(Date.now() - started < 400 + 400, "within timeoutMs");
    } finally {
      h.cleanup();
    }
  });
});

test("server hangs: nothing injected, and the hook returns within timeoutMs", async () => {
  await withServer(async (server) => {
    server.defaultPreamble = PREAMBLE;
    server.continuityFailure = { kind: "hang" };
    const h = setupPlugin(server.url, server.token, { timeoutMs: 300 });
    try {
      const started = Date.now();
      const result = await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("slow"));
      const elapsed = Date.now() - started;
      assert.equal(result, undefined);
      assert.ok(elapsed >= 250 && elapsed < 300 + 400, `bounded by timeoutMs (took ${elapsed} ms)`);
    } finally {
      server.recover();
      h.cleanup();
    }
  });
});

test("hook forwarding stuck on a hanging server does not push continuity past timeoutMs", async () => {
  await withServer(async (server) => {
    server.defaultPreamble = PREAMBLE;
    server.failHooks({ kind: "hang" });
    const h = setupPlugin(server.url, server.token, { timeoutMs: 400 });
    try {
      h.api.handler("session_start")({ sessionId: "busy" }, ctxFor("busy"));
      const started = Date.now();
      const result = await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("busy"));
      const elapsed = Date.now() - started;
      assert.deepEqual(result, { prependContext: PREAMBLE }, "continuity itself still answered");
      assert.ok(elapsed < 400 + 400, `took ${elapsed} ms`);
    } finally {
      server.recover();
      h.cleanup();
    }
  });
});

test("HTTP 500 or a non-JSON answer from continuity: nothing injected", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      server.continuityFailure = { kind: "status", status: 500 };
      assert.equal(await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("e1")), undefined);
      server.continuityFailure = { kind: "status", status: 200, body: "<html>proxy</html>" };
      assert.equal(await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("e2")), undefined);
      server.continuityFailure = { kind: "status", status: 200, body: JSON.stringify({ preamble: 42 }) };
      assert.equal(await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("e3")), undefined);
    } finally {
      h.cleanup();
    }
  });
});

test("a session already under way (history holds an assistant turn) is not asked", async () => {
  await withServer(async (server) => {
    server.defaultPreamble = PREAMBLE;
    const h = setupPlugin(server.url, server.token);
    try {
      const messages = [
        { role: "user", content: "hi" },
        { role: "assistant", content: [{ type: "text", text: "hello" }] },
      ];
      const result = await h.api.handler("before_prompt_build")({ prompt: "are you back?", messages }, ctxFor("resumed"));
      assert.equal(result, undefined);
      assert.equal(server.continuityRequests().length, 0);
    } finally {
      h.cleanup();
    }
  });
});

test("no session id or key: nothing asked; injectPreamble=false: never asked", async () => {
  await withServer(async (server) => {
    server.defaultPreamble = PREAMBLE;
    const h = setupPlugin(server.url, server.token);
    try {
      assert.equal(await h.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, { agentId: "a" }), undefined);
      assert.equal(server.continuityRequests().length, 0);
    } finally {
      h.cleanup();
    }
    const off = setupPlugin(server.url, server.token, { injectPreamble: false });
    try {
      // Still registered (it forwards the prompt), but never asks.
      assert.equal(await off.api.handler("before_prompt_build")({ prompt: "p", messages: [] }, ctxFor("q")), undefined);
      off.api.handler("session_start")({ sessionId: "q" }, ctxFor("q"));
      await off.runtime.idle();
      assert.equal(server.continuityRequests().length, 0);
    } finally {
      off.cleanup();
    }
  });
});

test("a long prompt is cut before it is sent", async () => {
  await withServer(async (server) => {
    const h = setupPlugin(server.url, server.token);
    try {
      await h.api.handler("before_prompt_build")({ prompt: "x".repeat(20000), messages: [] }, ctxFor("long"));
      const body = server.continuityRequests()[0].body as { prompt: string };
      assert.equal(body.prompt.length, 8000);
    } finally {
      h.cleanup();
    }
  });
});

test("a heartbeat that ran first after /new does not make the user's first prompt a resumed session", async () => {
  await withServer(async (server) => {
    server.defaultPreamble = PREAMBLE;
    const h = setupPlugin(server.url, server.token);
    try {
      h.api.handler("session_end")({ sessionId: "hb", reason: "new", nextSessionId: "hb" }, ctxFor("hb"));
      h.api.handler("session_start")({ sessionId: "hb", resumedFrom: "hb" }, ctxFor("hb"));
      const build = h.api.handler("before_prompt_build");
      assert.equal(await build({ prompt: "HEARTBEAT", messages: [] }, { ...ctxFor("hb"), trigger: "heartbeat" }), undefined);
      const history = [
        { role: "user", content: "HEARTBEAT" },
        { role: "assistant", content: "HEARTBEAT_OK" },
      ];
      assert.deepEqual(await build({ prompt: "mine", messages: history }, ctxFor("hb")), { prependContext: PREAMBLE });
      // Without a start seen here (a gateway restart), the same history means resumed.
      assert.equal(await build({ prompt: "x", messages: history }, ctxFor("restarted")), undefined);
      assert.equal(server.continuityRequests().length, 1);
    } finally {
      h.cleanup();
    }
  });
});
